"""The launcher and a ``dra`` job's ResourceClaimTemplate, against the
Kubernetes API double (tests/doubles: real HTTP; ownerReference garbage collection as
kubernetes/kubernetes pkg/controller/garbagecollector does it, see the double's docstring).

Created beside the job and owned by it, gone when the job is deleted (GC), kept on a
re-attach, replaced when an earlier job of that name left one, shared by TrainJobs with
the same request, refused (before any job is created) for another request or a cluster
that does not serve resource.k8s.io/v1. The real API server and scheduler: tests/cluster.
"""

from __future__ import annotations

import pytest

from kfp_gpu.mpi.launch import claims as launch_claims
from kfp_gpu.mpi.launch import launcher
from kfp_gpu.mpi.spec import claims
from tests.doubles import k8s_resources
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support.dra_jobs import make_job, make_trainjob
from tests.support.launcher_runs import FAST, run
from tests.support.waiting import wait_for

RCT = "resourceclaimtemplates"


@pytest.fixture()
def kube():
    with FakeKube() as k:
        yield k


def test_the_template_is_created_beside_the_job_owned_by_it_and_goes_with_it(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", log=["done"])
    job = make_job()
    result, _ = run(kube, job, tmp_path / "rec.json")
    assert result.status == "Succeeded"
    stored = kube.get_object("mpijobs", "ml", "resnet-dra-1")
    t = kube.get_object(RCT, "ml", "resnet-dra-1-gpu")
    assert t["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "resnet-dra-1",
        "uid": stored["metadata"]["uid"], "controller": False, "blockOwnerDeletion": False}]
    assert t["spec"] == claims.template_for(stored)["spec"]
    # the job first, then the template (it needs the job's uid); a GET checked the name
    order = [(r.method, r.path.rsplit("/", 1)[-1]) for r in kube.requests
             if r.method in ("POST", "GET") and ("/mpijobs" in r.path or RCT in r.path)]
    assert order[:3] == [("GET", "resnet-dra-1-gpu"), ("POST", "mpijobs"), ("POST", RCT)]
    # deleting the job removes the template (garbage collection of the owner's dependents)
    kube.delete_object("mpijobs", "ml", "resnet-dra-1", "Background")
    wait_for(lambda: kube.get_object(RCT, "ml", "resnet-dra-1-gpu") is None, 10,
             "the template collected with its job")


def test_a_job_without_dra_touches_no_template(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded")
    run(kube, make_job(gpu="gpu:1"), tmp_path / "rec.json")
    assert not [r for r in kube.requests if RCT in r.path]


def test_reattach_keeps_the_template_and_a_replaced_job_gets_a_new_one(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Failed", reason="BackoffLimitExceeded",
                                         step_s=0.002)
    with pytest.raises(launcher.MPIJobFailed):
        run(kube, make_job(), tmp_path / "rec.json")
    old = kube.get_object(RCT, "ml", "resnet-dra-1-gpu")["metadata"]["uid"]
    # the retry replaces the Failed job; the template of the old one is replaced too
    kube.controller = ScriptedController(outcome="Succeeded")
    run(kube, make_job(), tmp_path / "rec.json")
    job_uid = kube.get_object("mpijobs", "ml", "resnet-dra-1")["metadata"]["uid"]
    wait_for(lambda: (kube.get_object(RCT, "ml", "resnet-dra-1-gpu") or {}).get(
        "metadata", {}).get("uid") not in (None, old), 10, "a new template")
    t = kube.get_object(RCT, "ml", "resnet-dra-1-gpu")
    assert [o["uid"] for o in t["metadata"]["ownerReferences"]] == [job_uid]


def test_a_retry_that_reattaches_to_a_running_job_keeps_its_template(kube, tmp_path):
    from kfp_gpu.mpi.launch import jobs_api

    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST)
    job = make_job()
    created = jobs.create("ml", job)
    first = launch_claims.ensure_template(jobs, created)
    again = launch_claims.ensure_template(jobs, jobs.get("ml", "resnet-dra-1"))
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert kube.count("DELETE", RCT) == 0


def test_trainjobs_share_the_runtimes_template_only_for_the_same_request(kube):
    from kfp_gpu.mpi.launch import jobs_api
    from kfp_gpu.mpi.spec import backends

    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    launch_claims.ensure_template(jobs, a)
    same = make_trainjob("dra:mig=1g.10gb", "tj-b")
    launch_claims.check_before_create(jobs, same)  # same request: fine
    b = jobs.create("ml", same)
    shared = launch_claims.ensure_template(jobs, b)
    assert [o["name"] for o in shared["metadata"]["ownerReferences"]] == ["tj-a", "tj-b"]
    other = make_trainjob("dra:gpu=1", "tj-c")
    with pytest.raises(launch_claims.ClaimTemplateConflict) as e:
        launch_claims.check_before_create(jobs, other)
    msg = str(e.value)
    assert "ml/kfp-gpu-horovod-dra-gpu exists for another GPU request (owned by TrainJob " \
        "tj-a, TrainJob tj-b)" in msg and "kubeflow/trainer PR 4027" in msg and "\n" not in msg


def test_another_request_is_refused_before_the_job_is_created(kube, tmp_path):
    """Through launch(): the conflict is found before the POST of the TrainJob."""
    from kfp_gpu.mpi.launch import jobs_api
    from kfp_gpu.mpi.spec import backends

    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    launch_claims.ensure_template(jobs, a)
    with pytest.raises(launch_claims.ClaimTemplateConflict):
        run(kube, make_trainjob("dra:gpu=2", "tj-x"), tmp_path / "rec.json")
    assert kube.get_object("trainjobs", "ml", "tj-x") is None


def test_a_cluster_without_dra_is_refused_before_the_job_is_created(kube, tmp_path,
                                                                    monkeypatch):
    """Without resource.k8s.io/v1 the API server would drop the pods' resourceClaims and
    the Workers would run without GPUs: one line, nothing created."""
    monkeypatch.delitem(k8s_resources.SERVED, RCT)
    with pytest.raises(RuntimeError) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    assert "does not serve resource.k8s.io/v1" in str(e.value)
    assert "\n" not in str(e.value)
    assert kube.get_object("mpijobs", "ml", "resnet-dra-1") is None
    assert kube.count("POST", "/mpijobs") == 0
