"""Job ``status`` for the local runner, with the controllers' condition rules. Pure.

:class:`JobStatus` is an MPIJob's, :class:`TrainJobStatus` a TrainJob's (see its docstring
for the Trainer / JobSet sources); :func:`for_plan` picks one; the runner calls the same
methods on either.

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

from kfp_gpu.mpi.local.model import LocalPlan

CREATED, RUNNING, SUCCEEDED, FAILED = "Created", "Running", "Succeeded", "Failed"
REASONS = {CREATED: "MPIJobCreated", RUNNING: "MPIJobRunning",
           SUCCEEDED: "MPIJobSucceeded", FAILED: "MPIJobFailed"}
#: batch/v1 Job ``Failed`` condition reasons and messages the Launcher Job can end with
#: (kubernetes/kubernetes ``pkg/controller/job/job_controller.go`` syncJob, at commit
#: 6ae037f: ``newFailureCondition(JobReasonBackoffLimitExceeded, ...)`` and
#: ``(JobReasonDeadlineExceeded, ...)``); mpi-operator copies them into the MPIJob.
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
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

    def is_success(self) -> bool:
        """True if the job ended well (``Succeeded`` True)."""
        return self.is_true(SUCCEEDED)

    def worker_failed(self, pod: str, code: int, reason: str, tail: str = "") -> None:
        """A Worker exited (runner-only ``WorkerFailed/<reason>``, docs/local-mpijob.md)."""
        self.failed(f"{WORKER_FAILED}/{reason}", f"worker {pod} exited with code {code} "
                    f"({reason})" + (f": {tail}" if tail else ""))

    def launcher_failed(self, pod: str, code: int, reason: str, tail: str = "",
                        last_failed_pod: tuple[str, str] | None = None) -> None:
        """The Launcher Job failed with ``BackoffLimitExceeded``: mpi-operator's text.

        kubeflow/mpi-operator v0.8.2 ``pkg/controller/mpi_job_controller.go``
        ``updateMPIJobFailedStatus`` (l. 1202-1234) takes reason and message of the Job's
        ``Failed`` condition (:data:`BACKOFF_LIMIT_EXCEEDED`, :data:`BACKOFF_LIMIT_MESSAGE`)
        and, for that reason, appends ``"/" + pod.status.reason`` and
        ``": " + pod.status.message`` of the last launcher pod in phase Failed, if one is
        left (pinned by ``TestLauncherFailed`` in ``mpi_job_controller_test.go``: reason
        ``BackoffLimitExceeded/FailedReason2``). Those are the *pod's* fields, not the
        container's ``Error``/``OOMKilled``: kubelet leaves them empty for a pod whose
        container exited and fills them only for evictions, a pod's own deadline and node
        shutdown, none of which happens here.

        Args:
            pod, code, reason, tail: the Launcher container, its exit code, the container
                reason (:func:`container_reason`) and last lines: not part of the condition
                (the operator never sees them); the reconciler logs them.
            last_failed_pod: ``(status.reason, status.message)`` of the last Failed launcher
                pod, None when none is left (restartPolicy OnFailure: the Job controller
                deletes the one pod; see :mod:`kfp_gpu.mpi.local.reconcile`).
        """
        del pod, code, reason, tail  # runner detail, not the operator's text
        reason_out, message = BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE
        if last_failed_pod is not None:
            reason_out += "/" + last_failed_pod[0]
            message += ": " + last_failed_pod[1]
        self.failed(reason_out, message)

    def deadline_exceeded(self) -> None:
        """``activeDeadlineSeconds`` passed: the Launcher Job's ``DeadlineExceeded`` condition
        copied as it is (no pod suffix: ``updateMPIJobFailedStatus`` appends one only to
        ``BackoffLimitExceeded``)."""
        self.failed(DEADLINE_EXCEEDED, DEADLINE_MESSAGE)

    def workers_not_ready(self, timeout_s: float) -> None:
        """Runner-only ``WorkersNotReady``: Workers not running and listening in time."""
        self.failed(WORKERS_NOT_READY,
                    f"Workers not running and listening after {timeout_s:.0f} s")

    def replicas(self, role: str, active: int = 0, succeeded: int = 0, failed: int = 0,
                 total: int = 0, job_failed: bool | None = None) -> None:
        """``replicaStatuses[role]`` (role ``Launcher`` or ``Worker``) from pod counts; zero
        counts are left out, as the Go JSON tags (``omitempty``) do. For the Launcher,
        ``failed`` is the Launcher Job's ``status.failed`` (failed pods, not container
        restarts: ``updateMPIJobStatus`` l. 1120). ``total`` (the pods expected) and
        ``job_failed`` are not used by the MPIJob status."""
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


#: TrainJob condition types (kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/
#: trainjob_types.go l. 57-64); there is no Created or Running condition.
COMPLETE = "Complete"
#: JobSet v0.12.0 reasons and messages the JobSet plugin copies into the TrainJob
#: (kubernetes-sigs/jobset pkg/constants/constants.go l. 51-62; trainer plugins/jobset/
#: jobset.go Status l. 450-457), and Trainer's own deadline reason (trainjob_types.go l. 83,
#: pkg/constants/constants.go l. 85-88).
ALL_JOBS_COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts",
                        "jobset failed due to reaching max number of restarts")
TRAINJOB_DEADLINE = ("DeadlineExceeded", "TrainJob exceeded its active deadline")
#: Replicated jobs of an MPI runtime (pkg/constants Node, Launcher) by runner role.
REPLICATED_JOB = {"Worker": "node", "Launcher": "launcher"}


@dataclass
class TrainJobStatus:
    """A TrainJob ``status`` (``conditions``, ``jobsStatus``) moved by the runner, with the
    methods of :class:`JobStatus`. Conditions are ``metav1.Condition``s set the way
    ``meta.SetStatusCondition`` does (``lastTransitionTime`` changes with the status only).

    ``failure_reason`` is JobSet's: ``ReachedMaxRestarts`` when the runtime has a
    ``failurePolicy`` (its default action RestartJobSet, with ``maxRestarts`` reached:
    jobset ``pkg/controllers/failure_policy.go`` l. 225-233), ``FailedJobs`` without one
    (l. 52-61); the message names the first failed child Job ``<J>-<replicatedJob>-0``
    (``messageWithFirstFailedJob`` l. 469-471), followed here by the pod's exit and last
    output lines (runner-only detail). ``launcher_backoff_limit``: the launcher Job's
    ``backoffLimit`` (its pod failures up to it are retries, not a failed Job).
    """

    name: str
    namespace: str
    failure_reason: str = FAILED_JOBS[0]
    launcher_backoff_limit: int = 0
    conditions: list[dict] = field(default_factory=list)
    jobs_status: dict[str, dict] = field(default_factory=dict)

    condition = JobStatus.condition
    is_true = JobStatus.is_true

    def finished(self) -> bool:
        """Complete or Failed (``trainjob.IsTrainJobFinished``)."""
        return self.is_true(COMPLETE) or self.is_true(FAILED)

    def is_success(self) -> bool:
        """True if the TrainJob is ``Complete``."""
        return self.is_true(COMPLETE)

    def set(self, ctype: str, status: str = "True", reason: str = "", message: str = "",
            ) -> bool:
        """``meta.SetStatusCondition``: add or update; False if nothing changed."""
        cur = self.condition(ctype)
        if cur is not None and (cur["status"], cur["reason"], cur["message"]) == (
                status, reason, message):
            return False
        stamp = now() if cur is None or cur["status"] != status else cur["lastTransitionTime"]
        new = {"type": ctype, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": stamp}
        self.conditions = [c for c in self.conditions if c["type"] != ctype] + [new]
        return True

    def created(self) -> None:
        """Nothing: Trainer v2.3.0 writes no condition when the JobSet is created."""

    def running(self) -> None:
        """Nothing: no Running condition (``jobsStatus`` shows the active jobs)."""

    def succeeded(self) -> None:
        """``Complete`` from JobSet's ``Completed`` (successPolicy: the launcher job)."""
        self.set(COMPLETE, reason=ALL_JOBS_COMPLETED[0], message=ALL_JOBS_COMPLETED[1])

    def failed(self, reason: str, message: str = "") -> None:
        """``Failed`` with ``reason`` and ``message``."""
        self.set(FAILED, reason=reason, message=message)

    def _job_failed(self, job: str, pod: str, code: int, reason: str, tail: str) -> None:
        base = dict((FAILED_JOBS, REACHED_MAX_RESTARTS))[self.failure_reason]
        self.failed(self.failure_reason,
                    f"{base} (first failed job: {self.name}-{job}-0); pod {pod} exited with "
                    f"code {code} ({reason})" + (f": {tail}" if tail else ""))

    def worker_failed(self, pod: str, code: int, reason: str, tail: str = "") -> None:
        """A ``node`` pod failed: its Job fails (``backoffLimit: 0``), so the JobSet."""
        self._job_failed("node", pod, code, reason, tail)

    def launcher_failed(self, pod: str, code: int, reason: str, tail: str = "",
                        last_failed_pod: tuple[str, str] | None = None) -> None:
        """The launcher Job failed (past its ``backoffLimit``, by the Job controller's rule
        for its restartPolicy: see :mod:`kfp_gpu.mpi.local.reconcile`). JobSet's message
        names the Job, not a pod: ``last_failed_pod`` is not used."""
        del last_failed_pod
        self._job_failed("launcher", pod, code, reason, tail)

    def deadline_exceeded(self) -> None:
        """``spec.activeDeadlineSeconds`` passed (trainjob_controller.go l. 155-190)."""
        self.failed(*TRAINJOB_DEADLINE)

    def workers_not_ready(self, timeout_s: float) -> None:
        """Runner-only ``WorkersNotReady``: the node pods not running and listening."""
        self.failed(WORKERS_NOT_READY,
                    f"node pods not running and listening after {timeout_s:.0f} s")

    def replicas(self, role: str, active: int = 0, succeeded: int = 0, failed: int = 0,
                 total: int = 0, job_failed: bool | None = None) -> None:
        """``jobsStatus`` entry of the replicated job for ``role`` (one child Job) from its
        pods' counts, as JobSet counts child Jobs (jobset_controller.go l. 458-520): failed
        (``job_failed``, the Job controller's decision; when None: failed pods past its
        backoffLimit, the rule for restartPolicy Never), succeeded when every pod did,
        else active/ready."""
        if job_failed is None:
            limit = self.launcher_backoff_limit if role == "Launcher" else 0
            job_failed = failed > limit
        done = job_failed or (total > 0 and succeeded >= total)
        self.jobs_status[REPLICATED_JOB[role]] = {
            "name": REPLICATED_JOB[role],
            "ready": int(not done and total > 0 and active + succeeded >= total),
            "succeeded": int(not job_failed and done), "failed": int(job_failed),
            "active": int(not done and active > 0), "suspended": 0}

    def to_dict(self) -> dict:
        """The ``status`` object: ``conditions`` and ``jobsStatus`` (runtime order)."""
        jobs = [dict(self.jobs_status[n]) for n in ("node", "launcher") if n in self.jobs_status]
        return {"conditions": [dict(c) for c in self.conditions], "jobsStatus": jobs}


def for_plan(plan: LocalPlan) -> JobStatus | TrainJobStatus:
    """The status object for a :class:`kfp_gpu.mpi.local.model.LocalPlan` (by ``kind``)."""
    if plan.kind == "TrainJob":
        return TrainJobStatus(plan.name, plan.namespace, plan.controller.failure_reason or FAILED_JOBS[0],
                              plan.policy.backoff_limit)
    return JobStatus(plan.name, plan.namespace)
