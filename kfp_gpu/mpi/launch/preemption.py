"""A job suspended after it ran -- preempted by Kueue, or suspended by hand -- in one line:
what happened, where its pods went, and what the launcher does next.

Upstream behaviour this relies on:

- Kueue preempts an admitted Workload for a higher-priority one in its ClusterQueue
  (``preemption.withinClusterQueue: LowerPriority``; kubernetes-sigs/kueue v0.19.2
  ``pkg/scheduler/preemption/preemption.go`` ``IssuePreemptions``: the Workload gets
  ``Evicted`` with reason ``Preempted`` and the message ``Preempted to accommodate a
  workload (UID: ..., JobUID: ...) due to prioritization in the ClusterQueue; ...``).
  Kueue's job reconciler then stops the job: it sets ``runPolicy.suspend`` (TrainJob:
  ``spec.suspend``) and records a ``Normal`` Event ``Stopped`` with that message on the
  job (``pkg/controller/jobframework/reconciler.go`` ``stopJob``, reason
  ``ReasonStopped``), and requeues the Workload (``Requeued`` True when evicted by
  preemption): Kueue admits it again when quota frees.
- mpi-operator v0.8.2 (``pkg/controller/mpi_job_controller.go``) deletes the Worker pods
  of a suspended MPIJob (``cleanUpWorkerPods``), suspends its Launcher Job (the Job
  controller then deletes the Launcher pod), and sets ``Suspended`` True
  (``MPIJobSuspended``) and ``Running`` False; ``status.startTime`` is set when a job is
  first unsuspended and kept, so a suspended job with a ``startTime`` had been admitted.
  JobSet likewise deletes the pods of a suspended TrainJob's Jobs.

What the launcher then does (:class:`kfp_gpu.mpi.launch.pending.PendingGuard`): it keeps
waiting. The time the job spends suspended is not counted against ``pending_timeout_s``
(as for a job that waits for its first admission); from the moment it is admitted again,
its pods have ``pending_timeout_s`` to run, else the launcher deletes the job and ends
with the pods' reason (:class:`kfp_gpu.mpi.launch.records.PendingTimeout`);
``pending_timeout_s`` 0 waits without a limit.

Pure part: :func:`ran_before`, :func:`stop_message`, :func:`note`. I/O:
:func:`read_stop_message` (one LIST of the job's Events: the Role's ``events`` list).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping

from kfp_gpu.mpi.launch.jobs_api import raw_json
from kfp_gpu.mpi.launch.records import suspended_note
from kfp_gpu.mpi.spec import crd

log = logging.getLogger(__name__)

#: The Event reason Kueue records on a job it stops (kubernetes-sigs/kueue v0.19.2
#: ``pkg/controller/jobframework/reconciler.go`` ``ReasonStopped``).
STOPPED_REASON = "Stopped"
#: Longest stop message quoted in the one line (Kueue's names UIDs and queue paths).
MAX_MESSAGE = 300


def ran_before(obj: Mapping) -> bool:
    """Whether the job had been admitted (unsuspended) before: an MPIJob's
    ``status.startTime`` (mpi-operator sets it when the job is first unsuspended and keeps
    it while suspended). Pure."""
    return bool((obj.get("status") or {}).get("startTime"))


def stop_message(events: Iterable[Mapping], kind: str) -> str:
    """The message of the newest ``Stopped`` Event (API JSON, core/v1 view) about a job of
    ``kind``, or ``""``. Kueue records its events through the events.k8s.io API, whose
    core/v1 view carries ``eventTime`` (``lastTimestamp`` may be empty). Pure."""
    found = [e for e in events if e.get("reason") == STOPPED_REASON
             and (e.get("involvedObject") or {}).get("kind", kind) == kind]
    if not found:
        return ""
    found.sort(key=lambda e: str(e.get("eventTime") or e.get("lastTimestamp")
                                 or (e.get("metadata") or {}).get("creationTimestamp") or ""))
    text = " ".join(str(found[-1].get("message") or "").split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def note(obj: Mapping, kind: str, message: str, pending_timeout_s: float | None) -> str:
    """The one line for a job seen ``Suspended`` after it ran (see the module docstring):
    who suspended it and why (``message``, Kueue's ``Stopped`` Event; empty when none was
    found), that its pods are deleted, and what the launcher does next with
    ``pending_timeout_s`` (None: no pending limit is applied by this launcher). Pure."""
    queue = ((obj.get("metadata") or {}).get("labels") or {}).get(crd.KUEUE_QUEUE_LABEL)
    flag = "runPolicy.suspend" if kind == crd.KIND else "spec.suspend"
    if queue:
        who = f"suspended by Kueue ({message or flag + ' set; its Stopped Event not found'})"
        then, again = f"waiting for Kueue to admit it again in queue {queue}", "admitted"
    else:
        who = f"suspended ({flag} set{': ' + message if message else ''})"
        then, again = "waiting until it is resumed", "resumed"
    if pending_timeout_s is None:
        budget = ""
    elif pending_timeout_s > 0:
        budget = (f" (not counted against pending_timeout_s); once {again}, its pods have "
                  f"pending_timeout_s={pending_timeout_s:g} s to run, else the launcher "
                  "deletes the job and ends with their reason")
    else:
        budget = " with no limit (pending_timeout_s=0)"
    return (f"{who} after it ran; the operator deletes its pods while it is "
            f"suspended, so it holds no GPUs; {then}{budget}")


def read_stop_message(core, namespace: str, name: str, kind: str,
                      sleep: Callable[[float], None], tries: int = 3) -> str:
    """:func:`stop_message` of the job's Events (``fieldSelector
    involvedObject.name=<name>``), looked up to ``tries`` times one second apart: Kueue
    records the Event asynchronously after it suspends the job. Best effort: ``""`` when
    none is found or the Events cannot be read."""
    for attempt in range(tries):
        with contextlib.suppress(Exception):
            events = raw_json(core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={name}",
                _request_timeout=30, _preload_content=False)).get("items") or []
            found = stop_message(events, kind)
            if found:
                return found
        if attempt < tries - 1:
            sleep(1.0)
    return ""


class SuspensionNotes:
    """What the watch logs when a job's phase turns ``Suspended``: the queue note of
    :func:`kfp_gpu.mpi.launch.records.suspended_note` for a job waiting for its first
    admission, the :func:`note` line for one suspended after it ran (seen running by this
    launcher, or :func:`ran_before`).

    Args:
        jobs: the :class:`kfp_gpu.mpi.launch.jobs_api.MPIJobClient` (its ``core`` reads the
            Events, its ``sleep`` waits between looks).
        pending_timeout_s: the launcher's pending budget (None: no guard).
    """

    def __init__(self, jobs, pending_timeout_s: float | None):
        self.jobs, self.pending_timeout_s, self.ran = jobs, pending_timeout_s, False

    def seen(self, obj: Mapping, phase: str) -> None:
        """Remember that the job ran (a phase other than Suspended after an admission)."""
        if phase in ("Running", "Restarting") or (phase != "Suspended" and ran_before(obj)):
            self.ran = True

    def line(self, obj: Mapping) -> str:
        """The line for ``obj`` now Suspended."""
        kind = self.jobs.kind
        if not (self.ran or ran_before(obj)):
            return suspended_note(obj, kind)
        meta = obj.get("metadata") or {}
        message = read_stop_message(self.jobs.core, meta.get("namespace", ""),
                                    meta.get("name", ""), kind, self.jobs.sleep)
        return note(obj, kind, message, self.pending_timeout_s)
