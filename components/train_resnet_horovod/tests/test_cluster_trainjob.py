"""train_resnet_horovod with ``backend="trainjob"``, end to end against the Kubernetes API
double playing Kubeflow Trainer on JobSet (same harness as test_cluster_mode.py):
the same TaskConfig becomes a TrainJob on the kfp-gpu-horovod runtime that validates
against the upstream CRD, the launcher follows it to Complete, and the outputs are the
model rank 0 wrote and the metrics of the launcher log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kfp_gpu.mpi.spec import trainjob
from kfp_gpu.training import horovod_config, horovod_runtime
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support import upstream_crds

from . import test_cluster_mode as rc
from .test_cluster_mode import (
    CLAIM,
    NS,
    SECRET,
    SECRET_DIR,
    TASK_CONFIG,
    Outputs,
    _flag,
    run_component,
    trainer_metrics_line,
)

kube, data, keras_model = rc.kube, rc.data, rc.keras_model  # the same fixtures


@dataclass
class TrainerRankZero(ScriptedController):
    """Trainer-on-JobSet double that also plays rank 0: it saves ``model`` where the argv
    of the TrainJob's ``trainer.command`` tells the trainer to."""

    model: object = None

    def run(self, kube: FakeKube, ns: str, name: str) -> None:
        job = kube.get_object("trainjobs", ns, name)
        argv = job["spec"]["trainer"]["command"]
        if self.model is not None and self.outcome == "Succeeded":
            cfg = horovod_config.HorovodConfig(
                mode="train", output_dir=_flag(argv, "--output-dir"),
                model_dir=_flag(argv, "--model-dir")).resolved()
            horovod_runtime.save_model(self.model, cfg.model_dir)
        super().run(kube, ns, name)


def test_trainjob_backend_end_to_end(kube, data, tmp_path, keras_model):
    import keras

    world = 2 * 8
    expected, line = trainer_metrics_line(world)
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    work = tmp_path / "pvc" / "resnet-work"
    kube.controller = TrainerRankZero(outcome="Succeeded", log=["hvd.init", line],
                                      model=keras_model)

    run_component(out, work, backend="trainjob")

    assert kube.count("POST", "/trainjobs") == 1 and kube.count("POST", "/mpijobs") == 0
    name = rc.job_name_of(out)
    job = kube.get_object("trainjobs", NS, name)
    posted = next(r.body for r in kube.requests if r.method == "POST")
    upstream_crds.validate(posted)
    t = job["spec"]["trainer"]
    assert (t["numNodes"], t["numProcPerNode"]) == (2, 8)
    assert t["resourcesPerNode"]["limits"] == {"cpu": "32", "memory": "256Gi",
                                               "nvidia.com/gpu": "8"}
    assert t["command"][t["command"].index("-np") + 1] == str(world)
    assert {"name": "NCCL_DEBUG", "value": "WARN"} in t["env"]
    assert job["spec"]["runtimeRef"]["name"] == trainjob.DEFAULT_RUNTIME
    (patch,) = job["spec"]["runtimePatches"]
    for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"]["template"]["spec"]
        assert TASK_CONFIG.tolerations[0] in pod["tolerations"]
        assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert {"name": f"pvc-{CLAIM}", "persistentVolumeClaim": {"claimName": CLAIM}} in \
            pod["volumes"]
        # the task's Secret on every pod of both replicated jobs (the launcher hosts ranks)
        assert {"name": f"secret-{SECRET}", "secret": {"secretName": SECRET}} in pod["volumes"]
        assert pod["containers"] == [{"name": "node", "volumeMounts": [
            {"name": f"pvc-{CLAIM}", "mountPath": str(work.parent)},
            {"name": f"secret-{SECRET}", "mountPath": SECRET_DIR, "readOnly": True}]}]
    rec = json.loads(Path(out.mpijob.path).read_text())
    assert rec == {"apiVersion": trainjob.API_VERSION, "kind": "TrainJob", "namespace": NS,
                   "name": name, "uid": job["metadata"]["uid"]}
    got = out.metrics.metadata
    assert got["world_size"] == world
    assert got["img_per_sec_total"] == pytest.approx(expected["img_per_sec_total"])
    loaded = keras.saving.load_model(Path(out.model.path) / "model.keras")
    x = np.zeros((2, 8, 8, 1), np.float32)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), keras_model.predict(x, verbose=0),
                               rtol=1e-6)


@pytest.mark.parametrize("execution", ["cluster", "local"])
def test_unknown_backend_is_refused_before_anything_happens(kube, data, tmp_path,
                                                             execution):
    out = Outputs(tmp_path / "a", tmp_path / "in")
    with pytest.raises(ValueError, match="invalid backend 'pytorchjob'; accepted: 'mpijob', "
                                         "'trainjob'"):
        run_component(out, tmp_path / "pvc" / "w", backend="pytorchjob", execution=execution)
    assert kube.requests == [] and not (tmp_path / "pvc" / "w").exists()
    assert not Path(out.mpijob.path).exists()
