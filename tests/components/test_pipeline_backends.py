"""resnet-horovod takes the job backend (mpijob | trainjob) as a run-time pipeline
parameter, passed to train_resnet_horovod: one compiled YAML serves both backends."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("gpu", ["gpu:8", "mig:3g.40gb"])
def test_resnet_horovod_compiles_with_a_backend_parameter(tmp_path, gpu):
    import yaml
    from kfp import compiler

    from kfp_gpu.pipelines import resnet_horovod

    path = tmp_path / "p.yaml"
    compiler.Compiler().compile(resnet_horovod.build(gpu), str(path))
    spec = next(yaml.safe_load_all(path.read_text()))  # then the platform spec
    root = spec["root"]["inputDefinitions"]["parameters"]["backend"]
    assert (root["parameterType"], root["defaultValue"]) == ("STRING", "mpijob")
    tasks = spec["root"]["dag"]["tasks"]
    (train,) = [t for name, t in tasks.items() if name.startswith("train-resnet-horovod")]
    assert train["inputs"]["parameters"]["backend"] == {"componentInputParameter": "backend"}
    comp = spec["components"][train["componentRef"]["name"]]
    assert comp["inputDefinitions"]["parameters"]["backend"]["defaultValue"] == "mpijob"
