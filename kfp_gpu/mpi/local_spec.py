"""The container specs a local plan is made of (pure data, no I/O).

Both planners fill them: :func:`kfp_gpu.mpi.local_plan.plan` (an MPIJob, kubeflow/mpi-operator
v0.8.2) and :func:`kfp_gpu.mpi.local_plan_trainjob.plan` (a TrainJob on an MPI
ClusterTrainingRuntime, kubeflow/trainer v2.3.0); :mod:`kfp_gpu.mpi.local_runner` runs them.
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
class ContainerSpec:
    """One pod of the job as a container (Docker SDK ``containers.run`` arguments).

    ``entrypoint`` is the Kubernetes ``command`` (None = the image's ENTRYPOINT) and
    ``command`` its ``args`` (None = the image's CMD), the usual Kubernetes/Docker mapping.
    ``shm_size`` is in bytes (None = Docker's default), ``aliases`` are the DNS names on the
    job network, ``dns_search`` the pod's search path.
    """

    name: str
    role: str
    image: str
    entrypoint: tuple[str, ...] | None
    command: tuple[str, ...] | None
    environment: dict[str, str]
    working_dir: str | None = None
    security: Security = Security()
    shm_size: int | None = None
    mounts: tuple[Mount, ...] = ()
    aliases: tuple[str, ...] = ()
    dns_search: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunPolicy:
    """``spec.runPolicy`` and ``spec.launcherCreationPolicy`` with upstream defaults
    (``cleanPodPolicy`` None, batch/v1 Job ``backoffLimit`` 6 when unset)."""

    clean_pod_policy: str = "None"
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None
    launcher_creation_policy: str = "AtStartup"
    launcher_restart_policy: str = "OnFailure"


@dataclass(frozen=True)
class LocalPlan:
    """Everything the runner starts for one job (an MPIJob, or a TrainJob with its runtime).

    ``workers`` are the MPIJob Workers or the TrainJob's ``node`` pods, ``launcher`` the
    Launcher or the ``launcher`` pod. ``ssh_key_mode`` applies to the three ssh files unless
    ``ssh_modes`` names a mode per file; ``ssh_gid`` is the group they get (a pod's
    ``fsGroup``, as kubelet sets it on Secret volumes; None = the caller's).
    ``discover_hosts``: the ConfigMap also holds ``discover_hosts.sh`` (mpi-operator; the
    Trainer's has the hostfile only). ``failure_reason``: the TrainJob ``Failed`` reason a
    failed pod gives (JobSet's ``FailedJobs`` or ``ReachedMaxRestarts``; empty for MPIJobs).
    """

    name: str
    namespace: str
    network: str
    hostfile: str
    workers: tuple[ContainerSpec, ...]
    launcher: ContainerSpec
    policy: RunPolicy
    ssh_key_mode: int
    ssh_mount_path: str
    launcher_as_worker: bool = False
    mpi_implementation: str = "OpenMPI"
    notes: tuple[str, ...] = field(default_factory=tuple)
    kind: str = "MPIJob"
    ssh_modes: tuple[tuple[str, int], ...] = ()
    ssh_gid: int | None = None
    discover_hosts: bool = True
    failure_reason: str = ""
