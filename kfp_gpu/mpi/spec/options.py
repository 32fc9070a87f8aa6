"""What an MPIJob (or a TrainJob with an MPI policy) is built from: small option groups.

:class:`MPIJobOptions` holds the job's identity (name, namespace, image, program, rank
environment) and one small frozen dataclass per concern:

=================  ===============================================================
:class:`Replicas`  Worker count, GPU request per Worker, MPI slots, implementation
:class:`SshOptions`  the user the pods run as and the SSH keys/sshd of the Workers
:class:`RunPolicy`  ``spec.runPolicy``: clean-up, TTL, backoff, deadline, and gang
                   scheduling (``schedulingPolicy``: :mod:`kfp_gpu.mpi.spec.scheduling`)
:class:`Network`   RDMA extended resource, Multus networks, NCCL settings
:class:`Resources`  CPU/memory of Workers and Launcher, ``/dev/shm`` size
:class:`Placement`  tolerations, node selector, PVCs, Secrets, service account, scheduler
:class:`JobMetadata`  labels/annotations of the job object and its provenance
=================  ===============================================================

Builders (:mod:`kfp_gpu.mpi.spec.mpijob`) read them; nothing here does I/O. Field names and
accepted values follow github.com/kubeflow/mpi-operator ``pkg/apis/kubeflow/v2beta1/
types.go`` and ``pkg/apis/kubeflow/validation/validation.go``; NCCL names follow the NCCL
user guide ("Environment Variables"); RDMA resource names the Mellanox
k8s-rdma-shared-dev-plugin / NVIDIA Network Operator examples; the Multus annotation
``k8s.v1.cni.cncf.io/networks`` the Multus CNI docs.

Parameters that arrive flat (component inputs, CLI flags) go through
:meth:`MPIJobOptions.from_settings`, which routes each keyword to its group.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kfp_gpu.gpu.request import GpuRequest, parse
from kfp_gpu.mpi.spec.checks import argv, choice, optional_non_negative, positive_int
from kfp_gpu.mpi.spec.names import DNS1123_LABEL, DNS1123_SUBDOMAIN, check_name
from kfp_gpu.mpi.spec.network import Network
from kfp_gpu.mpi.spec.scheduling import SchedulingPolicy
from kfp_gpu.mpi.spec.ssh import SshOptions
from kfp_gpu.mpi.spec.volumes import RESERVED_MOUNT_PATHS, PvcMount, SecretMount, nested

CLEAN_POD_POLICIES = ("Running", "All", "None")  # types.go CleanPodPolicy
LAUNCHER_CREATION_POLICIES = ("AtStartup", "WaitForWorkersReady")  # types.go
MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")  # types.go MPIImplementation
RESTART_POLICIES = ("Never", "OnFailure")  # validation.go validRestartPolicies

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$")


@dataclass(frozen=True)
class Replicas:
    """How many ranks run where.

    Attributes:
        workers: number of Worker pods (>= 1); one per node in the RDMA layout.
        gpu: GPU request per Worker pod: the text form of :func:`kfp_gpu.gpu.parse`
            (``"gpu:8"``, ``"mig:1g.10gb"``, ``"none"``, ...) or a parsed ``GpuRequest``.
        slots_per_worker: MPI ranks per Worker; ``None`` = the devices each pod sees
            (``GpuRequest.gpus_per_pod``: the count for gpu/shared/hami, 1 for MIG and
            fractional kinds; at least 1).
        mpi_implementation: ``OpenMPI``, ``Intel`` or ``MPICH``.
        launcher_creation_policy: ``AtStartup`` or ``WaitForWorkersReady``.
    """

    workers: int = 2
    gpu: GpuRequest | str = "none"
    slots_per_worker: int | None = None
    mpi_implementation: str = "OpenMPI"
    launcher_creation_policy: str = "WaitForWorkersReady"

    def gpu_request(self) -> GpuRequest:
        """The parsed request of :attr:`gpu`.

        Raises:
            ValueError: from :func:`kfp_gpu.gpu.parse` for an invalid text form.
        """
        return parse(self.gpu)

    def slots(self) -> int:
        """MPI slots per Worker: :attr:`slots_per_worker` or devices per pod (min 1)."""
        if self.slots_per_worker is not None:
            return self.slots_per_worker
        return max(1, self.gpu_request().gpus_per_pod)

    def validate(self) -> None:
        """Raises ValueError naming the field and the accepted values."""
        positive_int("workers", self.workers)
        if self.slots_per_worker is not None:
            positive_int("slots_per_worker", self.slots_per_worker)
        choice("launcher_creation_policy", self.launcher_creation_policy,
               LAUNCHER_CREATION_POLICIES)
        choice("mpi_implementation", self.mpi_implementation, MPI_IMPLEMENTATIONS)
        self.gpu_request()


@dataclass(frozen=True)
class RunPolicy:
    """``spec.runPolicy`` (types.go RunPolicy); seconds; ``None``/empty = unset. Five fields
    are its ``schedulingPolicy`` (:meth:`scheduling`).

    ``kueue_queue``: the Kueue LocalQueue the job waits in for quota. The job carries the
    label ``kueue.x-k8s.io/queue-name`` and is created with ``runPolicy.suspend: true``, as
    Kueue's MPIJob webhook would default it (kubernetes-sigs/kueue
    ``pkg/controller/jobs/mpijob/mpijob_webhook.go`` ``Default`` ->
    ``ApplyDefaultForSuspend``); Kueue unsuspends it when it admits the workload
    (``mpijob_controller.go`` ``RunWithPodSetsInfo``). Empty = no Kueue.
    """

    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int | None = 86400
    backoff_limit: int | None = 0
    active_deadline_seconds: int | None = None
    min_available: int | None = None
    queue: str = ""
    min_resources: Mapping[str, str] = field(default_factory=dict)
    priority_class: str = ""
    schedule_timeout_seconds: int | None = None
    kueue_queue: str = ""

    def scheduling(self) -> SchedulingPolicy:
        """The gang-scheduling part (:class:`kfp_gpu.mpi.spec.scheduling.SchedulingPolicy`)."""
        return SchedulingPolicy(self.min_available, self.queue, self.min_resources,
                                self.priority_class, self.schedule_timeout_seconds)

    def validate(self) -> None:
        """Raises ValueError naming the field and the accepted values."""
        choice("clean_pod_policy", self.clean_pod_policy, CLEAN_POD_POLICIES)
        optional_non_negative("ttl_seconds_after_finished", self.ttl_seconds_after_finished)
        optional_non_negative("backoff_limit", self.backoff_limit)
        if self.active_deadline_seconds is not None:
            positive_int("active_deadline_seconds", self.active_deadline_seconds)
        self.scheduling().validate()
        if self.kueue_queue and (not isinstance(self.kueue_queue, str)
                                 or not DNS1123_LABEL.match(self.kueue_queue)):
            raise ValueError(f"invalid kueue_queue {self.kueue_queue!r}: accepted are "
                             "LocalQueue names usable as a label value (DNS-1123 labels, "
                             "at most 63 characters, e.g. 'team-a-gpu')")

    def to_spec(self) -> dict[str, Any]:
        """The ``runPolicy`` dict (unset fields left out; ``schedulingPolicy`` only when
        one of its fields is set)."""
        out: dict[str, Any] = {"cleanPodPolicy": self.clean_pod_policy}
        for key, value in (("ttlSecondsAfterFinished", self.ttl_seconds_after_finished),
                           ("backoffLimit", self.backoff_limit),
                           ("activeDeadlineSeconds", self.active_deadline_seconds)):
            if value is not None:
                out[key] = value
        if self.kueue_queue:
            out["suspend"] = True  # Kueue admits it by setting suspend: false
        scheduling = self.scheduling().to_spec()
        if scheduling:
            out["schedulingPolicy"] = scheduling
        return out


@dataclass(frozen=True)
class Resources:
    """CPU/memory quantities (Kubernetes quantity strings; empty = none).

    Attributes:
        worker_cpu / worker_memory: requests per Worker.
        worker_cpu_limit / worker_memory_limit: their limits; empty = the request.
        launcher_cpu / launcher_memory: requests (= limits) of the Launcher.
        shm_size: ``sizeLimit`` of the Workers' Memory-backed ``/dev/shm`` emptyDir.
    """

    worker_cpu: str = ""
    worker_memory: str = ""
    worker_cpu_limit: str = ""
    worker_memory_limit: str = ""
    launcher_cpu: str = "500m"
    launcher_memory: str = "512Mi"
    shm_size: str = ""

    def validate(self) -> None:
        """Raises ValueError naming the field and the accepted values."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value and not _QUANTITY.match(value):
                raise ValueError(f"invalid {f.name} {value!r}: accepted are Kubernetes "
                                 "quantities such as '4', '500m', '16Gi'")


@dataclass(frozen=True)
class Placement:
    """Where the Workers run and what they mount.

    Attributes:
        tolerations: extra tolerations for Workers (Kubernetes Toleration dicts).
        node_selector: extra node selector for Workers.
        volumes: PVCs mounted into every Worker container (:class:`PvcMount`), e.g. the
            shared ``work_dir`` rank 0 writes the model to. Not mounted on the Launcher,
            which only runs ``mpirun``. Mount paths must be distinct and must not be,
            contain or lie under ``/dev/shm``, ``/etc/mpi`` or the SSH key mount.
        secret_volumes: Secrets mounted read-only into the Launcher AND every Worker
            container at the same path (:class:`SecretMount`), e.g. a GCP service-account
            key that ``GOOGLE_APPLICATION_CREDENTIALS`` (in ``env``, forwarded to the
            ranks) names; TrainJob: every pod of both replicated jobs. Same path rules as
            ``volumes``, and distinct from their paths.
        service_account: service account of the pods (empty = namespace default).
        scheduler_name: ``schedulerName`` of the Worker pods (e.g. ``kai-scheduler``,
            ``hami-scheduler``); empty = the request's own, else the cluster default.
        secret_env: environment from Kubernetes Secrets: EnvVar dicts ``{name, valueFrom:
            {secretKeyRef: {name, key[, optional]}}}`` (core/v1 ``EnvVar`` /
            ``SecretKeySelector``), e.g. the ``AWS_*`` keys an ``s3://`` work_dir needs. Set
            on the Launcher and Worker containers (TrainJob: ``trainer.env``) and forwarded
            to the ranks with ``-x``; the values stay in the Secret, never in the job
            (:func:`check_secret_env`).
    """

    tolerations: Sequence[Mapping[str, Any]] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    volumes: Sequence[PvcMount] = ()
    secret_volumes: Sequence[SecretMount] = ()
    service_account: str = ""
    scheduler_name: str = ""
    secret_env: Sequence[Mapping[str, Any]] = ()

    def validate(self, ssh_auth_mount_path: str) -> None:
        """Raises ValueError naming the field and the accepted values."""
        if self.scheduler_name and not DNS1123_SUBDOMAIN.match(self.scheduler_name):
            raise ValueError(f"invalid scheduler_name {self.scheduler_name!r}: accepted are "
                             "DNS-1123 subdomains such as 'kai-scheduler'")
        self._validate_volumes(ssh_auth_mount_path)
        for t in self.tolerations:
            if not isinstance(t, Mapping) or t.get("operator", "Equal") not in ("Equal", "Exists"):
                raise ValueError(f"invalid toleration {t!r}: accepted are Toleration dicts with "
                                 "operator 'Equal' or 'Exists'")

    def _validate_volumes(self, ssh_auth_mount_path: str) -> None:
        if isinstance(self.volumes, (str, Mapping)) or not all(
                isinstance(v, PvcMount) for v in self.volumes):
            raise ValueError("volumes must be a sequence of kfp_gpu.mpi.spec.volumes.PvcMount("
                             "claim_name, mount_path, read_only, sub_path)")
        if isinstance(self.secret_volumes, (str, Mapping)) or not all(
                isinstance(v, SecretMount) for v in self.secret_volumes):
            raise ValueError("secret_volumes must be a sequence of kfp_gpu.mpi.spec.volumes."
                             "SecretMount(secret_name, mount_path, optional)")
        reserved = (*RESERVED_MOUNT_PATHS, ssh_auth_mount_path)
        seen: list[str] = []
        mounts = [(f"PVC {v.claim_name!r}", v) for v in self.volumes]
        mounts += [(f"Secret {v.secret_name!r}", v) for v in self.secret_volumes]
        for what, v in mounts:
            v.validate()
            for r in reserved:
                if nested(v.mount_path, r):
                    raise ValueError(f"{what} mount_path {v.mount_path!r} clashes "
                                     f"with {r!r} (the /dev/shm emptyDir, the operator's "
                                     "/etc/mpi hostfile or the SSH key mount); accepted: a "
                                     "path outside them, e.g. '/mnt/shared'")
            if v.mount_path in seen:
                raise ValueError(f"duplicate mount_path {v.mount_path!r} ({what}): each "
                                 "PVC or Secret mount needs its own path")
            seen.append(v.mount_path)


@dataclass(frozen=True)
class JobMetadata:
    """Metadata of the job object: extra labels/annotations and the name's provenance
    (``run_id`` / ``task_name``, recorded as annotations)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    run_id: str = ""
    task_name: str = ""


#: Option group attribute of MPIJobOptions -> its class (for from_settings / replace).
GROUPS: dict[str, type] = {"replicas": Replicas, "ssh": SshOptions, "run_policy": RunPolicy,
                           "network": Network, "resources": Resources,
                           "placement": Placement, "metadata": JobMetadata}


@dataclass(frozen=True)
class MPIJobOptions:
    """Everything a job builder needs; validated by :meth:`validate`.

    Attributes:
        name: job name (see :func:`kfp_gpu.mpi.spec.names.job_name`).
        image: container image of Launcher and Workers (the ``horovod`` runtime image,
            ``kfp_gpu.release.images.image("horovod")``).
        program: argv the ranks run, e.g. ``("kfp-gpu", "train-resnet")``; appended to the
            mpirun command.
        namespace: namespace of the job.
        env: extra environment for the ranks (name -> value), forwarded with ``-x``.
        replicas, ssh, run_policy, network, resources, placement, metadata: the option
            groups (see the module docstring).
    """

    name: str
    image: str
    program: Sequence[str]
    namespace: str = "default"
    env: Mapping[str, str] = field(default_factory=dict)
    replicas: Replicas = field(default_factory=Replicas)
    ssh: SshOptions = field(default_factory=SshOptions)
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    network: Network = field(default_factory=Network)
    resources: Resources = field(default_factory=Resources)
    placement: Placement = field(default_factory=Placement)
    metadata: JobMetadata = field(default_factory=JobMetadata)

    @classmethod
    def from_settings(cls, **settings) -> MPIJobOptions:
        """Options from flat keywords: top-level fields, group objects (``ssh=ROOT_SSH``)
        or any group's field by name (``workers=4, rdma=True, shm_size="64Gi"``).

        Raises:
            TypeError: for a keyword no field has.
        """
        return _route(cls, {}, settings)

    def replace(self, **changes) -> MPIJobOptions:
        """A copy with ``changes`` applied; keywords as in :meth:`from_settings`."""
        return _route(type(self), {f.name: getattr(self, f.name)
                                   for f in dataclasses.fields(self)}, changes)

    def gpu_request(self) -> GpuRequest:
        """The Workers' parsed GPU request (:meth:`Replicas.gpu_request`)."""
        return self.replicas.gpu_request()

    def slots(self) -> int:
        """MPI slots per Worker (:meth:`Replicas.slots`)."""
        return self.replicas.slots()

    def validate(self) -> MPIJobOptions:
        """Check every field; return ``self``.

        Raises:
            ValueError: naming the field and the accepted values.
        """
        workers = self.replicas.workers
        check_name(self.name, workers if isinstance(workers, int) else 1)
        if not DNS1123_LABEL.match(self.namespace or "") or len(self.namespace) > 63:
            raise ValueError(f"invalid namespace {self.namespace!r}: accepted are DNS-1123 labels")
        if not self.image:
            raise ValueError("image is required (e.g. kfp_gpu.release.images.image('horovod'))")
        argv("program", self.program, "('kfp-gpu', 'train-resnet')")
        for k, v in self.env.items():
            if not _ENV_NAME.match(k) or not isinstance(v, str):
                raise ValueError(f"invalid env entry {k!r}={v!r}: accepted are C identifiers "
                                 "mapped to strings")
        check_secret_env(self.placement.secret_env, self.env)
        self.replicas.validate()
        self.network.validate()
        self.resources.validate()
        self.run_policy.validate()
        self.ssh.validate()
        self.placement.validate(self.ssh.ssh_auth_mount_path)
        return self


def check_secret_env(secret_env: Sequence[Mapping[str, Any]], env: Mapping[str, str]) -> None:
    """Each entry is ``{name, valueFrom: {secretKeyRef: {name, key[, optional]}}}`` with a
    C-identifier name not also in ``env`` and not given twice.

    Raises:
        ValueError: naming the entry and the accepted form.
    """
    form = ("accepted are EnvVar dicts {'name': 'AWS_ACCESS_KEY_ID', 'valueFrom': "
            "{'secretKeyRef': {'name': 'SECRET', 'key': 'KEY'}}}")
    if isinstance(secret_env, (str, Mapping)) or not all(
            isinstance(e, Mapping) for e in secret_env):
        raise ValueError(f"secret_env must be a sequence of EnvVar dicts; {form}")
    seen: set[str] = set()
    for e in secret_env:
        value_from = e.get("valueFrom")
        ref = value_from.get("secretKeyRef") if isinstance(value_from, Mapping) else None
        ref = ref if isinstance(ref, Mapping) else {}
        name = e.get("name")
        if (not isinstance(name, str) or not _ENV_NAME.match(name) or not ref.get("name")
                or not ref.get("key") or set(e) - {"name", "valueFrom"}):
            raise ValueError(f"invalid secret_env entry {e!r}: {form}")
        if name in env or name in seen:
            raise ValueError(f"secret_env {name!r} is set twice (env or secret_env); each "
                             "variable comes from one place")
        seen.add(name)


def _route(cls: type, top: dict, settings: Mapping) -> MPIJobOptions:
    """Build ``cls`` from ``top`` (top-level values) updated by flat ``settings``."""
    owner = {f.name: group for group, gcls in GROUPS.items() for f in dataclasses.fields(gcls)}
    top_fields = {f.name for f in dataclasses.fields(cls)}
    per_group: dict[str, dict] = {}
    for key, value in settings.items():
        if key in top_fields:
            top[key] = value
        elif key in owner:
            per_group.setdefault(owner[key], {})[key] = value
        else:
            raise TypeError(f"MPIJobOptions has no option {key!r}")
    for group, changes in per_group.items():
        top[group] = dataclasses.replace(top.get(group) or GROUPS[group](), **changes)
    return cls(**top)
