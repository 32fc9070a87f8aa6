"""Notice a job that nobody reconciles: its operator stopped (crashed, lost its leader
Lease and exited, a node went away) while the launcher waits on the job.

An operator that runs leader election renews its Lease every few seconds while it leads
(client-go tools/leaderelection: ``renewTime`` advanced every ``RetryPeriod``; a leader
that cannot renew within ``RenewDeadline`` stops leading, and mpi-operator v0.8.2 then
exits, cmd/mpi-operator/app/server.go ``OnStoppedLeading``). So a job whose status has not
changed AND whose operator's Lease has not been renewed for :data:`BOUND_FACTOR` times the
Lease's ``leaseDurationSeconds`` (30 s for mpi-operator's and Trainer's 15 s) has nobody
reconciling it. The launcher then says so in ONE warning line and keeps waiting, within
the same budgets as before (``pending_timeout_s`` before the job runs, the API backoff for
errors: the notice changes nothing else), and says once, in one line, when reconciliation
resumes (the Lease renewed again, or the job's status changed).

"Not renewed" is judged as client-go's leader election judges it: by when THIS process saw
the Lease record (holder, renewTime) change, on its own monotonic clock
(leaderelection.go ``observedTime``), never by comparing the operator's ``renewTime`` with
the local wall clock (no clock skew between machines enters).

Where the Lease is (:data:`OPERATOR_LEASES`, or ``--operator-lease NAMESPACE/NAME``):

- MPIJob: mpi-operator v0.8.2 leads in Lease ``mpi-operator`` (server.go
  ``controllerName``) in the namespace of ``--lock-namespace``, default ``mpi-operator``
  (cmd/mpi-operator/app/options/options.go); leaseDuration 15 s (server.go).
- TrainJob: Kubeflow Trainer v2.3.0 leads in Lease ``trainer.kubeflow.org``
  (manifests/base/manager/controller_manager_config.yaml ``leaderElection.resourceName``;
  ``resourceNamespace: ""`` = the manager's own namespace, pkg/config/config.go ->
  controller-runtime), which manifests/overlays/manager/kustomization.yaml makes
  ``kubeflow-system``; leaseDuration 15 s.

Cost: one GET of the Lease per Lease duration (4 a minute for a 15 s Lease). Reading a
Lease in the operator's namespace needs ``get`` on ``leases`` there, which the launcher's
own Role (manifests/rbac/role.yaml, in the pipeline's namespace) does not grant; the opt-in
manifests/rbac-operator-leases does, for these two Leases by name. Without it a 403 (or a
404: the operator leads elsewhere, or not at all) turns the check off with one debug line,
and nothing else changes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kfp_gpu.mpi.launch.jobs_api import raw_json
from kfp_gpu.mpi.launch.retry import short

log = logging.getLogger(__name__)

#: A job is unreconciled after this many Lease durations without a renewal AND without a
#: status change.
BOUND_FACTOR = 2
#: ``leaseDurationSeconds`` when a Lease does not say (mpi-operator's and Trainer's).
DEFAULT_LEASE_DURATION_S = 15
#: ``_request_timeout`` of the Lease GET: (connect, read) seconds.
REQUEST_TIMEOUT_S = (5, 10)


@dataclass(frozen=True)
class LeaseRef:
    """Where an operator's leader Lease is: ``namespace``/``name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


#: backend name (:mod:`kfp_gpu.mpi.spec.backends`) -> its operator's Lease as upstream
#: deploys it (see the module docstring).
OPERATOR_LEASES = {"mpijob": LeaseRef("mpi-operator", "mpi-operator"),
                   "trainjob": LeaseRef("kubeflow-system", "trainer.kubeflow.org")}


def lease_for(backend_name: str, spec: str = "auto") -> LeaseRef | None:
    """The Lease to check: ``spec`` ``"auto"`` -> :data:`OPERATOR_LEASES` of the backend;
    ``"NAMESPACE/NAME"`` -> that one; ``""`` or ``"none"`` -> None (no check).

    Raises:
        ValueError: ``spec`` is none of these (one line naming what is accepted).
    """
    if spec == "auto":
        return OPERATOR_LEASES.get(backend_name)
    if spec in ("", "none"):
        return None
    ns, sep, name = spec.partition("/")
    if not (sep and ns and name) or "/" in name:
        raise ValueError(f"operator lease {spec!r}: expected NAMESPACE/NAME, 'auto' or 'none'")
    return LeaseRef(ns, name)


def lease_record(lease: Mapping) -> tuple[str, str, int]:
    """``(holderIdentity, renewTime, leaseDurationSeconds)`` of a Lease (API JSON,
    coordination.k8s.io/v1). Pure."""
    spec = lease.get("spec") or {}
    return (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""),
            int(spec.get("leaseDurationSeconds") or DEFAULT_LEASE_DURATION_S))


class StallNotice:
    """Says once when a job is not reconciled, and once when it is again (module doc).

    Args:
        read_lease: returns the Lease as API JSON (raises ``ApiException`` as the client).
        kind, namespace, name: the job (for the lines).
        lease: where the Lease is (for the lines).
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(self, read_lease: Callable[[], dict], kind: str, namespace: str, name: str,
                 lease: LeaseRef, clock: Callable[[], float] = time.monotonic):
        self.read_lease, self.lease, self.clock = read_lease, lease, clock
        self.what = f"{kind} {namespace}/{name}"
        now = clock()
        self.status: object = None
        self.status_at = now  # when the job's status last changed (or the wait began)
        self.record: tuple[str, str] | None = None
        self.record_at = now  # when the Lease record was last seen to change
        self.duration_s = DEFAULT_LEASE_DURATION_S
        self.off = False  # no check (403/404): silent from then on
        self.stalled_at: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def bound_s(self) -> float:
        return BOUND_FACTOR * self.duration_s

    def seen(self, obj: Mapping) -> None:
        """A version of the job (from the watch): a changed ``status`` counts as
        reconciliation."""
        status = obj.get("status")
        with self._lock:
            if status == self.status:
                return
            changed = self.status is not None
            self.status, self.status_at = status, self.clock()
            if changed:
                self._resumed("its status changed")

    def check(self) -> None:
        """Read the Lease once and say what changed (see the class doc)."""
        from kubernetes.client.exceptions import ApiException

        if self.off:
            return
        try:
            lease = self.read_lease()
        except ApiException as e:
            if e.status in (401, 403, 404):
                self.off = True
                log.debug("reconcile check off: cannot read Lease %s (%s)", self.lease, short(e))
            return  # 5xx, 429: the API server's trouble, told by the watch
        except Exception:  # noqa: BLE001 - connection errors: the watch tells them
            return
        holder, renew, self.duration_s = lease_record(lease)
        with self._lock:
            now = self.clock()
            if (holder, renew) != self.record:
                first = self.record is None
                self.record, self.record_at = (holder, renew), now
                if not first:
                    self._resumed(f"Lease {self.lease} renewed by {holder or '(no holder)'}")
            quiet, unrenewed = now - self.status_at, now - self.record_at
            if self.stalled_at is None and min(quiet, unrenewed) > self.bound_s:
                self.stalled_at = now
                log.warning(  # (whole seconds rounded up: both are past the bound)
                    "%s: nobody reconciles it: no status change for %d s and Lease %s "
                    "(holder %s) not renewed for %d s (bound %.0f s = %d x "
                    "leaseDurationSeconds %d); still waiting", self.what, math.ceil(quiet),
                    self.lease, holder or "none", math.ceil(unrenewed), self.bound_s,
                    BOUND_FACTOR, self.duration_s)

    def _resumed(self, why: str) -> None:
        if self.stalled_at is not None:
            log.info("%s: reconciled again (%s) after %.0f s unreconciled", self.what, why,
                     self.clock() - self.stalled_at)
            self.stalled_at = None

    def start(self) -> StallNotice:
        """Check now, then every ``leaseDurationSeconds`` in a daemon thread."""
        def run() -> None:
            self.check()
            while not self.off and not self._stop.wait(self.duration_s):
                self.check()

        self._thread = threading.Thread(target=run, name="reconcile-check", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread (a Lease GET in flight ends within its request timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def notice_for(jobs, namespace: str, name: str, spec: str = "auto") -> StallNotice | None:
    """A started :class:`StallNotice` for the job ``jobs`` (a
    :class:`kfp_gpu.mpi.launch.jobs_api.MPIJobClient`) follows, or None when ``spec`` (see
    :func:`lease_for`) names no Lease."""
    from kubernetes import client

    lease = lease_for(jobs.backend.name, spec)
    if lease is None:
        return None
    coordination = client.CoordinationV1Api(jobs.api_client)

    def read() -> dict:
        return raw_json(coordination.read_namespaced_lease(
            lease.name, lease.namespace, _request_timeout=REQUEST_TIMEOUT_S,
            _preload_content=False))

    return StallNotice(read, jobs.kind, namespace, name, lease).start()
