"""Run an MPIJob locally: Launcher and Workers as Docker containers, as mpi-operator would.

Takes the exact ``kubeflow.org/v2beta1`` MPIJob object :func:`kfp_gpu.mpijob.build` emits,
plans it (:func:`kfp_gpu.mpi.local_plan.plan`, pure) and does what the MPI Operator's
controller does (kubeflow/mpi-operator v0.8.2, commit caa3c47,
``pkg/controller/mpi_job_controller.go``), with the Docker SDK. A ``trainer.kubeflow.org/
v1alpha1`` TrainJob (:func:`kfp_gpu.mpi.trainjob.build`) runs the same way from its own
plan (:func:`kfp_gpu.mpi.local_plan_trainjob.plan`: the ``node`` pods as Workers, the
``launcher`` pod as Launcher, Trainer's hostfile and ssh Secret, TrainJob conditions from
:class:`kfp_gpu.mpi.local_status.TrainJobStatus`); :func:`plan_job` dispatches on ``kind``.
Steps:

1. a user-defined bridge network ``kfp-gpu-<NS>-<J>``; each container is reachable by the
   names the headless Service gives its pod (``<J>-worker-<i>.<J>.<NS>.svc`` and shorter,
   network aliases instead of the Service);
2. a workspace folder (:mod:`kfp_gpu.mpi.local_workspace`) with the ConfigMap
   (``hostfile``, ``discover_hosts.sh``) and the ssh Secret (``newSSHAuthSecret``: an ECDSA
   P-521 key, ``id_rsa`` as an ``EC PRIVATE KEY`` PEM, ``id_rsa.pub`` = ``authorized_keys``
   in OpenSSH form), files owned by the caller (root here, as kubelet's), mode 0644 (0600
   for ``/root/.ssh``; TrainJob: 0640/0644, group fsGroup), mounted read-only;
3. the Workers (``getOrCreateWorker``), then -- with ``WaitForWorkersReady`` once every
   Worker runs and listens on a TCP port (its sshd), with ``AtStartup`` at once -- the
   Launcher (``newLauncherJob``); ``discover_hosts.sh`` lists the running Workers;
4. status conditions as the controller writes them (:mod:`kfp_gpu.mpi.local_status`); the
   Launcher is restarted after a non-zero exit until ``runPolicy.backoffLimit`` failures
   (batch/v1 Job semantics), then ``Failed``/``BackoffLimitExceeded``; a Worker that exits
   first fails the job with ``WorkerFailed/<reason>`` (runner-only, see the docs);
5. ``cleanPodPolicy`` on Workers when the job finishes (``cleanUpWorkerPods``,
   ``deleteWorkerPods``), and :meth:`LocalMPIJobRunner.delete` removes containers, network
   and workspace (what deleting the MPIJob does through ownerReferences).

Volumes: ``persistentVolumeClaim`` -> the folder ``pvc_dirs[claimName]`` (bind mount),
``hostPath`` -> the same host path, ``emptyDir`` -> a fresh 0777 folder in the workspace,
Memory ``emptyDir`` at ``/dev/shm`` -> ``shm_size`` = its ``sizeLimit``. No GPUs, RDMA,
scheduler or resource limits (docs/local-mpijob.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Self

from kfp_gpu.mpi import local_plan as lp
from kfp_gpu.mpi import local_plan_trainjob as lpt
from kfp_gpu.mpi import local_status as ls
from kfp_gpu.mpi import local_workspace as lw
from kfp_gpu.mpi.local_workspace import ssh_key_pair  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

#: Label on every container and network the runner creates: ``<namespace>.<name>``.
JOB_LABEL = "kfp-gpu.local-mpijob"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"  # pkg/apis/kubeflow/v2beta1/constants.go
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


def log_tail(container, lines: int = 5) -> str:
    """The last ``lines`` lines of a container's output (CR removed), for messages."""
    text = container.logs(tail=lines).decode(errors="replace").replace("\r", "")
    return text.strip()


def plan_job(job: Mapping, runtime: Mapping | None = None) -> lp.LocalPlan:
    """The plan for ``job`` by its ``kind``: an MPIJob (:func:`kfp_gpu.mpi.local_plan.plan`)
    or a TrainJob with the ``runtime`` its ``runtimeRef`` names
    (:func:`kfp_gpu.mpi.local_plan_trainjob.plan`).

    Raises:
        ValueError: another kind, a TrainJob without ``runtime``, or the planner's errors.
    """
    kind = job.get("kind")
    if kind == "MPIJob":
        return lp.plan(job)
    if kind == "TrainJob":
        if runtime is None:
            raise ValueError("a TrainJob needs its ClusterTrainingRuntime/TrainingRuntime "
                             "object (runtime=...; CLI: --runtime FILE)")
        return lpt.plan(job, runtime)
    raise ValueError(f"cannot run kind {kind!r} locally; accepted: MPIJob "
                     "(kubeflow.org/v2beta1), TrainJob (trainer.kubeflow.org/v1alpha1)")


def listening(proc_net_tcp: str) -> bool:
    """True if a ``/proc/net/tcp[6]`` listing has a socket in state LISTEN (``0A``)."""
    rows = [ln.split() for ln in proc_net_tcp.splitlines()[1:]]
    return any(len(r) > 3 and r[3] == "0A" for r in rows)


class LocalMPIJobRunner:
    """One MPIJob (or TrainJob) executed as containers; a context manager that deletes it
    on exit.

    Args:
        job: the MPIJob or TrainJob object (``dict``).
        runtime: for a TrainJob, the (Cluster)TrainingRuntime object its ``runtimeRef``
            names (e.g. ``manifests/trainer/horovod-runtime.yaml``); unused for an MPIJob.
        client: a ``docker.DockerClient`` (default ``docker.from_env()``: ``DOCKER_HOST``).
        pvc_dirs: claim name -> local folder for each ``persistentVolumeClaim`` volume.
        image: if set, replaces every pod template's image (e.g. a locally built tag).
        ready_timeout_s: seconds the Workers get to run and listen (then ``Failed``,
            ``WorkersNotReady``).
        on_status: called with the ``status`` dict each time it changes.
        poll_s: seconds between looks at the containers.

    Raises:
        ValueError: from :func:`plan_job`, or a PVC without a folder.
    """

    def __init__(self, job: Mapping, client=None, *, runtime: Mapping | None = None,
                 pvc_dirs: Mapping[str, str] | None = None, image: str | None = None,
                 ready_timeout_s: float = 120.0,
                 on_status: Callable[[dict], None] | None = None, poll_s: float = 0.5):
        import docker

        self.plan = plan_job(job, runtime)
        self.client = client or docker.from_env()
        self.pvc_dirs = {k: str(Path(v).resolve()) for k, v in (pvc_dirs or {}).items()}
        self.image, self.ready_timeout_s, self.poll_s = image, ready_timeout_s, poll_s
        self.on_status = on_status
        self.status = ls.for_plan(self.plan)
        self.key = f"{self.plan.namespace}.{self.plan.name}"
        self.workspace: Path | None = None
        self.launcher_failures = 0
        self._last: dict = {}
        for note in self.plan.notes:
            log.info("local runner: %s", note)
        self._check_volumes()

    # ------------------------------------------------------------------ setup
    def _check_volumes(self) -> None:
        for spec in (*self.plan.workers, self.plan.launcher):
            for m in spec.mounts:
                if m.kind == "pvc" and m.source not in self.pvc_dirs:
                    raise ValueError(f"{spec.name}: PVC {m.source!r} has no local folder; "
                                     f"pass pvc_dirs={{{m.source!r}: '/some/dir'}} (CLI: "
                                     f"--pvc {m.source}=DIR)")
                if m.kind in ("pvc", "hostPath") and not Path(self._source(m)).exists():
                    raise ValueError(f"{spec.name}: {m.kind} folder {self._source(m)} for "
                                     f"{m.target} does not exist")

    def _source(self, m: lp.Mount) -> str:
        base = {"pvc": lambda: self.pvc_dirs[m.source], "hostPath": lambda: m.source,
                "emptyDir": lambda: str(self.workspace / "emptydir" / m.source),
                "ssh": lambda: str(self.workspace / "ssh"),
                "config": lambda: str(self.workspace / "config")}[m.kind]()
        return os.path.join(base, m.sub_path) if m.sub_path else base

    def _write_discover_hosts(self, running: list[str]) -> None:
        lw.write_discover_hosts(self.workspace, self.plan, running)

    def _labels(self, role: str = "") -> dict[str, str]:
        out = {JOB_LABEL: self.key, JOB_NAME_LABEL: self.plan.name}
        return {**out, JOB_ROLE_LABEL: role} if role else out

    def containers(self, role: str = "") -> list:
        """This job's containers (all, or one role), stopped ones included."""
        labels = [f"{JOB_LABEL}={self.key}"] + ([f"{JOB_ROLE_LABEL}={role}"] if role else [])
        return self.client.containers.list(all=True, filters={"label": labels})

    def _networks(self) -> list:
        return self.client.networks.list(filters={"label": f"{JOB_LABEL}={self.key}"})

    def _run(self, spec: lp.ContainerSpec):
        from docker.types import Mount

        mounts = [Mount(m.target, self._source(m), type="bind", read_only=m.read_only)
                  for m in spec.mounts if m.kind != "tmpfs"]
        tmpfs = {m.target: f"size={m.source}" + (",ro" if m.read_only else "")
                 for m in spec.mounts if m.kind == "tmpfs"}
        net = self.plan.network
        return self.client.containers.run(
            self.image or spec.image, entrypoint=list(spec.entrypoint or []) or None,
            command=list(spec.command) if spec.command else None, name=spec.name,
            hostname=spec.name, environment=dict(spec.environment), user=spec.security.user,
            group_add=list(spec.security.group_add) or None,
            cap_add=list(spec.security.cap_add) or None, shm_size=spec.shm_size,
            mounts=mounts, tmpfs=tmpfs or None, working_dir=spec.working_dir,
            dns_search=list(spec.dns_search), labels=self._labels(spec.role), detach=True,
            network=net, networking_config={
                net: self.client.api.create_endpoint_config(aliases=list(spec.aliases))})

    def start(self) -> None:
        """Create network, workspace and Worker containers; set Created.

        Raises:
            RuntimeError: containers or the network of this job exist already (an earlier
                run not deleted: ``kfp-gpu mpijob run-local --replace``, or :meth:`delete`).
            docker.errors.ImageNotFound: the image is not in the engine.
        """
        if self.containers() or self._networks():
            raise RuntimeError(f"containers or network of {self.plan.kind} {self.key} exist "
                               "already; delete them first (LocalMPIJobRunner.delete, or "
                               "--replace)")
        for image in {self.image or s.image for s in (*self.plan.workers, self.plan.launcher)}:
            self.client.images.get(image)
        self.workspace = lw.write_workspace(self.plan)
        self.client.networks.create(self.plan.network, driver="bridge", labels=self._labels())
        self.status.created()
        self._publish()
        for spec in self.plan.workers:
            self._run(spec)
        log.info("%s %s: %d Workers started", self.plan.kind, self.key, len(self.plan.workers))

    # ------------------------------------------------------------------ watching
    def _publish(self) -> None:
        now = self.status.to_dict()
        if now != self._last:
            self._last = now
            if self.on_status is not None:
                self.on_status(now)

    @staticmethod
    def _state(c) -> tuple[str, int, bool]:
        s = c.attrs.get("State") or {}
        return s.get("Status", ""), int(s.get("ExitCode") or 0), bool(s.get("OOMKilled"))

    def _workers(self) -> list:
        found = {c.name: c for c in self.containers("worker")}
        for c in found.values():
            c.reload()
        return [found[s.name] for s in self.plan.workers if s.name in found]

    def _worker_failure(self, workers: list, launcher_started: bool) -> str | None:
        """Message for the first Worker that exited non-zero (or at all before the
        Launcher started: it can never become ready), else None; sets the Failed reason."""
        for c in workers:
            state, code, oom = self._state(c)
            if state in ("exited", "dead") and (code != 0 or oom or not launcher_started):
                self.status.worker_failed(c.name, code, ls.container_reason(code, oom),
                                          log_tail(c))
                return c.name
        return None

    def _ready(self, workers: list) -> bool:
        if len(workers) != len(self.plan.workers):
            return False
        for c in workers:
            if self._state(c)[0] != "running":
                return False
            res = c.exec_run(["cat", "/proc/net/tcp", "/proc/net/tcp6"])
            if not listening(res.output.decode(errors="replace")):
                return False
        return True

    def _update_replicas(self, workers: list, launcher) -> None:
        counts = {"running": 0, "ok": 0, "bad": 0}
        for c in workers:
            state, code, oom = self._state(c)
            key = "running" if state == "running" else (
                "ok" if state == "exited" and code == 0 and not oom else "bad")
            counts[key] += 1 if state in ("running", "exited", "dead") else 0
        self.status.replicas("Worker", counts["running"], counts["ok"], counts["bad"],
                             total=len(self.plan.workers))
        if launcher is not None:
            state, code, _ = self._state(launcher)
            self.status.replicas("Launcher", active=int(state == "running"),
                                 succeeded=int(state == "exited" and code == 0),
                                 failed=self.launcher_failures, total=1)

    def _launcher_exit(self, launcher) -> bool:
        """Handle an exited Launcher: Succeeded, a restart, or Failed; True if finished."""
        _, code, oom = self._state(launcher)
        if code == 0 and not oom:
            self.status.succeeded()
            return True
        self.launcher_failures += 1
        reason = ls.container_reason(code, oom)
        policy = self.plan.policy
        if self.launcher_failures > policy.backoff_limit:
            self.status.launcher_failed(launcher.name, code, reason, log_tail(launcher))
            return True
        log.info("%s %s: launcher exited %d, restart %d of %d", self.plan.kind, self.key, code,
                 self.launcher_failures, policy.backoff_limit)
        launcher.start()
        return False

    def _deadline_passed(self, t0: float) -> bool:
        limit = self.plan.policy.active_deadline_seconds
        if limit is not None and time.monotonic() - t0 > limit:
            self.status.deadline_exceeded()
            return True
        return False

    def _step(self, t0: float, launcher):
        """One look at the containers; returns the Launcher (created when due)."""
        workers = self._workers()
        if self._worker_failure(workers, launcher is not None) or self._deadline_passed(t0):
            return launcher
        if launcher is None:
            at_startup = self.plan.policy.launcher_creation_policy == "AtStartup"
            if at_startup or self._ready(workers):
                self._write_discover_hosts([c.name for c in workers
                                            if self._state(c)[0] == "running"])
                launcher = self._run(self.plan.launcher)
            elif time.monotonic() - t0 > self.ready_timeout_s:
                self.status.workers_not_ready(self.ready_timeout_s)
                return launcher
        if launcher is not None:
            launcher.reload()
            state = self._state(launcher)[0]
            if state in ("exited", "dead"):
                self._launcher_exit(launcher)
            elif state == "running" and all(self._state(c)[0] == "running" for c in workers):
                self.status.running()
        self._update_replicas(workers, launcher)
        return launcher

    def wait(self) -> dict:
        """Follow the job to Succeeded or Failed, apply cleanPodPolicy; return ``status``."""
        t0, launcher = time.monotonic(), None
        while not self.status.finished():
            launcher = self._step(t0, launcher)
            self._publish()
            if not self.status.finished():
                time.sleep(self.poll_s)
        if launcher is not None and self._state(launcher)[0] == "running":
            launcher.stop(timeout=5)
        self._clean_workers()
        self._update_replicas(self._workers(), launcher)
        self._publish()
        return self.status.to_dict()

    def _clean_workers(self) -> None:
        """cleanPodPolicy All: remove every Worker; Running: the running ones; None: keep."""
        policy = self.plan.policy.clean_pod_policy
        if policy not in ("All", "Running"):
            return
        for c in self._workers():
            if policy == "All" or self._state(c)[0] in ("running", "created"):
                c.remove(force=True)

    def run(self) -> dict:
        """:meth:`start` then :meth:`wait`; returns the final ``status``."""
        self.start()
        return self.wait()

    def logs(self, role: str = "launcher") -> str:
        """Output of this job's container(s) of ``role`` (``launcher`` or ``worker``)."""
        return "".join(c.logs().decode(errors="replace") for c in self.containers(role))

    def delete(self) -> None:
        """Remove this job's containers, network and workspace (idempotent)."""
        import docker

        for c in self.containers():
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
        for net in self._networks():
            with contextlib.suppress(docker.errors.NotFound):
                net.remove()
        if self.workspace is not None:
            shutil.rmtree(self.workspace, ignore_errors=True)
            self.workspace = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.delete()
