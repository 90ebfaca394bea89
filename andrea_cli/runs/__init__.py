"""One run of the equation, inputs to report, computed and never printed (render/ prints):

    head.py            one head, staged, on a backend -> AttentionReport
    fused.py           one head through the fused kernel -> FusedReport
    head_backward.py   one head's backward -> GradReport
    layer.py           the multi-head layer, x to output -> LayerReport
    layer_backward.py  the layer's dx and weight gradients -> LayerGradReport
    scaling.py         compare-scaling: each d_k unscaled and scaled -> ScalingReport
    gradient_flow.py   what compare-scaling measures of the backward
"""
