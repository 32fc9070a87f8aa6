"""One look at a job's containers, decided as the operator's controller would.

:class:`Reconciler` is what :meth:`kfp_gpu.mpi.local.runner.LocalMPIJobRunner.wait` calls in a
loop: it reads the containers (:class:`~kfp_gpu.mpi.local.containers.JobContainers`), creates
the Launcher when due, restarts or fails it, and writes the job's status
(:mod:`kfp_gpu.mpi.local.status`). Upstream: kubeflow/mpi-operator v0.8.2
``pkg/controller/mpi_job_controller.go`` (``syncHandler``: Workers first, the Launcher once
they are ready under ``WaitForWorkersReady``, ``updateMPIJobStatus``), the Launcher being a
batch/v1 Job (kubernetes/kubernetes ``pkg/controller/job/job_controller.go`` for its restarts).
"""

from __future__ import annotations

import logging
import time

from kfp_gpu.mpi.local import status as ls
from kfp_gpu.mpi.local import workspace as lw
from kfp_gpu.mpi.local.containers import JobContainers, log_tail, state

log = logging.getLogger(__name__)


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
        self.t0 = time.monotonic()

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
        """An exited Launcher: Succeeded, a restart, or Failed past ``backoffLimit``."""
        _, code, oom = state(self.launcher)
        if code == 0 and not oom:
            self.status.succeeded()
            return
        self.launcher_failures += 1
        reason = ls.container_reason(code, oom)
        if self.launcher_failures > self.plan.policy.backoff_limit:
            self.status.launcher_failed(self.launcher.name, code, reason,
                                        log_tail(self.launcher))
            return
        log.info("%s %s: launcher exited %d, restart %d of %d", self.plan.kind, self.jc.key,
                 code, self.launcher_failures, self.plan.policy.backoff_limit)
        self.launcher.start()

    def _deadline_passed(self) -> bool:
        limit = self.plan.policy.active_deadline_seconds
        if limit is not None and time.monotonic() - self.t0 > limit:
            self.status.deadline_exceeded()
            return True
        return False

    def update_replicas(self, workers: list) -> None:
        """``status.replicaStatuses`` from the containers' states."""
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
                                 failed=self.launcher_failures, total=1)

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
