"""Kueue objects the cluster tests make on the plane (sigs.k8s.io/kueue v0.19.2, tier 3): a
ResourceFlavor, a ClusterQueue for one namespace and its LocalQueue; the Workload Kueue
made for a job; a PriorityClass for a job that may preempt. Shared by test_kueue,
test_preemption and test_load."""

from __future__ import annotations

import uuid

from tests.cluster import kube

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE = "q"


def cluster_queue_spec(ns: str, flavor: str, gpus: int, preemption: dict | None = None) -> dict:
    """A ClusterQueue for ``ns`` only: cpu, memory and ``gpus`` nvidia.com/gpu in ``flavor``,
    with ``preemption`` (e.g. ``{"withinClusterQueue": "LowerPriority"}``) when given
    (apis/kueue/v1beta2 clusterqueue_types.go ``ClusterQueuePreemption``)."""
    spec = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [
                    {"name": "cpu", "nominalQuota": "64"},
                    {"name": "memory", "nominalQuota": "256Gi"},
                    {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}]}]}
    if preemption:
        spec["preemption"] = dict(preemption)
    return spec


def create_queues(api, ns: str, gpus: int, queue: str = QUEUE,
                  preemption: dict | None = None) -> tuple[str, str]:
    """A ResourceFlavor, a ClusterQueue (:func:`cluster_queue_spec`) and LocalQueue ``queue``
    in ``ns``; returns the two cluster-scoped names (for :func:`delete_queues`)."""
    custom, tag = kube.custom(api), uuid.uuid4().hex[:6]
    flavor, cq = f"kfp-gpu-rf-{tag}", f"kfp-gpu-cq-{tag}"
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
        "metadata": {"name": flavor}})
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": cluster_queue_spec(ns, flavor, gpus, preemption)})
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
        "metadata": {"name": queue, "namespace": ns}, "spec": {"clusterQueue": cq}})
    kube.wait_for(lambda: kube.conditions(kube.get_custom(
        api, GROUP, VERSION, ns, "localqueues", queue)).get("Active", {}).get("status")
        == "True", 60, f"LocalQueue {ns}/{queue} Active")
    return flavor, cq


def delete_queues(api, flavor: str, cq: str) -> None:
    """Delete the ClusterQueue and ResourceFlavor (Kueue's finalizers let them go once the
    namespace's Workloads are gone; not waited for)."""
    from kubernetes.client.exceptions import ApiException

    for plural, name in (("clusterqueues", cq), ("resourceflavors", flavor)):
        try:
            kube.custom(api).delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as e:
            if e.status != 404:
                raise


def workload_of(api, ns: str, job: str) -> dict | None:
    """The Workload Kueue made for MPIJob ``job`` (its ownerReference names the job)."""
    items = kube.custom(api).list_namespaced_custom_object(GROUP, VERSION, ns,
                                                           "workloads")["items"]
    return next((w for w in items if any(o.get("name") == job for o in
                                         w["metadata"].get("ownerReferences") or [])), None)


def create_priority_class(api, value: int) -> str:
    """A scheduling.k8s.io/v1 PriorityClass of ``value`` (not the global default); its
    name. Kueue gives a job's Workload the value of the PriorityClass the MPIJob's
    ``runPolicy.schedulingPolicy.priorityClass`` names (pkg/controller/jobs/mpijob/
    mpijob_controller.go ``PriorityClass``, pkg/util/priority/priority.go
    ``GetPriorityFromPriorityClass``): the component's ``priority_class``."""
    from kubernetes import client

    name = f"kfp-gpu-prio-{value}-{uuid.uuid4().hex[:6]}"
    client.SchedulingV1Api(api).create_priority_class(
        {"metadata": {"name": name}, "value": value, "globalDefault": False,
         "description": "kfp-gpu cluster test"})
    return name


def delete_priority_class(api, name: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.SchedulingV1Api(api).delete_priority_class(name)
    except ApiException as e:
        if e.status != 404:
            raise
