"""`andrea info`: the backends it lists, the compiler it and the CPU backend agree on, and the
CUDA extra it names for this driver."""

import json


def test_info_names_the_extra_for_this_driver(cli):
    document = cli.json("info")
    cuda = document["cuda"]
    assert cuda["extra"] in ("cuda12", "cuda13")
    assert cuda["driver"] == document["cuda_driver"]  # None here: no NVIDIA driver
    assert set(cuda["cupy_wheels"]) <= {"cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy"}
    assert (cuda["problem"] is None) == (cuda["fix"] is None)


def test_info_lists_backends(cli):
    doc = json.loads(cli("info", "--json").stdout)
    assert doc["backends"]["numpy"]["available"] is True
    assert "scores_kernel1" in doc["kernels"]
    assert cli("info").exit_code == 0


def test_info_and_the_cpu_backend_agree_on_the_compiler(cli, monkeypatch):
    # one compiler finder: a $CXX that is not there is "no compiler" for info, the backend and the build alike
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    doc = cli.json("info")
    assert doc["cxx"] is None
    cpu = doc["backends"]["cpu"]
    assert cpu["available"] is False and "no-such-compiler-xyz" in cpu["reason"]
    result = cli("attend", "--T", 8, "--d-k", 4, "--backend", "cpu")
    # this machine lacks something (not the user's input): exit 1, as every setup problem
    assert result.exit_code == 1 and "no C++ compiler found" in result.output


def test_info_says_how_to_run_an_edited_copy(cli):
    doc = cli.json("info")
    assert "andrea attend --kernel cuda/microgpt_cuda.cu" in doc["edit_kernel"]
    assert "andrea attend --kernel cuda/microgpt_cuda.cu" in " ".join(cli("info").output.split())
