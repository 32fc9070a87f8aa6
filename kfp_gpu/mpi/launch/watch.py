"""Watch an MPIJob (or TrainJob) until it is Succeeded (TrainJob: Complete) or Failed.

LIST + WATCH from the list's ``resourceVersion`` (Kubernetes API concepts, "Efficient
detection of changes"); a watch that ends (``timeoutSeconds``) resumes from the last seen
version; ``410 Gone`` (history compacted, or an API server restarted with a fresh watch
cache) -> re-LIST for a fresh version (the kubernetes client's ``Watch.stream``,
kubernetes/watch/watch.py of kubernetes 30.1.0, raises the 410 ``ERROR`` event as an
``ApiException`` when ``timeout_seconds`` is given, as here, instead of retrying itself);
5xx, 429 and connection errors -> retried with bounded exponential backoff.

An outage of the API server (stopped, restarting) is told in two lines, not one per
retry: a warning when the first request fails (what failed, the retry budget), and, at the
first answer after it, how long the gap lasted and how many retries it took.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from kfp_gpu.mpi.launch import preemption
from kfp_gpu.mpi.launch.jobs_api import MPIJobClient
from kfp_gpu.mpi.launch.records import TERMINAL, MPIJobFailed, condition, phase
from kfp_gpu.mpi.launch.retry import is_transient, short

log = logging.getLogger(__name__)


class _Progress:
    """Logs each phase change once (a Suspended job in one line of
    :class:`~kfp_gpu.mpi.launch.preemption.SuspensionNotes`: queued, or preempted after it
    ran); counts consecutive transient failures."""

    def __init__(self, name: str, jobs: MPIJobClient, pending_timeout_s: float | None = None):
        self.name, self.jobs, self.last, self.failures = name, jobs, "", 0
        self.suspension = preemption.SuspensionNotes(jobs, pending_timeout_s)

    def seen(self, obj: Mapping) -> bool:
        """Log a new phase; True when ``obj`` is terminal."""
        p = phase(obj)
        self.suspension.seen(obj, p)
        if p != self.last:
            c = condition(obj, p) or {}
            c = self.jobs.backend.terminal_condition(obj) or c
            log.info("%s %s: %s %s", self.jobs.kind, self.name, p,
                     f"({c.get('reason', '')}: {c.get('message', '')})" if c else "")
            if p == "Suspended":
                log.info("%s %s: %s", self.jobs.kind, self.name, self.suspension.line(obj))
            self.last = p
        return p in TERMINAL

    def transient(self, e: BaseException) -> None:
        """Wait before the next try, or re-raise ``e`` when retries are used up. The first
        failure of an outage is one warning line; the retries are counted, not logged."""
        backoff = self.jobs.backoff
        if not is_transient(e) or self.failures >= backoff.attempts - 1:
            raise e
        d = backoff.delay(self.failures)
        if self.failures == 0:
            self.gap_began = time.monotonic()
            budget = sum(backoff.delay(k) for k in range(backoff.attempts - 1))
            log.warning("watch: the API server does not answer (%s); retrying with backoff "
                        "for up to %.0f s (%d retries)", short(e), budget, backoff.attempts - 1)
        else:
            log.debug("watch: transient error (%s); retry in %.1fs", short(e), d)
        self.jobs.sleep(d)
        self.failures += 1

    def answered(self, how: str) -> None:
        """The API server answered: after an outage, one line with its length and the
        retries it took (``how``: resuming from a version, or re-listing)."""
        if self.failures:
            log.info("watch: the API server answered again after %.1f s and %d retries; %s",
                     time.monotonic() - self.gap_began, self.failures, how)
        self.failures = 0


def wait_for_end(jobs: MPIJobClient, namespace: str, name: str, *, watch_timeout_s: int = 60,
                 log_tail: Callable[[], list[str]] = list, guard=None,
                 observer: Callable[[dict], None] | None = None, lost=None) -> dict:
    """Watch until the MPIJob is Succeeded or Failed; return its final object.

    Args:
        log_tail: returns the launcher log lines so far (for the error of a deleted job).
        guard: a :class:`kfp_gpu.mpi.launch.pending.PendingGuard` (or None): checked with each
            version of the job seen and, while it is armed, every ``guard.poll_s`` seconds
            (the WATCH then ends that often and resumes from the last version).
        observer: called with each version of the job seen (a
            :class:`kfp_gpu.mpi.launch.stall.StallNotice`'s ``seen``).
        lost: a :class:`kfp_gpu.mpi.launch.node_lost.NodeLossGuard` (or None): checked as
            ``guard`` is; the WATCH ends at least every ``lost.poll_s`` seconds.

    Raises:
        MPIJobFailed: the MPIJob was deleted by someone else (reason ``Deleted``).
        PendingTimeout: from ``guard`` (the job did not start in time).
        NodeLost: from ``lost`` (a pod of the job was deleted from a lost node).
        kubernetes.client.exceptions.ApiException: non-transient errors, or transient ones
            persisting through the client's backoff.
    """
    from kubernetes.client.exceptions import ApiException

    progress = _Progress(name, jobs, guard.timeout_s if guard is not None else None)
    guard_check = guard.check if guard is not None else (lambda obj: None)

    def look(obj: dict) -> bool:
        """The observer sees every version, the terminal one too; True when terminal."""
        if observer is not None:
            observer(obj)
        return progress.seen(obj)

    def check(obj) -> None:
        guard_check(obj)
        if lost is not None:
            lost.check(obj)
    rv: str | None = None
    last: dict | None = None
    while True:
        try:
            if rv is None:
                last, rv = jobs.list_one(namespace, name)
                progress.answered(f"re-listed at resourceVersion {rv}")
                if last is None:
                    raise MPIJobFailed(name, "Deleted", f"the {jobs.kind} no longer exists",
                                       log_tail(), kind=jobs.kind)
                if look(last):
                    return last
                check(last)
            timeout = watch_timeout_s
            if guard is not None and not guard.done:
                timeout = min(watch_timeout_s, guard.poll_s)
            if lost is not None:
                timeout = min(timeout, max(1, int(lost.poll_s)))
            for event in jobs.watch(namespace, name, rv, timeout):
                progress.answered(f"resumed the watch from resourceVersion {rv}")
                obj = event["raw_object"]
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if event["type"] == "DELETED":
                    raise MPIJobFailed(name, "Deleted",
                                       f"the {jobs.kind} was deleted while running",
                                       log_tail(), kind=jobs.kind)
                last = obj
                if look(obj):
                    return obj
                check(obj)
            # the watch timed out normally: resume from rv
            progress.answered(f"resumed the watch from resourceVersion {rv}")
            check(last)
        except MPIJobFailed:
            raise
        except ApiException as e:
            if e.status == 410:
                progress.answered("its watch history no longer holds resourceVersion "
                                  f"{rv} (410 Gone): re-listing")
                log.info("watch expired (410 Gone); re-listing for a fresh resourceVersion")
                rv = None
                continue
            progress.transient(e)
        except Exception as e:  # noqa: BLE001 - re-raised unless transient
            progress.transient(e)
