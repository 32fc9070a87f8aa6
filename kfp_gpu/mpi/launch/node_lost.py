"""A job whose pods were taken from a node that stopped answering: the launcher ends it
instead of waiting for a node that may never return.

What Kubernetes does when a node is lost (its kubelet stopped, the machine off, the
network cut), k8s.io/kubernetes v1.36.3:

1. The node lifecycle controller marks the node ``Ready: Unknown`` once its kubelet has
   not posted for ``--node-monitor-grace-period`` and taints it
   ``node.kubernetes.io/unreachable:NoExecute`` (pkg/controller/nodelifecycle/
   node_lifecycle_controller.go ``UnreachableTaintTemplate``; ``NotReady`` ->
   ``node.kubernetes.io/not-ready``).
2. The taint-eviction controller deletes every pod on it once the pod's
   ``tolerationSeconds`` for that taint have passed, first setting the pod condition
   ``DisruptionTarget`` with reason ``DeletionByTaintManager``
   (pkg/controller/tainteviction/taint_eviction.go ``addConditionAndDeletePod``). The job's
   pods tolerate it for 300 s: the component sets no such toleration, and the API server's
   DefaultTolerationSeconds admission adds ``unreachable`` and ``not-ready`` for
   ``--default-unreachable-toleration-seconds`` = 300
   (plugin/pkg/admission/defaulttolerationseconds/admission.go).
3. The deleted pod stays ``Terminating`` with its last phase (``Running``) until the
   kubelet comes back and ends it, or the node object is deleted: the pod GC removes
   terminating pods only on nodes tainted ``node.kubernetes.io/out-of-service``
   (pkg/controller/podgc/gc_controller.go ``gcTerminating``).

Meanwhile neither operator fails the job. mpi-operator v0.8.2 counts a Worker as evicted
only in phase ``Failed`` with reason ``Evicted`` (pkg/controller/mpi_job_controller.go
``updateMPIJobStatus``), and it creates the Launcher Job with ``podReplacementPolicy:
Failed`` (``newLauncherJob``), under which the Job controller does not count a terminating
pod as failed (pkg/controller/job/job_controller.go ``isPodFailed``,
``onlyReplaceFailedPods``). The job would stay ``Running`` for as long as the node is away,
and the component with it.

An MPI job cannot lose a rank and go on (mpirun ends the whole job when one of its
processes is gone), so one pod of the job deleted that way means the job is lost: the
launcher says so in one line, deletes the job (Foreground) and fails with reason
:data:`REASON`. Its pods on the lost node stay ``Terminating`` until the node returns or
is removed; nothing can end them sooner short of a forced delete.

Cost: one LIST of the job's pods (by the backend's label selector) every :data:`POLL_S`
seconds while the job is neither finished nor suspended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kfp_gpu.mpi.launch.jobs_api import raw_json
from kfp_gpu.mpi.launch.records import TERMINAL, NodeLost, phase

log = logging.getLogger(__name__)

#: Seconds between two looks at the job's pods (the watch wakes up at least that often).
POLL_S = 30
#: ``DisruptionTarget`` reasons that mean the pod was deleted without its kubelet, from a
#: node tainted NoExecute (pkg/controller/tainteviction/taint_eviction.go).
REASONS = ("DeletionByTaintManager",)
#: The taints the node lifecycle controller puts on a lost node (v1 ``TaintNodeUnreachable``,
#: ``TaintNodeNotReady``).
NODE_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
#: The reason of the launcher's :class:`~kfp_gpu.mpi.launch.records.NodeLost`.
REASON = "NodeLost"


@dataclass(frozen=True)
class LostPod:
    """A pod of the job deleted from its node by the taint manager: its name, node, the
    condition's reason and message, and the seconds it tolerated the node's taint (None:
    no such toleration, or forever)."""

    pod: str
    node: str
    reason: str
    message: str
    toleration_s: int | None


def toleration_s(pod: Mapping) -> int | None:
    """The smallest ``tolerationSeconds`` of the pod's NoExecute tolerations of
    :data:`NODE_TAINTS` (API JSON; a key-less ``Exists`` toleration counts), or None. Pure."""
    found = []
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        key, effect = t.get("key") or "", t.get("effect") or ""
        if (key in NODE_TAINTS or (not key and t.get("operator") == "Exists")) \
                and effect in ("", "NoExecute") and t.get("tolerationSeconds") is not None:
            found.append(int(t["tolerationSeconds"]))
    return min(found) if found else None


def lost_pods(pods: Iterable[Mapping]) -> list[LostPod]:
    """The pods (API JSON) that are being deleted and carry a True ``DisruptionTarget``
    condition with a reason of :data:`REASONS`, by name. Pure."""
    out = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if not meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        for c in status.get("conditions") or []:
            if c.get("type") == "DisruptionTarget" and c.get("status") == "True" \
                    and c.get("reason") in REASONS:
                out.append(LostPod(meta.get("name", ""), (pod.get("spec") or {}).get(
                    "nodeName", ""), c["reason"], c.get("message") or "", toleration_s(pod)))
                break
    return sorted(out, key=lambda p: p.pod)


def message(lost: list[LostPod]) -> str:
    """One line: which pods were deleted from which node, and why that ends the job. Pure."""
    nodes = sorted({p.node or "(no node)" for p in lost})
    tolerated = sorted({p.toleration_s for p in lost if p.toleration_s is not None})
    after = (f" after tolerating its NoExecute taint for {', '.join(map(str, tolerated))} s"
             if tolerated else "")
    first = lost[0]
    return (f"pod{'s' if len(lost) > 1 else ''} {', '.join(p.pod for p in lost)} deleted from "
            f"node {', '.join(nodes)} by the taint manager{after} ({first.reason}: "
            f"{first.message}): the node stopped answering or is NotReady, and an MPI job "
            "cannot go on without one of its ranks")


class NodeLossGuard:
    """Fails a job that lost a pod to the taint manager (see the module docstring).

    Args:
        core: a ``kubernetes.client.CoreV1Api`` (answers read as raw JSON).
        backend: the job's :class:`~kfp_gpu.mpi.spec.backends.Backend`.
        namespace, name: the job.
        poll_s: seconds between two LISTs of the job's pods.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, core, backend, namespace: str, name: str, poll_s: float = POLL_S,
                 clock: Callable[[], float] = time.monotonic):
        self.core, self.backend, self.namespace, self.name = core, backend, namespace, name
        self.poll_s, self.clock = poll_s, clock
        self.next_at = clock() + poll_s  # a job seen for less than that is left alone

    def check(self, obj: Mapping | None) -> None:
        """At most every ``poll_s``: list the job's pods (``obj`` is the job; nothing is
        read while it is finished or suspended). A LIST that fails is let go: the watch
        tells an API server outage.

        Raises:
            NodeLost: a pod of the job was deleted by the taint manager (the caller
                deletes the job).
        """
        if obj is None or phase(obj) in (*TERMINAL, "Suspended") or self.clock() < self.next_at:
            return
        self.next_at = self.clock() + self.poll_s
        try:
            pods = raw_json(self.core.list_namespaced_pod(
                self.namespace, label_selector=self.backend.pods_selector(self.name),
                _request_timeout=30, _preload_content=False)).get("items") or []
        except Exception as e:  # noqa: BLE001 - the watch tells the API server's trouble
            log.debug("node check: pods of %s not listed (%s)", self.name, e)
            return
        lost = lost_pods(pods)
        if lost:
            raise NodeLost(self.name, REASON, message(lost), kind=self.backend.kind)
