"""kfp_gpu.mpi.spec.backends: what the launcher knows about MPIJobs and TrainJobs."""

from __future__ import annotations

import pytest

from kfp_gpu.mpi.spec import backends, mpijob, trainjob
from tests.support.mpijob_options import options


def cond(ctype: str, status: str = "True", reason: str = "") -> dict:
    return {"type": ctype, "status": status, "reason": reason}


def obj(b: backends.Backend, conditions=(), jobs=None, uid: str = "u-1") -> dict:
    status = {"conditions": list(conditions)}
    if jobs is not None:
        status["jobsStatus"] = jobs
    return {"apiVersion": b.api_version, "kind": b.kind,
            "metadata": {"name": "j", "uid": uid}, "status": status}


def test_mpijob_phases():
    b = backends.MPIJOB
    assert b.phase(obj(b)) == "Pending"
    assert b.phase(obj(b, [cond("Created")])) == "Created"
    assert b.phase(obj(b, [cond("Created"), cond("Running")])) == "Running"
    assert b.phase(obj(b, [cond("Running", "False"), cond("Succeeded")])) == "Succeeded"
    assert b.phase(obj(b, [cond("Running"), cond("Failed", reason="BackoffLimitExceeded")])
                   ) == "Failed"
    assert b.terminal_condition(obj(b, [cond("Failed", reason="X")]))["reason"] == "X"


def test_trainjob_phases():
    b = backends.TRAINJOB
    assert b.phase(obj(b, uid="")) == "Pending"
    assert b.phase(obj(b)) == "Created"  # v2.3 has no Created condition: it exists
    idle = [{"name": "launcher", "active": 0, "ready": 0}]
    busy = [{"name": "node", "active": 0, "ready": 1}, {"name": "launcher", "active": 1}]
    assert b.phase(obj(b, jobs=idle)) == "Created"
    assert b.phase(obj(b, jobs=busy)) == "Running"
    assert b.phase(obj(b, [cond("Suspended", reason="Suspended")], busy)) == "Suspended"
    resumed = cond("Suspended", "False", "Resumed")
    assert b.phase(obj(b, [resumed], busy)) == "Running"
    assert b.phase(obj(b, [resumed, cond("Complete", reason="AllJobsCompleted")])) == \
        "Succeeded"
    failed = cond("Failed", reason="DeadlineExceeded")
    assert b.phase(obj(b, [failed])) == "Failed"
    assert b.terminal_condition(obj(b, [failed]))["reason"] == "DeadlineExceeded"
    # each kind ends on its own condition type only
    assert backends.MPIJOB.phase(obj(backends.MPIJOB, [cond("Complete")])) == "Complete"


def test_selectors_and_containers():
    assert backends.MPIJOB.launcher_selector("a") == (
        "training.kubeflow.org/job-name=a,training.kubeflow.org/job-role=launcher")
    assert backends.TRAINJOB.launcher_selector("a") == (
        "jobset.sigs.k8s.io/jobset-name=a,jobset.sigs.k8s.io/replicatedjob-name=launcher")
    assert (backends.MPIJOB.launcher_container, backends.TRAINJOB.launcher_container) == (
        "launcher", "node")


def test_get_and_for_object():
    opts = options(gpu="gpu:2")
    for name in ("mpijob", "trainjob"):
        b = backends.get(name)
        job = b.build(opts)
        assert backends.for_object(job) is b and b.matches(job)
        assert job["metadata"]["name"] == opts.name
    assert backends.TRAINJOB.build is trainjob.build and backends.MPIJOB.build is mpijob.build
    with pytest.raises(ValueError, match="invalid backend 'pytorchjob'; accepted: 'mpijob', "
                                         "'trainjob'"):
        backends.get("pytorchjob")
    with pytest.raises(ValueError, match="expected one of kubeflow.org/v2beta1 MPIJob, "
                                         "trainer.kubeflow.org/v1alpha1 TrainJob, got v1 Pod"):
        backends.for_object({"apiVersion": "v1", "kind": "Pod"})
