"""The container specs a local plan is made of (pure data, no I/O).

Both planners fill them: :func:`kfp_gpu.mpi.local.plan.plan` (an MPIJob, kubeflow/mpi-operator
v0.8.2) and :func:`kfp_gpu.mpi.local.plan_trainjob.plan` (a TrainJob on an MPI
ClusterTrainingRuntime, kubeflow/trainer v2.3.0); :mod:`kfp_gpu.mpi.local.runner` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mount:
    """One mount of a container; ``source`` is symbolic, resolved by the runner.

    Attributes:
        kind: ``config`` (the job's ConfigMap folder), ``ssh`` (the ssh Secret folder),
            ``pvc`` (source = claim name), ``hostPath`` (source = host path), ``emptyDir``
            (source = ``<pod>/<volume>``, a fresh 0777 folder), ``tmpfs`` (Memory emptyDir).
        source: see ``kind``.
        target: absolute path in the container.
        read_only: mount read-only.
        sub_path: ``volumeMounts[].subPath`` (relative; empty = the volume's root).
    """

    kind: str
    source: str
    target: str
    read_only: bool = False
    sub_path: str = ""


@dataclass(frozen=True)
class Security:
    """What a pod/container ``securityContext`` gives the process: ``user`` (``uid[:gid]``
    for Docker, None = the image's user), ``group_add`` (``fsGroup`` as a supplementary
    group) and ``cap_add`` (``capabilities.add``)."""

    user: str | None = None
    group_add: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resources:
    """What the local runner applies of a pod's resources: ``shm_size`` in bytes (the
    Memory ``emptyDir`` at /dev/shm's ``sizeLimit``; None = Docker's default) and
    ``cpu_shares``, the CFS weight the kubelet gives the container from its CPU request
    (:func:`kfp_gpu.mpi.local.plan.cpu_shares`)."""

    shm_size: int | None = None
    cpu_shares: int = 2


@dataclass(frozen=True)
class ContainerSpec:
    """One pod of the job as a container (Docker SDK ``containers.run`` arguments).

    ``entrypoint`` is the Kubernetes ``command`` (None = the image's ENTRYPOINT) and
    ``command`` its ``args`` (None = the image's CMD), the usual Kubernetes/Docker mapping.
    ``resources``: /dev/shm size and CPU weight; ``aliases`` are the DNS names on the job
    network, ``dns_search`` the pod's search path.
    """

    name: str
    role: str
    image: str
    entrypoint: tuple[str, ...] | None
    command: tuple[str, ...] | None
    environment: dict[str, str]
    working_dir: str | None = None
    security: Security = Security()
    resources: Resources = Resources()
    mounts: tuple[Mount, ...] = ()
    aliases: tuple[str, ...] = ()
    dns_search: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunPolicy:
    """``spec.runPolicy`` and ``spec.launcherCreationPolicy`` with upstream defaults
    (``cleanPodPolicy`` None, batch/v1 Job ``backoffLimit`` 6 when unset).

    Attributes:
        launcher_restart_policy: the Launcher replica's ``restartPolicy`` as the job gives it
            (mpi-operator default ``OnFailure``, kubeflow/mpi-operator v0.8.2
            ``pkg/apis/kubeflow/v2beta1/constants.go`` l. 20-23); see
            :attr:`launcher_pod_restart_policy` for what its pods get.
        deadline_from: when the ``activeDeadlineSeconds`` clock starts: ``launcher`` (an
            MPIJob: the deadline is the Launcher Job's own, ``newLauncherJob`` l. 1568 of
            mpi-operator v0.8.2 ``pkg/controller/mpi_job_controller.go``, so it runs from the
            Job's ``status.startTime``, set when the Job controller first syncs the created
            Job: kubernetes/kubernetes ``pkg/controller/job/job_controller.go`` syncJob,
            ``pastActiveDeadline``) or ``job`` (a TrainJob: from the TrainJob's
            creationTimestamp, kubeflow/trainer v2.3.0 ``pkg/controller/
            trainjob_controller.go`` reconcileDeadline l. 155-167).
    """

    clean_pod_policy: str = "None"
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None
    launcher_creation_policy: str = "AtStartup"
    launcher_restart_policy: str = "OnFailure"
    deadline_from: str = "launcher"

    @property
    def launcher_pod_restart_policy(self) -> str:
        """The Launcher pod template's ``restartPolicy`` in its batch/v1 Job: the replica's,
        except ``ExitCode`` -> ``Never`` (kubeflow/mpi-operator v0.8.2
        ``pkg/controller/mpi_job_controller.go`` ``setRestartPolicy`` l. 1722-1728)."""
        return "Never" if self.launcher_restart_policy == "ExitCode" else (
            self.launcher_restart_policy)


#: The ssh Secret's files, as both controllers project them.
SSH_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")


@dataclass(frozen=True)
class SshSecret:
    """The ssh Secret as the pods see it.

    Attributes:
        mount_path: ``sshAuthMountPath``.
        key_mode: the mode of each of :data:`SSH_FILES` unless ``modes`` names them.
        modes: (file name, mode) pairs, one per file (e.g. Trainer's 0640/0644/0644).
        gid: group of the files (a pod's ``fsGroup``, as kubelet applies it to Secret
            volumes); None = root's, as kubelet leaves them without ``fsGroup``
            (:func:`kfp_gpu.mpi.local.workspace.secret_file_stats`).
    """

    mount_path: str
    key_mode: int = 0o644
    modes: tuple[tuple[str, int], ...] = ()
    gid: int | None = None

    def file_modes(self) -> dict[str, int]:
        """File name -> mode for the three files."""
        return dict(self.modes) or {n: self.key_mode for n in SSH_FILES}


@dataclass(frozen=True)
class Controller:
    """What differs between the controllers emulated.

    Attributes:
        kind: ``MPIJob`` (mpi-operator) or ``TrainJob`` (Trainer + JobSet).
        discover_hosts: the ConfigMap also holds ``discover_hosts.sh`` (mpi-operator; the
            Trainer's holds the hostfile only).
        failure_reason: the TrainJob ``Failed`` reason a failed pod gives (JobSet's
            ``FailedJobs`` or ``ReachedMaxRestarts``); empty for an MPIJob.
    """

    kind: str = "MPIJob"
    discover_hosts: bool = True
    failure_reason: str = ""


@dataclass(frozen=True)
class LocalPlan:
    """Everything the runner starts for one job (an MPIJob, or a TrainJob with its runtime):
    ``workers`` are the MPIJob Workers or the TrainJob's ``node`` pods, ``launcher`` the
    Launcher or the ``launcher`` pod."""

    name: str
    namespace: str
    network: str
    hostfile: str
    workers: tuple[ContainerSpec, ...]
    launcher: ContainerSpec
    policy: RunPolicy
    ssh: SshSecret
    launcher_as_worker: bool = False
    mpi_implementation: str = "OpenMPI"
    notes: tuple[str, ...] = field(default_factory=tuple)
    controller: Controller = Controller()

    @property
    def kind(self) -> str:
        """``MPIJob`` or ``TrainJob``."""
        return self.controller.kind

    @property
    def ssh_mount_path(self) -> str:
        """``sshAuthMountPath``."""
        return self.ssh.mount_path

    @property
    def ssh_key_mode(self) -> int:
        """Mode of the ssh files (when all three share one)."""
        return self.ssh.key_mode
