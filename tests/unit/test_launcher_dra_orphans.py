"""The two ways a ``dra`` job's claim template could orphan something,
against the Kubernetes API double (tests/doubles/k8s_api.py: real HTTP; ownerReference
garbage collection as kubernetes/kubernetes pkg/controller/garbagecollector does it: a
dependent with one live owner stays and loses only its gone owners' references).

1. The template cannot be made once the job exists (a 403, another request's template that
   appeared after the check, a client timeout): the launcher deletes the job (Foreground)
   and ends with one line saying why; the command exits 1 as for a Failed job.
2. TrainJobs sharing the runtime's per-namespace template each own it, so the first job's
   deletion leaves it to the second; the owner is added by a merge patch carrying the
   template's resourceVersion, read again and retried after a 409.

The real API server, RBAC and garbage collector: tests/cluster/test_dra.py.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from kfp_gpu import gpu
from kfp_gpu.gpu import claim
from kfp_gpu.mpi.launch import attach, jobs_api, launcher
from kfp_gpu.mpi.launch import claims as launch_claims
from kfp_gpu.mpi.spec import backends, claims, crd
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support.dra_jobs import make_job, make_trainjob
from tests.support.launcher_runs import FAST, run
from tests.support.template_timeouts import template_creates_time_out
from tests.support.waiting import wait_for

RCT = "resourceclaimtemplates"
SHARED = claims.DRA_RUNTIME_TEMPLATE


@pytest.fixture()
def kube():
    with FakeKube() as k:
        yield k


def job_gone(kube, plural: str = "mpijobs", name: str = "resnet-dra-1") -> None:
    wait_for(lambda: kube.get_object(plural, "ml", name) is None, 10, f"{name} deleted")


def assert_deleted_foreground(kube, name: str = "resnet-dra-1") -> None:
    """The launcher's own DELETE of the job: Foreground, not the garbage collector's."""
    mine = [d for d in kube.deletes if d["name"] == name and "by" not in d]
    assert mine == [{"name": name, "namespace": "ml", "propagationPolicy": "Foreground"}]


def other_template(kube) -> dict:
    """A template of another request under the MPIJob's template name, made by another
    launcher (owned by another, existing job: a template whose owner is gone would be
    collected at once) after the launcher's check."""
    other = kube.put_object("mpijobs", "ml", make_job(gpu="dra:gpu=4", name="someone-else"))
    t = claim.template(gpu.parse("dra:gpu=4"), "resnet-dra-1-gpu", "ml",
                       labels={crd.MANAGED_BY_LABEL: crd.MANAGED_BY},
                       owner={"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                              "name": "someone-else", "uid": other["metadata"]["uid"],
                              "controller": False, "blockOwnerDeletion": False})
    return kube.put_object(RCT, "ml", t)


# ------------------------------------------------------------------ 1. failed template create
def test_a_403_on_the_template_create_deletes_the_job_and_the_command_says_why(
        kube, tmp_path, capsys):
    """Through ``python -m kfp_gpu.mpi.launch.launcher``'s main(): exit 1, one line on
    stderr naming the template, the API's answer and the job's deletion."""
    kube.controller = ScriptedController(outcome=None)  # the Workers would wait forever
    kube.fail_next(1, 403, method="POST", path_contains=RCT)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(make_job()))
    rc = launcher.main(["--job", str(tmp_path / "job.yaml"), "--record",
                        str(tmp_path / "rec.json"), "--host", kube.host,
                        "--backoff-initial", "0.01"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1, err  # one line
    assert err.startswith("ResourceClaimTemplate ml/resnet-dra-1-gpu for MPIJob resnet-dra-1 "
                          "could not be made: 403 Forbidden: "), err
    assert "; MPIJob ml/resnet-dra-1 deleted (propagationPolicy Foreground)" in err
    assert_deleted_foreground(kube)
    job_gone(kube)
    assert kube.get_object(RCT, "ml", "resnet-dra-1-gpu") is None
    assert kube.count("POST", RCT) == 1  # a 403 is not retried


def test_the_error_is_raised_from_launch_with_its_cause(kube, tmp_path):
    kube.controller = ScriptedController(outcome=None)
    kube.fail_next(1, 403, method="POST", path_contains=RCT)
    with pytest.raises(launch_claims.ClaimTemplateFailed) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    assert getattr(e.value.__cause__, "status", None) == 403
    assert "\n" not in str(e.value)
    job_gone(kube)


def test_another_requests_template_appearing_after_the_check_deletes_the_job(
        kube, tmp_path, monkeypatch):
    """A 409 on the create, and the template there holds another request (another launcher
    made it between the check and the create): the job goes, that template stays."""
    kube.controller = ScriptedController(outcome=None)
    real = attach.create_or_attach
    theirs: dict = {}

    def create_then_race(*a, **kw):
        out = real(*a, **kw)
        theirs.update(other_template(kube))
        return out

    monkeypatch.setattr(attach, "create_or_attach", create_then_race)
    with pytest.raises(launch_claims.ClaimTemplateFailed) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    msg = str(e.value)
    assert isinstance(e.value.__cause__, launch_claims.ClaimTemplateConflict)
    assert "could not be made: ClaimTemplateConflict: ResourceClaimTemplate " \
        "ml/resnet-dra-1-gpu exists for another GPU request (owned by MPIJob someone-else)" \
        in msg and "MPIJob ml/resnet-dra-1 deleted" in msg and "\n" not in msg
    assert_deleted_foreground(kube)
    job_gone(kube)
    kept = kube.get_object(RCT, "ml", "resnet-dra-1-gpu")
    assert kept["metadata"]["uid"] == theirs["metadata"]["uid"]  # never touched
    assert kube.count("DELETE", RCT) == 0 and kube.count("PATCH", RCT) == 0


def test_a_template_create_that_times_out_deletes_the_job(kube, tmp_path):
    """Retried as transient (FAST: 5 tries), then the job is deleted."""
    kube.controller = ScriptedController(outcome=None)
    with template_creates_time_out() as sent, pytest.raises(
            launch_claims.ClaimTemplateFailed) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    assert len(sent) == FAST.attempts  # a timeout is transient: retried, then given up
    msg = str(e.value)
    assert "could not be made: ReadTimeoutError: " in msg and "Read timed out" in msg, msg
    assert "MPIJob ml/resnet-dra-1 deleted (propagationPolicy Foreground)" in msg
    assert "\n" not in msg
    assert kube.count("POST", RCT) == 0  # all went to the black hole
    assert_deleted_foreground(kube)
    job_gone(kube)
    assert kube.get_object(RCT, "ml", "resnet-dra-1-gpu") is None


def test_a_failed_delete_is_said_in_the_same_line(kube, tmp_path):
    kube.controller = ScriptedController(outcome=None)
    kube.fail_next(1, 403, method="POST", path_contains=RCT)
    kube.fail_next(1, 403, method="DELETE", path_contains="/mpijobs/")
    with pytest.raises(launch_claims.ClaimTemplateFailed) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    msg = str(e.value)
    assert "; deleting MPIJob ml/resnet-dra-1 failed too (403 Forbidden: " in msg, msg
    assert msg.endswith("delete it by hand, kubectl delete mpijobs -n ml resnet-dra-1")
    assert "\n" not in msg


def test_without_the_fix_the_job_would_stay(kube, tmp_path, monkeypatch):
    """The check can fail: ensure_template alone (the launcher before the orphan checks) leaves the
    job after a 403."""
    monkeypatch.setattr(launch_claims, "ensure_template_or_delete_job",
                        lambda jobs, job, **kw: launch_claims.ensure_template(jobs, job))
    kube.controller = ScriptedController(outcome=None)
    kube.fail_next(1, 403, method="POST", path_contains=RCT)
    with pytest.raises(Exception) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    assert not isinstance(e.value, launch_claims.ClaimTemplateFailed)
    assert kube.get_object("mpijobs", "ml", "resnet-dra-1") is not None
    assert kube.count("DELETE", "/mpijobs/") == 0


# ------------------------------------------------------------------ 2. shared template
def owners(kube, name: str = SHARED) -> list[str]:
    t = kube.get_object(RCT, "ml", name) or {"metadata": {}}
    return [o["name"] for o in t["metadata"].get("ownerReferences") or []]


def test_two_trainjobs_both_own_the_shared_template_and_the_first_ones_end_leaves_it(
        kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded")
    run(kube, make_trainjob("dra:mig=1g.10gb", "tj-a"), tmp_path / "a.json")
    run(kube, make_trainjob("dra:mig=1g.10gb", "tj-b"), tmp_path / "b.json")
    t = kube.get_object(RCT, "ml", SHARED)
    uid = {n: kube.get_object("trainjobs", "ml", n)["metadata"]["uid"] for n in ("tj-a", "tj-b")}
    assert t["metadata"]["ownerReferences"] == [
        {"apiVersion": backends.TRAINJOB.api_version, "kind": "TrainJob", "name": n,
         "uid": uid[n], "controller": False, "blockOwnerDeletion": False}
        for n in ("tj-a", "tj-b")]
    # the owner was added by a merge patch with the template's resourceVersion
    (patch,) = [r for r in kube.requests if r.method == "PATCH" and RCT in r.path]
    assert patch.body["metadata"]["resourceVersion"]
    assert [o["name"] for o in patch.body["metadata"]["ownerReferences"]] == ["tj-a", "tj-b"]
    # the first job ends and is deleted: the collector drops its reference, the template stays
    kube.delete_object("trainjobs", "ml", "tj-a", "Background")
    wait_for(lambda: owners(kube) == ["tj-b"], 10, "tj-a's reference removed")
    assert kube.get_object(RCT, "ml", SHARED)["metadata"]["uid"] == t["metadata"]["uid"]
    assert kube.count("DELETE", RCT) == 0
    # the last owner goes: so does the template
    kube.delete_object("trainjobs", "ml", "tj-b", "Background")
    wait_for(lambda: kube.get_object(RCT, "ml", SHARED) is None, 10, "template collected")


def test_a_single_owner_template_goes_with_its_job(kube):
    """The double's collector is the judge above: with tj-a the only owner, its deletion
    takes the template (what happened to a sharing job's template before the orphan checks)."""
    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    launch_claims.ensure_template(jobs, a)
    kube.delete_object("trainjobs", "ml", "tj-a", "Background")
    wait_for(lambda: kube.get_object(RCT, "ml", SHARED) is None, 10, "template collected")


def test_a_409_on_the_owner_patch_reads_the_template_again_and_retries(kube):
    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    launch_claims.ensure_template(jobs, a)
    b = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-b"))
    kube.fail_next(1, 409, method="PATCH", path_contains=RCT)
    gets = kube.count("GET", f"{RCT}/{SHARED}")
    shared = launch_claims.ensure_template(jobs, b)
    assert [o["name"] for o in shared["metadata"]["ownerReferences"]] == ["tj-a", "tj-b"]
    patches = [r for r in kube.requests if r.method == "PATCH" and RCT in r.path]
    assert [p.status for p in patches] == [409, 200]
    assert kube.count("GET", f"{RCT}/{SHARED}") == gets + 2  # after the POST's 409, the PATCH's


def test_a_replaced_trainjob_keeps_the_template_another_job_shares(kube):
    """tj-b Failed and was replaced (new uid) while tj-a still uses the template: the new tj-b
    takes the old one's place among the owners; nothing deletes the template (before, a
    template with an earlier tj-b among its owners was deleted and made again)."""
    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    launch_claims.ensure_template(jobs, a)
    old_b = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-b"))
    t = launch_claims.ensure_template(jobs, old_b)
    new_b = copy.deepcopy(old_b)
    new_b["metadata"]["uid"] = "new-uid-of-tj-b"
    launch_claims.check_before_create(jobs, make_trainjob("dra:mig=1g.10gb", "tj-b"))
    again = launch_claims.ensure_template(jobs, new_b)
    assert again["metadata"]["uid"] == t["metadata"]["uid"]
    assert [(o["name"], o["uid"]) for o in again["metadata"]["ownerReferences"]] == [
        ("tj-a", a["metadata"]["uid"]), ("tj-b", "new-uid-of-tj-b")]
    assert kube.count("DELETE", RCT) == 0


def test_a_template_applied_by_hand_is_used_not_owned(kube):
    """Same request, no ``app.kubernetes.io/managed-by: kfp-gpu`` label: someone applied it;
    the job's end must not delete it, so the job does not become its owner."""
    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    mine = claims.template_for(a)
    del mine["metadata"]["ownerReferences"], mine["metadata"]["labels"]
    kube.put_object(RCT, "ml", mine)
    got = launch_claims.ensure_template(jobs, a)
    assert "ownerReferences" not in got["metadata"]
    assert kube.count("PATCH", RCT) == 0



def test_a_template_read_back_with_empty_spec_metadata_is_the_same_request(kube):
    """kube-apiserver may answer the ResourceClaimTemplateSpec's empty ObjectMeta as
    ``metadata: {}``: still the same request, shared and co-owned, not a conflict."""
    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST, backend=backends.TRAINJOB)
    a = jobs.create("ml", make_trainjob("dra:mig=1g.10gb", "tj-a"))
    served = claims.template_for(a)
    served["spec"] = {"metadata": {}, **served["spec"]}
    kube.put_object(RCT, "ml", served)
    b = make_trainjob("dra:mig=1g.10gb", "tj-b")
    launch_claims.check_before_create(jobs, b)
    got = launch_claims.ensure_template(jobs, jobs.create("ml", b))
    assert [o["name"] for o in got["metadata"]["ownerReferences"]] == ["tj-a", "tj-b"]
    other = make_trainjob("dra:gpu=1", "tj-c")
    with pytest.raises(launch_claims.ClaimTemplateConflict):
        launch_claims.check_before_create(jobs, other)
