"""The launcher follows a Kubeflow Trainer TrainJob as it follows an MPIJob, against the
real-HTTP Kubernetes API double playing Trainer on JobSet (tests/doubles/k8s_resources.py):
create or re-attach, Complete/Failed with reason, launcher log from the JobSet-labelled
pod's ``node`` container, Foreground delete on SIGTERM."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kfp_gpu.mpi.launch import launcher
from kfp_gpu.mpi.launch.metrics import metrics_from_log
from kfp_gpu.mpi.spec import trainjob
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support.launcher_runs import FAST, cancel_while_running, run
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TRAINJOBS = "/trainjobs"
NAME = "resnet-test-1"


def make_job() -> dict:
    return trainjob.build(MPIJobOptions.from_settings(
        name=NAME, namespace="ml", image="horovod:test", program=("kfp-gpu", "train-resnet"),
        gpu="gpu:2", workers=2, rdma=True))


@pytest.fixture()
def kube():
    with FakeKube() as k:
        yield k


def test_success_follows_the_jobset_launcher_pod(kube, tmp_path):
    log = ["hvd.init: 4 ranks", "METRICS " + json.dumps({"world_size": 4})]
    kube.controller = ScriptedController(outcome="Succeeded", log=log)
    record = tmp_path / "rec.json"
    result, lines = run(kube, make_job(), record)
    assert result.status == "Succeeded" and not result.reattached
    stored = kube.get_object("trainjobs", "ml", NAME)
    assert json.loads(record.read_text()) == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "namespace": "ml",
        "name": NAME, "uid": stored["metadata"]["uid"]}
    assert lines == log and metrics_from_log(result.log_tail) == {"world_size": 4}
    assert [(c["type"], c["reason"]) for c in result.conditions] == [
        ("Complete", "AllJobsCompleted")]
    assert kube.count("POST", TRAINJOBS) == 1 and kube.count("POST", "/mpijobs") == 0
    pod_lists = [r for r in kube.requests if r.path.endswith("/pods")]
    assert pod_lists and all(r.query["labelSelector"] == [trainjob.launcher_selector(NAME)]
                             for r in pod_lists)
    logs = [r for r in kube.requests if r.path.endswith("/log")]
    assert logs and all(r.query["container"] == ["node"] for r in logs)


def test_failure_carries_the_jobset_reason_and_log_tail(kube, tmp_path):
    log = [f"step {i}" for i in range(30)] + ["NCCL error: unhandled system error"]
    kube.controller = ScriptedController(outcome="Failed", reason="ReachedMaxRestarts",
                                         message="jobset failed due to reaching max number "
                                                 "of restarts", log=log, step_s=0.002)
    with pytest.raises(launcher.MPIJobFailed) as e:
        run(kube, make_job(), tmp_path / "rec.json", tail_lines=5)
    err = e.value
    assert (err.kind, err.reason) == ("TrainJob", "ReachedMaxRestarts")
    assert err.log_tail == log[-5:]
    assert str(err).startswith(f"TrainJob {NAME} failed: ReachedMaxRestarts: jobset failed")
    assert any("ReachedMaxRestarts" in ev for ev in err.events)


def test_retry_reattaches_after_409_and_replaces_a_failed_trainjob(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"], step_s=0.05)
    first = launcher.Launcher(kube.api_client(), backoff=FAST)
    obj, reattached = first.create_or_attach(make_job(), tmp_path / "lost.json")
    assert not reattached and first.backend.kind == "TrainJob"
    result, _ = run(kube, make_job(), tmp_path / "new.json")
    assert result.reattached and result.record.uid == obj["metadata"]["uid"]
    assert [r.status for r in kube.requests if r.method == "POST"] == [201, 409]
    # a Failed TrainJob of an earlier attempt is deleted and created again
    kube.delete_object("trainjobs", "ml", NAME, "Background")
    wait_for(lambda: kube.get_object("trainjobs", "ml", NAME) is None)
    kube.controller = ScriptedController(outcome="Failed", step_s=0.002)
    with pytest.raises(launcher.MPIJobFailed):
        run(kube, make_job(), tmp_path / "rec.json")
    kube.controller = ScriptedController(outcome="Succeeded", log=["again"])
    result, lines = run(kube, make_job(), tmp_path / "rec.json")
    assert result.status == "Succeeded" and not result.reattached and lines == ["again"]
    assert kube.deletes[-1] == {"name": NAME, "namespace": "ml",
                                "propagationPolicy": "Foreground"}


def test_sigterm_deletes_the_trainjob_foreground(kube, tmp_path):
    kube.controller = ScriptedController(outcome=None, log=["training step 1"])
    code, stderr = cancel_while_running(kube, trainjob.to_yaml(make_job()), tmp_path)
    assert code == launcher.EXIT_CANCELLED, stderr
    assert kube.deletes == [{"name": NAME, "namespace": "ml",
                             "propagationPolicy": "Foreground"}]
    assert f"cancelled; TrainJob ml/{NAME} deleted" in stderr
    wait_for(lambda: kube.get_object("trainjobs", "ml", NAME) is None)
    assert not [k for k in kube.objects if k[0] == "pods"]


def test_phase_of_a_running_trainjob(kube, tmp_path):
    gate = threading.Event()
    kube.controller = ScriptedController(outcome="Succeeded", log=["a"], gate=gate)
    done: dict = {}
    t = threading.Thread(target=lambda: done.setdefault(
        "r", run(kube, make_job(), tmp_path / "rec.json")), daemon=True)
    t.start()
    wait_for(lambda: launcher.phase(kube.get_object("trainjobs", "ml", NAME) or {}) ==
             "Running", what="jobsStatus with an active launcher")
    gate.set()
    t.join(20)
    assert done["r"][0].status == "Succeeded"


def test_a_trainjob_whose_nodes_never_start_is_deleted_with_the_reason(kube, tmp_path):
    """The pending timeout for the TrainJob: its pods are found by JobSet's label, and
    ``jobsStatus.active`` (pending pods count) does not count as started."""
    from tests.doubles.pod_statuses import UNSCHEDULABLE

    kube.controller = ScriptedController(outcome="Succeeded", pending=UNSCHEDULABLE)
    with pytest.raises(launcher.PendingTimeout) as e:
        run(kube, make_job(), tmp_path / "rec.json", pending_timeout_s=1.0)
    assert e.value.kind == "TrainJob" and e.value.reason == "Unschedulable"
    assert "6 Insufficient nvidia.com/gpu" in e.value.message
    assert kube.deletes == [{"name": NAME, "namespace": "ml", "propagationPolicy": "Foreground"}]
    pod_lists = [r.query["labelSelector"] for r in kube.requests if r.path.endswith("/pods")]
    assert [f"jobset.sigs.k8s.io/jobset-name={NAME}"] in pod_lists
