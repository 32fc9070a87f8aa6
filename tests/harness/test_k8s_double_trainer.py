"""The Kubernetes API double serves Kubeflow Trainer resources like the API server does,
through the real ``kubernetes`` client: TrainJobs (create/get/list/watch/delete, status
subresource) and cluster-scoped, read-only ClusterTrainingRuntimes."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.doubles.k8s_api import SERVED, FakeKube, ScriptedController
from tests.support.waiting import wait_for

G, V, NS = "trainer.kubeflow.org", "v1alpha1", "ml"


def trainjob(name: str = "resnet-0123456789") -> dict:
    return {"apiVersion": f"{G}/{V}", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"runtimeRef": {"name": "kfp-gpu-horovod"}, "trainer": {"numNodes": 2}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}


@pytest.fixture
def kube():
    with FakeKube() as k:
        k.controller = None
        yield k


@pytest.fixture
def api(kube):
    return client.CustomObjectsApi(kube.api_client())


def test_served_table_names_the_five_kinds():
    assert {(s.api_version, s.kind, s.namespaced) for s in SERVED.values()} == {
        ("kubeflow.org/v2beta1", "MPIJob", True), (f"{G}/{V}", "TrainJob", True),
        (f"{G}/{V}", "ClusterTrainingRuntime", False),
        ("resource.k8s.io/v1", "ResourceClaimTemplate", True),  # dra jobs
        ("coordination.k8s.io/v1", "Lease", True)}  # the operators' leader Leases


def test_trainjob_create_get_list_delete(kube, api):
    created = api.create_namespaced_custom_object(G, V, NS, "trainjobs", trainjob())
    assert created["metadata"]["uid"] and created["metadata"]["namespace"] == NS
    assert "status" not in created  # status subresource: ignored on create
    with pytest.raises(ApiException) as e:
        api.create_namespaced_custom_object(G, V, NS, "trainjobs", trainjob())
    assert e.value.status == 409 and "trainjobs.trainer.kubeflow.org" in e.value.body
    got = api.get_namespaced_custom_object(G, V, NS, "trainjobs", "resnet-0123456789")
    assert got["spec"]["trainer"] == {"numNodes": 2}
    listed = api.list_namespaced_custom_object(
        G, V, NS, "trainjobs", field_selector="metadata.name=resnet-0123456789")
    assert listed["kind"] == "TrainJobList" and listed["apiVersion"] == f"{G}/{V}"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["resnet-0123456789"]
    assert api.list_namespaced_custom_object(G, V, "other", "trainjobs")["items"] == []
    wrong = trainjob() | {"kind": "MPIJob"}
    with pytest.raises(ApiException) as e:
        api.create_namespaced_custom_object(G, V, NS, "trainjobs", wrong)
    assert e.value.status == 400
    api.delete_namespaced_custom_object(
        G, V, NS, "trainjobs", "resnet-0123456789",
        body=client.V1DeleteOptions(propagation_policy="Foreground"))
    assert kube.deletes == [{"name": "resnet-0123456789", "namespace": NS,
                             "propagationPolicy": "Foreground"}]
    wait_for(lambda: kube.get_object("trainjobs", NS, "resnet-0123456789") is None)
    with pytest.raises(ApiException) as e:
        api.get_namespaced_custom_object(G, V, NS, "trainjobs", "resnet-0123456789")
    assert e.value.status == 404


def test_status_subresource_changes_only_the_status(kube, api):
    api.create_namespaced_custom_object(G, V, NS, "trainjobs", trainjob())
    cond = {"type": "Complete", "status": "True", "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": "2026-11-23T07:00:00Z"}
    out = api.patch_namespaced_custom_object_status(
        G, V, NS, "trainjobs", "resnet-0123456789",
        {"status": {"conditions": [cond]}, "spec": {"suspend": True}})
    assert out["status"]["conditions"] == [cond] and "suspend" not in out["spec"]
    out = api.patch_namespaced_custom_object_status(
        G, V, NS, "trainjobs", "resnet-0123456789", {"status": {"jobsStatus": [
            {"name": "launcher", "active": 0, "succeeded": 1}]}})
    assert out["status"]["conditions"] == [cond]  # merge patch keeps the other keys
    out = api.replace_namespaced_custom_object_status(
        G, V, NS, "trainjobs", "resnet-0123456789",
        {"apiVersion": f"{G}/{V}", "kind": "TrainJob", "metadata": {"name": "x"},
         "status": {"conditions": []}})
    assert out["status"] == {"conditions": []}
    assert out["metadata"]["name"] == "resnet-0123456789"
    got = api.get_namespaced_custom_object_status(G, V, NS, "trainjobs", "resnet-0123456789")
    assert got["status"] == {"conditions": []}


def test_watch_sees_status_changes(kube, api):
    api.create_namespaced_custom_object(G, V, NS, "trainjobs", trainjob())
    rv = api.list_namespaced_custom_object(G, V, NS, "trainjobs")["metadata"]["resourceVersion"]
    threading.Timer(0.2, kube.set_condition, (NS, "resnet-0123456789", "Complete",
                                              "AllJobsCompleted", "done"),
                    {"plural": "trainjobs"}).start()
    seen = []
    for ev in watch.Watch().stream(api.list_namespaced_custom_object, G, V, NS, "trainjobs",
                                   resource_version=rv, timeout_seconds=5):
        seen.append((ev["type"], ev["raw_object"].get("status", {}).get("conditions")))
        break
    ((etype, conds),) = seen
    assert etype == "MODIFIED"
    (c,) = conds
    assert (c["type"], c["reason"], c["status"]) == ("Complete", "AllJobsCompleted", "True")
    assert "lastTransitionTime" in c and "lastUpdateTime" not in c  # metav1.Condition


def test_cluster_training_runtimes_are_cluster_scoped_and_read_only(kube, api):
    runtime = {"apiVersion": f"{G}/{V}", "kind": "ClusterTrainingRuntime",
               "metadata": {"name": "kfp-gpu-horovod"},
               "spec": {"mlPolicy": {"numNodes": 1, "mpi": {"numProcPerNode": 1}}}}
    kube.put_object("clustertrainingruntimes", "", runtime)
    got = api.get_cluster_custom_object(G, V, "clustertrainingruntimes", "kfp-gpu-horovod")
    assert got["spec"] == runtime["spec"] and "namespace" not in got["metadata"]
    listed = api.list_cluster_custom_object(G, V, "clustertrainingruntimes")
    assert listed["kind"] == "ClusterTrainingRuntimeList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["kfp-gpu-horovod"]
    for call in (lambda: api.create_cluster_custom_object(G, V, "clustertrainingruntimes",
                                                          runtime),
                 lambda: api.delete_cluster_custom_object(G, V, "clustertrainingruntimes",
                                                          "kfp-gpu-horovod")):
        with pytest.raises(ApiException) as e:
            call()
        assert e.value.status == 405
    with pytest.raises(ApiException) as e:  # not served in a namespace
        api.get_namespaced_custom_object(G, V, NS, "clustertrainingruntimes", "kfp-gpu-horovod")
    assert e.value.status == 404


@pytest.mark.parametrize("outcome,ctype,reason", [("Succeeded", "Complete", "AllJobsCompleted"),
                                                  ("Failed", "Failed", "ReachedMaxRestarts")])
def test_scripted_controller_plays_trainer_on_jobset(kube, api, outcome, ctype, reason):
    kube.controller = ScriptedController(outcome=outcome, log=["rank 0 ready", "METRICS {}"])
    api.create_namespaced_custom_object(G, V, NS, "trainjobs", trainjob())
    wait_for(lambda: any(c["type"] == ctype for c in (kube.get_object(
        "trainjobs", NS, "resnet-0123456789").get("status") or {}).get("conditions", [])))
    job = kube.get_object("trainjobs", NS, "resnet-0123456789")
    assert [(c["type"], c["reason"]) for c in job["status"]["conditions"]] == [(ctype, reason)]
    assert job["status"]["jobsStatus"][0]["name"] == "launcher"
    core = client.CoreV1Api(kube.api_client())
    (pod,) = core.list_namespaced_pod(
        NS, label_selector="jobset.sigs.k8s.io/jobset-name=resnet-0123456789,"
                           "jobset.sigs.k8s.io/replicatedjob-name=launcher").items
    assert pod.metadata.name.startswith("resnet-0123456789-launcher-0-0-")
    assert pod.spec.containers[0].name == "node"
    assert pod.metadata.owner_references[0].kind == "TrainJob"
    log = core.read_namespaced_pod_log(pod.metadata.name, NS, container="node")
    assert log.splitlines() == ["rank 0 ready", "METRICS {}"]
    assert kube.controller.plural == "mpijobs"  # the shared script was copied, not changed
