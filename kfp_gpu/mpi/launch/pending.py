"""Pending timeout: a job whose pods never start (no GPU free, image pull error, crash
loop) is deleted after ``timeout_s`` with the reason the pods show, instead of holding the
GPUs it did get and the pipeline forever.

Pure part: :func:`pod_blockers`, :func:`event_blockers` and :func:`diagnose` read pods and
Events as the API serves them (camelCase JSON, ``core/v1`` Pod and Event):

- ``status.conditions[type=PodScheduled, status=False]`` with reason ``Unschedulable`` and
  the scheduler's message (``0/8 nodes are available: 8 Insufficient nvidia.com/gpu.``;
  k8s.io/api core/v1 ``PodReasonUnschedulable``);
- ``status.(init)containerStatuses[].state.waiting`` with a reason of
  :data:`WAITING_REASONS` (kubelet ``pkg/kubelet/images/types.go``: ErrImagePull,
  ImagePullBackOff, InvalidImageName; ``pkg/kubelet/kuberuntime``: CrashLoopBackOff,
  CreateContainerConfigError, CreateContainerError);
- ``Warning`` Events about the pods (``FailedScheduling`` from the scheduler,
  ``FailedMount``, ``Failed``, ``BackOff`` from the kubelet).

I/O part: :class:`PendingGuard` lists the job's pods (all of them, by the backend's
:meth:`~kfp_gpu.mpi.spec.backends.Backend.pods_selector`) and their Events when the time is up.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kfp_gpu.mpi.launch.jobs_api import raw_json
from kfp_gpu.mpi.launch.records import TERMINAL, PendingTimeout, phase

log = logging.getLogger(__name__)

#: Container waiting reasons that mean the pod will not start by itself soon.
WAITING_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                   "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError")
#: Default seconds a job may stay before Running (the component's ``pending_timeout_s``).
DEFAULT_TIMEOUT_S = 600
#: Pods whose Events are read at the timeout (the first ones, oldest first).
MAX_PODS_FOR_EVENTS = 4


@dataclass(frozen=True)
class Blocker:
    """Why a pod does not run: ``reason`` (``Unschedulable``, ``ImagePullBackOff``...),
    the ``message`` its source gave, and the pod's name."""

    pod: str
    reason: str
    message: str


def pod_blockers(pod: Mapping) -> list[Blocker]:
    """What keeps one pod (API JSON) from running: an Unschedulable ``PodScheduled``
    condition, then containers waiting for a reason of :data:`WAITING_REASONS`."""
    name = (pod.get("metadata") or {}).get("name", "")
    status = pod.get("status") or {}
    out = [Blocker(name, c.get("reason") or "Unschedulable", c.get("message") or "")
           for c in status.get("conditions") or []
           if c.get("type") == "PodScheduled" and c.get("status") == "False"]
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in WAITING_REASONS:
                out.append(Blocker(name, waiting["reason"],
                                   f"container {cs.get('name', '')}: "
                                   f"{waiting.get('message') or waiting['reason']}"))
    return out


def event_blockers(events: Iterable[Mapping]) -> list[Blocker]:
    """``Warning`` Events (API JSON) as blockers, newest last (by ``lastTimestamp``)."""
    warnings = [e for e in events if e.get("type") == "Warning"]
    warnings.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return [Blocker((e.get("involvedObject") or {}).get("name", ""), e.get("reason", ""),
                    e.get("message", "")) for e in warnings]


def diagnose(pods: Iterable[Mapping], events: Iterable[Mapping] = ()) -> Blocker | None:
    """The most telling reason a job's pods do not run: a pod's own status first
    (Unschedulable before container waits), else the latest Warning Event, else None."""
    found = [b for p in pods for b in pod_blockers(p)]
    found.sort(key=lambda b: b.reason != "Unschedulable")
    if found:
        return found[0]
    from_events = event_blockers(events)
    return from_events[-1] if from_events else None


def started(backend, obj: Mapping) -> bool:
    """True once the job runs (no pending timeout from then on): terminal, or MPIJob
    condition ``Running``, or a TrainJob replicated job with a ready or finished pod
    (``active`` counts pending pods too, so it does not tell)."""
    p = phase(obj)
    if p in TERMINAL or (backend.name == "mpijob" and p == "Running"):
        return True
    jobs = (obj.get("status") or {}).get("jobsStatus") or []
    return any((j.get("ready") or 0) + (j.get("succeeded") or 0) > 0 for j in jobs)


class PendingGuard:
    """Fails a job that does not start within ``timeout_s`` (see the module docstring).

    Args:
        core: a ``kubernetes.client.CoreV1Api`` (its answers are read as raw JSON, so a
            status the client's models would refuse still reads).
        backend: the job's :class:`~kfp_gpu.mpi.spec.backends.Backend`.
        namespace, name: the job.
        timeout_s: seconds from the guard's creation (a ``Suspended`` job, e.g. queued by
            Kueue, restarts the clock); 0 disables the guard. A job suspended after it
            started (preempted by Kueue: :mod:`kfp_gpu.mpi.launch.preemption`) arms the
            guard again: once resumed, it has ``timeout_s`` to run again.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, core, backend, namespace: str, name: str, timeout_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self.core, self.backend = core, backend
        self.namespace, self.name, self.timeout_s, self.clock = namespace, name, timeout_s, clock
        self.deadline = clock() + timeout_s
        self.done = timeout_s <= 0
        self.ran = False  # disarmed because the job started (not by a timeout)

    @property
    def poll_s(self) -> int:
        """How often (s) the watch should wake up to :meth:`check` while armed."""
        return max(1, min(30, int(self.timeout_s / 4) or 1))

    def check(self, obj: Mapping | None) -> None:
        """Disarm once ``obj`` (the job) has started, arm again when a started job is
        suspended; raise when the time is up.

        Raises:
            PendingTimeout: the job is not Running after ``timeout_s``; reason and message
                from :func:`diagnose` (the caller deletes the job).
        """
        if obj is None:
            return
        suspended = phase(obj) == "Suspended"
        if self.done:
            if not (self.ran and suspended):
                return
            self.done = self.ran = False  # preempted: its pods must run again in time
        if suspended:
            self.deadline = self.clock() + self.timeout_s
            return
        if started(self.backend, obj):
            self.done = self.ran = True
            return
        if self.clock() < self.deadline:
            return
        pods, events = self._pods_and_events()
        found = diagnose(pods, events)
        when = f"not Running after {self.timeout_s:g} s (pending_timeout_s)"
        if found is None:
            reason, message = "PendingTimeout", f"{when}; {len(pods)} pod(s), no reason shown"
        else:
            reason, message = found.reason, f"{found.message} (pod {found.pod}; {when})"
        self.done = True
        raise PendingTimeout(self.name, reason, message, kind=self.backend.kind)

    def _pods_and_events(self) -> tuple[list[dict], list[dict]]:
        """The job's pods and the Events about the first few of them (best effort)."""
        pods: list[dict] = []
        events: list[dict] = []
        with contextlib.suppress(Exception):
            pods = _items(self.core.list_namespaced_pod(
                self.namespace, label_selector=self.backend.pods_selector(self.name),
                _request_timeout=30, _preload_content=False))
            pods.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
        for pod in pods[:MAX_PODS_FOR_EVENTS]:
            with contextlib.suppress(Exception):
                events.extend(_items(self.core.list_namespaced_event(
                    self.namespace,
                    field_selector=f"involvedObject.name={pod['metadata']['name']}",
                    _request_timeout=30, _preload_content=False)))
        return pods, events


def _items(resp) -> list[dict]:
    """``items`` of a raw LIST response (:func:`kfp_gpu.mpi.launch.jobs_api.raw_json`)."""
    return list(raw_json(resp).get("items") or [])
