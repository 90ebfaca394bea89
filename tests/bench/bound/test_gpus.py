"""bench/bound/gpus.py: a device's name and SM count find its model, or say in one line why not."""

from __future__ import annotations

from andrea_cli.bench.bound.gpus import GPUS


def test_a_device_name_finds_its_model():
    from andrea_cli.bench.bound.gpus import spec_for_device

    assert spec_for_device("NVIDIA H200", 132)[0] is GPUS["h200"]
    assert spec_for_device("NVIDIA H100 80GB HBM3", 132)[0] is GPUS["h100"]
    assert spec_for_device("NVIDIA A100-SXM4-80GB", 108)[0] is GPUS["a100"]
    for name, sms, why in (("NVIDIA H100 PCIe", 114, "PCIE part"), ("NVIDIA H200", 100, "has 100 SMs"),
                           ("NVIDIA GeForce RTX 4090", 128, "no model of NVIDIA GeForce RTX 4090")):
        spec, said = spec_for_device(name, sms)
        assert spec is None and why in said, said
