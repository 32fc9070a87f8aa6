"""(i) Tier 2: the trainjob backend through the real Kubeflow Trainer v2.3.0 controller and
JobSet v0.12.0 (webhooks on 127.0.0.1, tests/cluster/operators.py) to Complete and Failed.

Upstream behaviour relied on:
- Trainer v2.3.0 pkg/runtime/framework/plugins/jobset: a TrainJob against our
  ClusterTrainingRuntime (manifests/trainer) becomes a JobSet with replicated jobs
  ``node`` and ``launcher``; plugins/mpi/mpi.go adds ``<name>-mpi-ssh-auth`` and
  ``<name>-mpi-hostfile``; pkg/controller/trainjob_controller.go copies the JobSet's
  Completed/Failed into the TrainJob's ``Complete``/``Failed`` conditions.
- JobSet v0.12.0 pkg/controllers/jobset_controller.go: ``successPolicy`` (All of
  ``launcher``) completes the JobSet; ``failurePolicy.maxRestarts: 0`` fails it at the
  first failed Job (reason FailedJobs / message naming the job).
- Kubernetes Job controller: a ``restartPolicy: Never`` pod in phase Failed with
  ``backoffLimit: 0`` fails its Job.
"""

from __future__ import annotations

import json

import pytest

from kfp_gpu.mpi.launch.records import MPIJobFailed
from kfp_gpu.mpi.spec import backends
from tests.cluster import jobs, kube


@pytest.mark.parametrize("outcome", ["succeed", "fail"])
def test_trainjob_through_trainer_and_jobset(tier2, api, namespace, tmp_path, trainer_runtime,
                                             outcome):
    name = "resnet-tj"
    job = jobs.component_job(namespace, name, workers=2, backend=backends.TRAINJOB)
    assert job["spec"]["runtimeRef"]["name"] == trainer_runtime
    run = jobs.Launch(api, job, tmp_path / "record.json")
    run.start()
    pod = jobs.launcher_pod(api, namespace, name, backend=backends.TRAINJOB)
    assert pod.spec.containers[0].name == "node"
    js = kube.get_custom(api, "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name)
    assert [r["name"] for r in js["spec"]["replicatedJobs"]] == ["node", "launcher"]
    core = kube.core(api)
    assert core.read_namespaced_secret(f"{name}-mpi-ssh-auth", namespace)
    hostfile = core.read_namespaced_config_map(f"{name}-mpi-hostfile", namespace).data
    assert len([h for h in hostfile["hostfile"].splitlines() if h.strip()]) == 2
    jobs.end_launcher(api, namespace, name, outcome, backend=backends.TRAINJOB)
    result, error = run.outcome()
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["kind"] == "TrainJob" and record["uid"]
    tj = kube.get_custom(api, "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name)
    conds = kube.conditions(tj)
    if outcome == "succeed":
        assert error is None, error
        assert result.status == "Succeeded"
        assert conds["Complete"]["status"] == "True"
    else:
        assert isinstance(error, MPIJobFailed), (result, error)
        assert conds["Failed"]["status"] == "True"
        assert error.reason == conds["Failed"]["reason"]
