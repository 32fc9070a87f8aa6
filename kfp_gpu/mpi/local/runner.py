"""Run an MPIJob locally: Launcher and Workers as Docker containers, as mpi-operator would.

Takes the exact ``kubeflow.org/v2beta1`` MPIJob object :func:`kfp_gpu.mpi.spec.mpijob.build` emits,
plans it (:func:`kfp_gpu.mpi.local.plan.plan`, pure) and does what the MPI Operator's
controller does (kubeflow/mpi-operator v0.8.2, commit caa3c47,
``pkg/controller/mpi_job_controller.go``), with the Docker SDK. A ``trainer.kubeflow.org/
v1alpha1`` TrainJob (:func:`kfp_gpu.mpi.spec.trainjob.build`) runs the same way from its own
plan (:func:`kfp_gpu.mpi.local.plan_trainjob.plan`: the ``node`` pods as Workers, the
``launcher`` pod as Launcher, Trainer's hostfile and ssh Secret, TrainJob conditions from
:class:`kfp_gpu.mpi.local.status.TrainJobStatus`); :func:`plan_job` dispatches on ``kind``.
Steps:

1. a user-defined bridge network ``kfp-gpu-<NS>-<J>``; each container is reachable by the
   names the headless Service gives its pod (``<J>-worker-<i>.<J>.<NS>.svc`` and shorter,
   network aliases instead of the Service);
2. a workspace folder (:mod:`kfp_gpu.mpi.local.workspace`) with the ConfigMap
   (``hostfile``, ``discover_hosts.sh``) and the ssh Secret (``newSSHAuthSecret``: an ECDSA
   P-521 key, ``id_rsa`` as an ``EC PRIVATE KEY`` PEM, ``id_rsa.pub`` = ``authorized_keys``
   in OpenSSH form), files owned by root with group fsGroup as kubelet leaves a Secret
   volume (mode 0644, 0600 for ``/root/.ssh``, group-read added under an fsGroup; a
   non-root caller keeps them its own: see the workspace module), mounted read-only;
3. the Workers (``getOrCreateWorker``), then -- with ``WaitForWorkersReady`` once every
   Worker runs and listens on a TCP port (its sshd), with ``AtStartup`` at once -- the
   Launcher (``newLauncherJob``); ``discover_hosts.sh`` lists the running Workers;
4. status conditions as the controller writes them (:mod:`kfp_gpu.mpi.local.status`); the
   Launcher is restarted after a non-zero exit until the batch/v1 Job controller's backoff
   rule for its restartPolicy fails it (``OnFailure``, the default: at the
   ``backoffLimit``-th failed run; ``Never``: at the ``backoffLimit + 1``-th; see
   :mod:`kfp_gpu.mpi.local.reconcile`), then ``Failed`` with mpi-operator's
   ``BackoffLimitExceeded`` text; ``activeDeadlineSeconds`` runs from the Launcher's
   creation (it is the Launcher Job's); a Worker that exits first fails the job with
   ``WorkerFailed/<reason>`` (runner-only, see the docs);
5. ``cleanPodPolicy`` on Workers when the job finishes (``cleanUpWorkerPods``,
   ``deleteWorkerPods``), and :meth:`LocalMPIJobRunner.delete` removes containers, network
   and workspace (what deleting the MPIJob does through ownerReferences).

Volumes: ``persistentVolumeClaim`` -> the folder ``pvc_dirs[claimName]`` (bind mount),
``hostPath`` -> the same host path, ``emptyDir`` -> a fresh 0777 folder in the workspace,
Memory ``emptyDir`` at ``/dev/shm`` -> ``shm_size`` = its ``sizeLimit``. No GPUs, RDMA,
scheduler or resource limits (docs/local-mpijob.md).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Self

from kfp_gpu.mpi.local import plan as lp
from kfp_gpu.mpi.local import plan_trainjob as lpt
from kfp_gpu.mpi.local import status as ls
from kfp_gpu.mpi.local import workspace as lw
from kfp_gpu.mpi.local.containers import (  # noqa: F401 - re-exported
    JOB_LABEL,
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    JobContainers,
    listening,
    log_tail,
)
from kfp_gpu.mpi.local.reconcile import Reconciler
from kfp_gpu.mpi.local.workspace import ssh_key_pair  # noqa: F401 - re-exported

log = logging.getLogger(__name__)


def plan_job(job: Mapping, runtime: Mapping | None = None) -> lp.LocalPlan:
    """The plan for ``job`` by its ``kind``: an MPIJob (:func:`kfp_gpu.mpi.local.plan.plan`)
    or a TrainJob with the ``runtime`` its ``runtimeRef`` names
    (:func:`kfp_gpu.mpi.local.plan_trainjob.plan`).

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


class LocalMPIJobRunner:
    """One MPIJob (or TrainJob) executed as containers; a context manager that deletes it
    on exit. Its life: plan (``__init__``), :meth:`start`, :meth:`wait` (one
    :class:`~kfp_gpu.mpi.local.reconcile.Reconciler` step per look), collect (:meth:`logs`,
    ``status``), clean up (:meth:`delete`).

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
        pvc = {k: str(Path(v).resolve()) for k, v in (pvc_dirs or {}).items()}
        self.jc = JobContainers(self.plan, client or docker.from_env(), pvc, image)
        self.client, self.key = self.jc.client, self.jc.key
        self.ready_timeout_s, self.poll_s, self.on_status = ready_timeout_s, poll_s, on_status
        self.status = ls.for_plan(self.plan)
        self._reconciler: Reconciler | None = None
        self._last: dict = {}
        for note in self.plan.notes:
            log.info("local runner: %s", note)
        self.jc.check_volumes()

    @property
    def workspace(self) -> Path | None:
        """The folder with the ConfigMap and ssh Secret files (None before start/after delete)."""
        return self.jc.workspace

    @property
    def launcher_failures(self) -> int:
        """Launcher runs that ended non-zero so far (container exits, not the Launcher
        Job's ``status.failed``: see :mod:`kfp_gpu.mpi.local.reconcile`)."""
        return self._reconciler.launcher_failures if self._reconciler else 0

    def containers(self, role: str = "") -> list:
        """This job's containers (all, or one role), stopped ones included."""
        return self.jc.list(role)

    # ---------------------------------------------------------------- start
    def start(self) -> None:
        """Create network, workspace and Worker containers; set Created.

        Raises:
            RuntimeError: containers or the network of this job exist already (an earlier
                run not deleted: ``kfp-gpu mpijob run-local --replace``, or :meth:`delete`).
            docker.errors.ImageNotFound: the image is not in the engine.
        """
        if self.jc.list() or self.jc.networks():
            raise RuntimeError(f"containers or network of {self.plan.kind} {self.key} exist "
                               "already; delete them first (LocalMPIJobRunner.delete, or "
                               "--replace)")
        for image in {self.jc.image or s.image for s in (*self.plan.workers,
                                                           self.plan.launcher)}:
            self.client.images.get(image)
        self.jc.workspace = lw.write_workspace(self.plan)
        self.jc.create_network()
        self.status.created()
        self._publish()
        for spec in self.plan.workers:
            self.jc.run(spec)
        self._reconciler = Reconciler(self.jc, self.status, self.ready_timeout_s)
        log.info("%s %s: %d Workers started", self.plan.kind, self.key, len(self.plan.workers))

    # ---------------------------------------------------------------- wait
    def wait(self) -> dict:
        """Follow the job to Succeeded or Failed, apply cleanPodPolicy; return ``status``."""
        rec = self._reconciler
        if rec is None:
            raise RuntimeError("wait() before start()")
        while not self.status.finished():
            rec.step()
            self._publish()
            if not self.status.finished():
                time.sleep(self.poll_s)
        rec.stop_launcher()
        rec.clean_workers()
        rec.update_replicas(self.jc.workers(), finished=True)
        self._publish()
        return self.status.to_dict()

    def _publish(self) -> None:
        now = self.status.to_dict()
        if now != self._last:
            self._last = now
            if self.on_status is not None:
                self.on_status(now)

    def run(self) -> dict:
        """:meth:`start` then :meth:`wait`; returns the final ``status``."""
        self.start()
        return self.wait()

    # ---------------------------------------------------------------- collect
    def logs(self, role: str = "launcher") -> str:
        """Output of this job's container(s) of ``role`` (``launcher`` or ``worker``)."""
        return "".join(c.logs().decode(errors="replace") for c in self.jc.list(role))

    # ---------------------------------------------------------------- clean up
    def delete(self) -> None:
        """Remove this job's containers, network and workspace (idempotent): what deleting
        the job does through ownerReferences."""
        self.jc.remove_all()
        if self.jc.workspace is not None:
            shutil.rmtree(self.jc.workspace, ignore_errors=True)
            self.jc.workspace = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.delete()
