"""Doctor, subject Kueue: a pipeline whose distributed task sets ``kueue_queue`` creates its
job suspended with the label ``kueue.x-k8s.io/queue-name`` (:mod:`kfp_gpu.mpi.spec.options`),
and only Kueue ever unsuspends it. On a cluster without Kueue, or without that LocalQueue
in the run's namespace, the job waits forever; doctor says so before the run.

Names (kubernetes-sigs/kueue v0.19.2, the version the test control plane runs):
- CRD ``localqueues.kueue.x-k8s.io`` (config/components/crd/bases; served ``v1beta1`` and
  ``v1beta2``, read here in the newest one served);
- LocalQueue ``spec.clusterQueue`` and its ``Active`` condition (apis/kueue/v1beta2
  localqueue_types.go ``LocalQueueActive``; False with reason ``ClusterQueueDoesNotExist``,
  ``ClusterQueueIsInactive`` or ``Stopped``: pkg/controller/core/localqueue_controller.go);
- a Workload whose LocalQueue is missing is never admitted
  (pkg/controller/core/workload_controller.go ``LocalQueue <q> doesn't exist``).

Pure report functions over :class:`KueueFacts`, plus :func:`read_kueue` (one CRD GET, one
LIST) and :func:`compiled_kueue_queues` (reads the compiled pipeline).
"""

from __future__ import annotations

import json

from kfp_gpu.cluster.doctor.model import (
    ClusterFacts,
    KueueFacts,
    LocalQueue,
    Needs,
    Report,
    api_error,
)

KUEUE_RELEASE = "v0.19.2"
GROUP = "kueue.x-k8s.io"
LOCALQUEUE_CRD = f"localqueues.{GROUP}"  # = model.KueueFacts' CRD
#: Versions doctor can read LocalQueues in, newest first.
VERSIONS = ("v1beta2", "v1beta1")
INSTALL = (f"install Kueue {KUEUE_RELEASE} (kubectl apply --server-side -f https://github.com/"
           f"kubernetes-sigs/kueue/releases/download/{KUEUE_RELEASE}/manifests.yaml)")
#: The component parameter that names the LocalQueue (train_resnet_horovod).
PARAMETER = "kueue_queue"


def compiled_kueue_queues(pipeline: dict) -> tuple[str, ...]:
    """The non-empty ``kueue_queue`` values a compiled pipeline's tasks pass: a constant,
    or a pipeline parameter's default (``componentInputParameter`` of the root's
    ``inputDefinitions``); sorted, without repeats."""
    root = pipeline.get("root") or {}
    defaults = ((root.get("inputDefinitions") or {}).get("parameters")) or {}
    dags = [root.get("dag") or {}, *[c.get("dag") or {}
                                     for c in (pipeline.get("components") or {}).values()]]
    found: set[str] = set()
    for dag in dags:
        for task in (dag.get("tasks") or {}).values():
            value = ((task.get("inputs") or {}).get("parameters") or {}).get(PARAMETER) or {}
            const = (value.get("runtimeValue") or {}).get("constant")
            if const is None and value.get("componentInputParameter"):
                const = (defaults.get(value["componentInputParameter"]) or {}).get(
                    "defaultValue")
            if const:
                found.add(str(const))
    return tuple(sorted(found))


def kueue_problems(kf: KueueFacts | None, needs: Needs, namespace: str) -> list[str]:
    """One problem per reason a queued job of ``needs`` would wait forever."""
    if kf is None or not needs.kueue_queues:
        return []
    names = ", ".join(needs.kueue_queues)
    if kf.crd.error:
        return [(f"cannot read CRD {LOCALQUEUE_CRD} ({kf.crd.error}), so whether Kueue can "
                f"admit a job queued in {names} is unknown")]
    if not kf.crd.present:
        return [(f"kueue_queue {names}: a queue on a cluster without Kueue waits forever (CRD "
                f"{LOCALQUEUE_CRD} not found; the job is created suspended and nothing "
                f"resumes it); {INSTALL}, or leave kueue_queue empty")]
    if not kf.listed:
        return [(f"cannot list LocalQueues in namespace {namespace} ({kf.error}), so whether "
                f"{names} exists is unknown")]
    out = []
    for q in needs.kueue_queues:
        lq = kf.queues.get(q)
        if lq is None:
            out.append(f"kueue_queue {q}: no LocalQueue {q} in namespace {namespace}; Kueue "
                       f"never admits a job queued there (it waits forever); create a "
                       f"LocalQueue {q} (kueue.x-k8s.io) pointing at a ClusterQueue")
        elif lq.active is False:
            out.append(f"kueue_queue {q}: LocalQueue {namespace}/{q} is not active "
                       f"({lq.reason}: {lq.message}; ClusterQueue {lq.cluster_queue or '?'})"
                       "; jobs queued there are not admitted")
    return out


def kueue_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The Kueue table (only when the pipeline sets ``kueue_queue``) and its problems."""
    kf = facts.kueue
    if kf is None or not needs.kueue_queues:
        return
    rows = []
    for q in needs.kueue_queues:
        lq = kf.queues.get(q)
        if not kf.crd.present:
            status = kf.crd.error or "Kueue not installed"
        elif lq is None:
            status = "missing" if kf.listed else (kf.error or "not listed")
        else:
            status = {True: "active", False: f"inactive ({lq.reason})",
                      None: "present"}[lq.active]
        rows.append((f"{facts.namespace}/{q}", (lq.cluster_queue if lq else "") or "-",
                     status))
    rep.sections.append(("Kueue LocalQueues", ("queue", "ClusterQueue", "status"), rows))
    rep.problems.extend(kueue_problems(kf, needs, facts.namespace))


def local_queue(obj: dict) -> LocalQueue:
    """From a LocalQueue object (JSON dict as the API returns it)."""
    cond = next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Active"), None)
    return LocalQueue(name=(obj.get("metadata") or {}).get("name", ""),
                      cluster_queue=(obj.get("spec") or {}).get("clusterQueue", ""),
                      active=None if cond is None else cond.get("status") == "True",
                      reason=(cond or {}).get("reason", ""),
                      message=(cond or {}).get("message", ""))


def read_kueue(api_client, facts: ClusterFacts) -> None:
    """GET the LocalQueue CRD and, when it is served, LIST ``facts.namespace``'s LocalQueues
    into ``facts.kueue``. Never raises on API errors (404 = not installed)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    kf = facts.kueue = KueueFacts()
    try:
        resp = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(
            LOCALQUEUE_CRD, _preload_content=False, _request_timeout=30)
        kf.crd.present = True
        kf.crd.served = tuple(v["name"] for v in json.loads(resp.data)["spec"]["versions"]
                              if v.get("served"))
    except ApiException as e:
        if e.status != 404:
            kf.crd.error = api_error(e)
        return
    version = next((v for v in VERSIONS if v in kf.crd.served), None)
    if version is None:
        kf.error = f"none of {', '.join(VERSIONS)} served"
        return
    try:
        resp = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
            GROUP, version, facts.namespace, "localqueues", _preload_content=False,
            _request_timeout=30)
        items = json.loads(resp.data).get("items") or []
    except ApiException as e:
        kf.error = api_error(e)
        return
    kf.queues = {q.name: q for q in map(local_queue, items)}
    kf.listed = True
