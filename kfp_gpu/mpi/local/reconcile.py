"""One look at a job's containers, decided as the operator's controller would.

:class:`Reconciler` is what :meth:`kfp_gpu.mpi.local.runner.LocalMPIJobRunner.wait` calls in a
loop: it reads the containers (:class:`~kfp_gpu.mpi.local.containers.JobContainers`), creates
the Launcher when due, restarts or fails it, and writes the job's status
(:mod:`kfp_gpu.mpi.local.status`). Upstream: kubeflow/mpi-operator v0.8.2
``pkg/controller/mpi_job_controller.go`` (``syncHandler``: Workers first, the Launcher once
they are ready under ``WaitForWorkersReady``, ``updateMPIJobStatus``), the Launcher being a
batch/v1 Job (kubernetes/kubernetes ``pkg/controller/job/job_controller.go``, read at commit
6ae037f, for its restarts, failure and deadline: :func:`launcher_job_failed`).

The Launcher Job's pods get the Launcher replica's ``restartPolicy`` (``setRestartPolicy``
l. 1722-1728; default ``OnFailure``, ``ExitCode`` -> ``Never``), and the Job controller's
backoff rule depends on it:

- ``OnFailure``: kubelet restarts the container in the same pod, and the Job fails as soon as
  the pod's container ``restartCount`` reaches ``backoffLimit`` (``pastBackoffLimitOnFailure``:
  ``restarts >= backoffLimit``, ``> 0`` when it is 0). The count goes up when the restarted
  container starts, so after the ``backoffLimit``-th failed run (the first when it is 0 or
  1) the Job fails and deletes the pod: the last restart is cut short. Here it is not
  started at all. ``status.failed`` is then 1 (the deleted pod).
- ``Never``: every failed run is a Failed pod; the Job fails once ``failed > backoffLimit``
  (syncJob's ``exceedsBackoffLimit``): ``backoffLimit + 1`` full runs.

Locally a restart is in the same container, at once (no kubelet/Job back-off delay of
10 s, 20 s, ...; with ``Never`` a new pod upstream, the same container here).
"""

from __future__ import annotations

import logging
import time

from kfp_gpu.mpi.local import status as ls
from kfp_gpu.mpi.local import workspace as lw
from kfp_gpu.mpi.local.containers import JobContainers, log_tail, state

log = logging.getLogger(__name__)


def launcher_job_failed(restart_policy: str, backoff_limit: int, failed_runs: int) -> bool:
    """True if the Launcher Job fails after its ``failed_runs``-th non-zero exit (pure).

    kubernetes/kubernetes ``pkg/controller/job/job_controller.go`` (commit 6ae037f)
    syncJob: ``exceedsBackoffLimit := failed > *job.Spec.BackoffLimit`` (failed pods: the
    rule for ``restartPolicy: Never``) or ``pastBackoffLimitOnFailure`` (``OnFailure`` only:
    the sum of the running pod's container ``restartCount`` ``>= backoffLimit``, or ``> 0``
    when ``backoffLimit`` is 0); the restart after the n-th failed run makes the count n.

    Args:
        restart_policy: the Launcher pod's ``restartPolicy`` (``OnFailure`` or ``Never``;
            :attr:`kfp_gpu.mpi.local.model.RunPolicy.launcher_pod_restart_policy`).
        backoff_limit: the Launcher Job's ``backoffLimit`` (>= 0).
        failed_runs: non-zero exits of the Launcher container so far (>= 1).
    """
    if restart_policy == "OnFailure":
        return failed_runs >= backoff_limit if backoff_limit > 0 else failed_runs > 0
    return failed_runs > backoff_limit


def launcher_failed_pods(restart_policy: str, failed_runs: int, job_failed: bool) -> int:
    """The Launcher Job's ``status.failed`` (pure): with ``Never`` one Failed pod per failed
    run; with ``OnFailure`` the one pod restarts in place (phase Running) and counts as
    failed only when the failing Job deletes it (``isPodFailed`` in the same file: a pod in
    phase Failed, which kubelet gives a deleted pod that had not succeeded)."""
    if restart_policy == "OnFailure":
        return int(job_failed)
    return failed_runs


class Reconciler:
    """The controller's decisions for one job.

    Args:
        jc: the job's containers.
        status: the job's status object (:func:`kfp_gpu.mpi.local.status.for_plan`).
        ready_timeout_s: seconds the Workers get to run and listen (then ``Failed``,
            ``WorkersNotReady``).
    """

    def __init__(self, jc: JobContainers, status, ready_timeout_s: float):
        self.jc, self.plan, self.status = jc, jc.plan, status
        self.ready_timeout_s = ready_timeout_s
        self.launcher = None
        self.launcher_failures = 0
        self.launcher_pods_failed = 0
        self.launcher_job_failed = False
        self.t0 = time.monotonic()
        #: monotonic time the ``activeDeadlineSeconds`` clock started (None: not yet):
        #: the Launcher's creation for an MPIJob, the job's for a TrainJob
        #: (:attr:`kfp_gpu.mpi.local.model.RunPolicy.deadline_from`).
        self.deadline_start: float | None = (
            self.t0 if self.plan.policy.deadline_from == "job" else None)

    def step(self) -> None:
        """One look at the containers: fail, create the Launcher, follow it, count replicas."""
        workers = self.jc.workers()
        if self._worker_failure(workers) or self._deadline_passed():
            return
        if self.launcher is None and not self._create_launcher(workers):
            return
        if self.launcher is not None:
            self.launcher.reload()
            launcher_state = state(self.launcher)[0]
            if launcher_state in ("exited", "dead"):
                self._launcher_exit()
            elif launcher_state == "running" and all(state(c)[0] == "running"
                                                     for c in workers):
                self.status.running()
        self.update_replicas(workers)

    def _create_launcher(self, workers: list) -> bool:
        """Create the Launcher when its policy allows; False if the Workers never got ready."""
        at_startup = self.plan.policy.launcher_creation_policy == "AtStartup"
        if at_startup or self.jc.ready(workers):
            lw.write_discover_hosts(self.jc.workspace, self.plan,
                                    [c.name for c in workers if state(c)[0] == "running"])
            self.launcher = self.jc.run(self.plan.launcher)
            if self.deadline_start is None:
                # the Launcher Job's status.startTime: set at its first sync after creation
                # (job_controller.go syncJob "Job first start"); pastActiveDeadline counts
                # from it. The MPIJob itself has no deadline (mpi-operator v0.8.2
                # newLauncherJob l. 1568 puts runPolicy.activeDeadlineSeconds there only).
                self.deadline_start = time.monotonic()
        elif time.monotonic() - self.t0 > self.ready_timeout_s:
            self.status.workers_not_ready(self.ready_timeout_s)
            return False
        return True

    def _worker_failure(self, workers: list) -> str | None:
        """The first Worker that exited non-zero (or at all before the Launcher started: it
        can never become ready), after setting the Failed reason; else None."""
        for c in workers:
            s, code, oom = state(c)
            if s in ("exited", "dead") and (code != 0 or oom or self.launcher is None):
                self.status.worker_failed(c.name, code, ls.container_reason(code, oom),
                                          log_tail(c))
                return c.name
        return None

    def _launcher_exit(self) -> None:
        """An exited Launcher: Succeeded, a restart, or Failed by the Job controller's
        backoff rule for its restartPolicy (:func:`launcher_job_failed`)."""
        _, code, oom = state(self.launcher)
        if code == 0 and not oom:
            self.status.succeeded()
            return
        self.launcher_failures += 1
        policy = self.plan.policy.launcher_pod_restart_policy
        reason = ls.container_reason(code, oom)
        self.launcher_job_failed = launcher_job_failed(
            policy, self.plan.policy.backoff_limit, self.launcher_failures)
        self.launcher_pods_failed = launcher_failed_pods(policy, self.launcher_failures,
                                                         self.launcher_job_failed)
        if self.launcher_job_failed:
            tail = log_tail(self.launcher)
            log.info("%s %s: launcher %s exited %d (%s) after %d failed run(s), "
                     "restartPolicy %s, backoffLimit %d: Job failed%s", self.plan.kind,
                     self.jc.key, self.launcher.name, code, reason, self.launcher_failures,
                     policy, self.plan.policy.backoff_limit, f": {tail}" if tail else "")
            # Never: the Failed pods stay, the last one's pod-level reason and message are
            # empty (a container exit); OnFailure: the one pod was deleted by the Job
            # controller, so updateMPIJobFailedStatus finds no Failed pod to append.
            self.status.launcher_failed(self.launcher.name, code, reason, tail,
                                        last_failed_pod=("", "") if policy == "Never"
                                        else None)
            return
        log.info("%s %s: launcher exited %d, restart after %d failed run(s) (restartPolicy "
                 "%s, backoffLimit %d)", self.plan.kind, self.jc.key, code,
                 self.launcher_failures, policy, self.plan.policy.backoff_limit)
        self.launcher.start()

    def _deadline_passed(self) -> bool:
        """``activeDeadlineSeconds`` past since :attr:`deadline_start` (job_controller.go
        ``pastActiveDeadline``: false while the Job has no startTime): Failed with the Job's
        ``DeadlineExceeded``; the Job controller deletes the active Launcher pod, counted
        failed (``isPodFailed``). A TrainJob's deadline is its own (Trainer deletes the
        JobSet), not its launcher Job's."""
        limit = self.plan.policy.active_deadline_seconds
        if (limit is not None and self.deadline_start is not None
                and time.monotonic() - self.deadline_start > limit):
            if self.plan.policy.deadline_from == "launcher" and self.launcher is not None:
                self.launcher_pods_failed += 1
                self.launcher_job_failed = True
            self.status.deadline_exceeded()
            return True
        return False

    def update_replicas(self, workers: list, finished: bool = False) -> None:
        """``status.replicaStatuses`` from the containers' states. Once an MPIJob has
        ``finished`` its Worker entry is empty, whatever Workers are left: mpi-operator
        v0.8.2 ``syncHandler`` lists no Workers once the Launcher Job is finished and
        ``updateMPIJobStatus`` counts that empty list (seen on the real control plane:
        ``"Worker": {}`` under every cleanPodPolicy)."""
        if finished and self.plan.kind != "TrainJob":
            workers = []
        counts = {"running": 0, "ok": 0, "bad": 0}
        for c in workers:
            s, code, oom = state(c)
            key = "running" if s == "running" else (
                "ok" if s == "exited" and code == 0 and not oom else "bad")
            counts[key] += 1 if s in ("running", "exited", "dead") else 0
        self.status.replicas("Worker", counts["running"], counts["ok"], counts["bad"],
                             total=len(self.plan.workers))
        if self.launcher is not None:
            s, code, _ = state(self.launcher)
            self.status.replicas("Launcher", active=int(s == "running"),
                                 succeeded=int(s == "exited" and code == 0),
                                 failed=self.launcher_pods_failed, total=1,
                                 job_failed=self.launcher_job_failed)

    def stop_launcher(self) -> None:
        """Stop a Launcher still running when the job has finished."""
        if self.launcher is not None and state(self.launcher)[0] == "running":
            self.launcher.stop(timeout=5)

    def clean_workers(self) -> None:
        """``runPolicy.cleanPodPolicy`` on the Workers (``cleanUpWorkerPods``): All removes
        every Worker, Running the running ones, None keeps them."""
        policy = self.plan.policy.clean_pod_policy
        if policy not in ("All", "Running"):
            return
        for c in self.jc.workers():
            if policy == "All" or state(c)[0] in ("running", "created"):
                c.remove(force=True)
