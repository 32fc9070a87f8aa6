"""MPIJob ``status`` for the local runner, with the controller's condition rules. Pure.

Upstream (kubeflow/mpi-operator v0.8.2, commit caa3c47):
``pkg/controller/mpi_job_controller_status.go`` (reasons ``MPIJobCreated``,
``MPIJobRunning``, ``MPIJobSucceeded``, ``MPIJobFailed``; ``setCondition``: an unchanged
type/status/reason is not re-written, a new Succeeded/Failed sets Running to False) and
``pkg/controller/mpi_job_controller.go`` (``syncHandler``: Created with message
``MPIJob <ns>/<name> is created.``; ``updateMPIJobStatus``: Running once the Launcher and
every Worker run, Succeeded from the Launcher Job's completion,
``updateMPIJobFailedStatus``: the Launcher Job's failure reason, ``BackoffLimitExceeded``
with the last failed pod's reason appended after ``/``). Condition types come from
``pkg/apis/kubeflow/v2beta1/types.go`` (JobCreated, JobRunning, JobSucceeded, JobFailed).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

CREATED, RUNNING, SUCCEEDED, FAILED = "Created", "Running", "Succeeded", "Failed"
REASONS = {CREATED: "MPIJobCreated", RUNNING: "MPIJobRunning",
           SUCCEEDED: "MPIJobSucceeded", FAILED: "MPIJobFailed"}
#: batch/v1 Job failure reasons the Launcher can end with (Job controller).
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
DEADLINE_EXCEEDED = "DeadlineExceeded"
#: Runner-only reasons (no upstream counterpart, see docs/local-mpijob.md).
WORKER_FAILED = "WorkerFailed"
WORKERS_NOT_READY = "WorkersNotReady"


def now() -> str:
    """RFC 3339 UTC timestamp with seconds, as Kubernetes writes ``metav1.Time``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_reason(exit_code: int, oom_killed: bool = False) -> str:
    """The kubelet's ``state.terminated.reason`` for a container exit: ``OOMKilled``,
    ``Completed`` (exit 0) or ``Error``."""
    if oom_killed:
        return "OOMKilled"
    return "Completed" if exit_code == 0 else "Error"


@dataclass
class JobStatus:
    """An MPIJob ``status`` being moved by the runner; :meth:`to_dict` gives the object."""

    name: str
    namespace: str
    conditions: list[dict] = field(default_factory=list)
    replica_statuses: dict[str, dict] = field(default_factory=dict)
    start_time: str | None = None
    completion_time: str | None = None

    def condition(self, ctype: str) -> dict | None:
        """The condition of type ``ctype`` or None."""
        return next((c for c in self.conditions if c["type"] == ctype), None)

    def is_true(self, ctype: str) -> bool:
        """True if condition ``ctype`` has status ``"True"``."""
        c = self.condition(ctype)
        return c is not None and c["status"] == "True"

    def finished(self) -> bool:
        """Succeeded or Failed (``isFinished``)."""
        return self.is_true(SUCCEEDED) or self.is_true(FAILED)

    def set(self, ctype: str, status: str = "True", reason: str = "", message: str = "",
            ) -> bool:
        """``setCondition``: add/replace condition ``ctype``; False if type, status and
        reason are unchanged. A True Succeeded/Failed flips Running (and Failed) to False."""
        reason = reason or REASONS.get(ctype, ctype)
        cur = self.condition(ctype)
        if cur is not None and cur["status"] == status and cur["reason"] == reason:
            return False
        stamp = now()
        new = {"type": ctype, "status": status, "reason": reason, "message": message,
               "lastUpdateTime": stamp,
               "lastTransitionTime": cur["lastTransitionTime"]
               if cur is not None and cur["status"] == status else stamp}
        kept = []
        for c in self.conditions:
            if c["type"] == ctype:
                continue
            if ctype in (FAILED, SUCCEEDED) and c["type"] in (RUNNING, FAILED):
                c = {**c, "status": "False"}
            kept.append(c)
        self.conditions = [*kept, new]
        return True

    def created(self) -> None:
        """The Created condition and startTime (syncHandler)."""
        self.set(CREATED, message=f"MPIJob {self.namespace}/{self.name} is created.")
        self.start_time = self.start_time or now()

    def running(self) -> None:
        """The Running condition (Launcher and every Worker running)."""
        self.set(RUNNING, message=f"MPIJob {self.namespace}/{self.name} is running.")

    def succeeded(self) -> None:
        """Succeeded (the Launcher exited 0) and completionTime."""
        self.completion_time = self.completion_time or now()
        self.set(SUCCEEDED,
                 message=f"MPIJob {self.namespace}/{self.name} successfully completed.")

    def failed(self, reason: str, message: str = "") -> None:
        """Failed with ``reason`` and ``message`` (default: ``MPIJob <ns>/<n> has failed``)."""
        self.completion_time = self.completion_time or now()
        self.set(FAILED, reason=reason or REASONS[FAILED],
                 message=message or f"MPIJob {self.namespace}/{self.name} has failed")

    def replicas(self, role: str, active: int = 0, succeeded: int = 0, failed: int = 0,
                 ) -> None:
        """``replicaStatuses[role]`` (role ``Launcher`` or ``Worker``); zero counts are
        left out, as the Go JSON tags (``omitempty``) do."""
        counts = {"active": active, "succeeded": succeeded, "failed": failed}
        self.replica_statuses[role] = {k: v for k, v in counts.items() if v}

    def to_dict(self) -> dict:
        """The ``status`` object (``conditions``, ``replicaStatuses``, ``startTime``,
        ``completionTime``)."""
        out: dict = {"conditions": [dict(c) for c in self.conditions],
                     "replicaStatuses": {k: dict(v) for k, v in self.replica_statuses.items()}}
        if self.start_time:
            out["startTime"] = self.start_time
        if self.completion_time:
            out["completionTime"] = self.completion_time
        return out
