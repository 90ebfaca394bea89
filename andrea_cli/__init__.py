"""andrea: the attention equation of a decoder-only transformer, made tangible on real kernels."""

__version__ = "0.1.0"
