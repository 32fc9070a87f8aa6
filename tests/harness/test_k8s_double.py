"""The Kubernetes API double's deletion, garbage collection and PATCH semantics pinned
against the upstream files they follow (cited in tests/doubles/k8s_api.py):

- ``propagationPolicy: Foreground`` (kubernetes/kubernetes
  ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`` @0021a864,
  ``pkg/controller/garbagecollector/garbagecollector.go`` @02830ed2): the owner gets the
  ``foregroundDeletion`` finalizer and a ``deletionTimestamp``, stays readable, and is
  removed only after its ``blockOwnerDeletion`` dependents are gone; a non-blocking
  dependent does not hold it.
- ``Background``: the object is gone at once, its dependents are collected after.
- A second DELETE of an object being deleted changes nothing.
- PATCH with a type the double does not serve: 415 with ``negotiation/errors.go``'s text.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.doubles.k8s_api import FakeKube
from tests.support.waiting import wait_for

NS = "ml"
MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/ml/mpijobs"


@pytest.fixture
def kube():
    with FakeKube() as k:
        k.controller = None  # no operator: the test plays the dependents
        yield k


def request(kube: FakeKube, method: str, path: str, body=None,
            ctype: str = "application/json") -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(kube.host + path, data=data, method=method,
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def mpijob(kube: FakeKube, name: str = "job") -> dict:
    return kube.put_object("mpijobs", NS, {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS}, "spec": {}})


def events(kube: FakeKube) -> list[tuple[str, str]]:
    with kube._lock:
        return [(etype, obj["metadata"]["name"]) for _, etype, _, obj in kube.history
                if etype == "DELETED"]


def test_foreground_owner_waits_for_its_blocking_dependent(kube):
    mpijob(kube)
    kube.create_pod(NS, "job-launcher", {}, owner="job")
    ref = kube.get_object("pods", NS, "job-launcher")["metadata"]["ownerReferences"][0]
    assert ref["blockOwnerDeletion"] is True and ref["controller"] is True
    kube.add_finalizer("pods", NS, "job-launcher", "example.com/hold")

    code, body = request(kube, "DELETE", f"{MPIJOBS}/job",
                         {"propagationPolicy": "Foreground"})
    assert code == 200
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert body["metadata"]["deletionTimestamp"]
    # the collector deletes the dependent; it lingers (its own finalizer) and so does
    # the owner, readable, with its finalizer and deletionTimestamp
    wait_for(lambda: kube.get_object("pods", NS, "job-launcher")["metadata"].get(
        "deletionTimestamp"))
    time.sleep(0.2)
    code, job = request(kube, "GET", f"{MPIJOBS}/job")
    assert code == 200 and job["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert job["metadata"]["deletionTimestamp"]

    kube.remove_finalizer("pods", NS, "job-launcher", "example.com/hold")
    wait_for(lambda: kube.get_object("mpijobs", NS, "job") is None)
    assert events(kube) == [("DELETED", "job-launcher"), ("DELETED", "job")]
    assert request(kube, "GET", f"{MPIJOBS}/job")[0] == 404


def test_foreground_owner_does_not_wait_for_a_non_blocking_dependent(kube):
    owner = mpijob(kube)
    kube.create_pod(NS, "side", {}, owner="job")
    with kube._lock:
        kube.objects[("pods", NS, "side")]["metadata"]["ownerReferences"] = [{
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "job",
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": False}]
    kube.add_finalizer("pods", NS, "side", "example.com/hold")
    assert kube.delete_object("mpijobs", NS, "job", "Foreground")[0] == 200
    wait_for(lambda: kube.get_object("mpijobs", NS, "job") is None)
    pod = kube.get_object("pods", NS, "side")  # deleted by the collector, still finalizing
    assert pod is not None and pod["metadata"]["deletionTimestamp"]


def test_background_delete_is_immediate_and_dependents_follow(kube):
    mpijob(kube)
    kube.create_pod(NS, "job-launcher", {}, owner="job")
    code, body = request(kube, "DELETE", f"{MPIJOBS}/job")  # Background by default
    # a Success Status, not the object (kube-apiserver v1.36.3, tests/cluster/test_fidelity)
    assert code == 200 and (body["kind"], body["status"]) == ("Status", "Success")
    assert body["details"]["name"] == "job" and body["details"]["kind"] == "mpijobs"
    assert request(kube, "GET", f"{MPIJOBS}/job")[0] == 404  # gone in the same request
    wait_for(lambda: kube.get_object("pods", NS, "job-launcher") is None)
    assert kube.deletes == [{"name": "job", "namespace": NS,
                             "propagationPolicy": "Background"}]


def test_second_delete_of_a_deleting_object_changes_nothing(kube):
    mpijob(kube)
    kube.create_pod(NS, "job-launcher", {}, owner="job")
    kube.add_finalizer("pods", NS, "job-launcher", "example.com/hold")
    first = kube.delete_object("mpijobs", NS, "job", "Foreground")[1]
    code, again = kube.delete_object("mpijobs", NS, "job", "Foreground")
    assert code == 200 and again["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert again["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]


def test_trainjob_not_found_names_its_group(kube):
    code, body = kube.delete_object("trainjobs", NS, "nope", "Foreground")
    assert code == 404
    assert body["message"] == 'trainjobs.trainer.kubeflow.org "nope" not found'


def test_patch_of_an_unserved_type_is_415_with_the_api_servers_text(kube):
    mpijob(kube)
    code, body = request(kube, "PATCH", f"{MPIJOBS}/job",
                         [{"op": "add", "path": "/spec/x", "value": 1}],
                         ctype="application/strategic-merge-patch+json")
    assert code == 415 and body["reason"] == "UnsupportedMediaType"
    assert body["message"].startswith("the body of the request was in an unknown format - "
                                      "accepted media types include: ")
    code, body = request(kube, "PATCH", f"{MPIJOBS}/job", {"spec": {"x": 1}},
                         ctype="application/merge-patch+json; charset=utf-8")
    assert code == 200 and body["spec"] == {"x": 1}


def test_unknown_fields_are_pruned_with_a_warning_or_refused_under_strict(kube):
    """A CRD's schema prunes undeclared fields; ``fieldValidation`` (unset = Warn) says so
    in a Warning header, Strict refuses: kube-apiserver v1.36.3's words
    (tests/doubles/k8s_fields.py; tests/cluster/test_fidelity.py asks the real one)."""
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "job", "namespace": NS},
           "spec": {"slotPerWorker": 3, "mpiReplicaSpecs": {}}}
    req = urllib.request.Request(kube.host + MPIJOBS, data=json.dumps(job).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 201
        assert resp.headers.get_all("Warning") == ['299 - "unknown field \\"spec.slotPerWorker\\""']
        assert "slotPerWorker" not in json.loads(resp.read())["spec"]
    job["metadata"]["name"] = "job2"
    code, body = request(kube, "POST", MPIJOBS + "?fieldValidation=Strict", job)
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == ('MPIJob in version "v2beta1" cannot be handled as a MPIJob: '
                               'strict decoding error: unknown field "spec.slotPerWorker"')
