"""Pure builder of a ``kubeflow.org/v2beta1`` MPIJob (Kubeflow MPI Operator).

No I/O: :func:`build` turns an :class:`MPIJobOptions` into a plain ``dict`` that the
launcher (:mod:`kfp_gpu.mpi.launcher`) posts to the Kubernetes API.

Shape of the result (field names from the upstream Go types,
``github.com/kubeflow/mpi-operator`` ``pkg/apis/kubeflow/v2beta1/types.go``; the
controller-side rules from ``pkg/apis/kubeflow/validation/validation.go``)::

    apiVersion: kubeflow.org/v2beta1
    kind: MPIJob
    metadata: {name, namespace, labels, annotations}
    spec:
      slotsPerWorker: G                # MPI slots per Worker pod = whole GPUs per pod
      launcherCreationPolicy: WaitForWorkersReady
      mpiImplementation: OpenMPI
      sshAuthMountPath: /home/mpiuser/.ssh   # non-root, as the project's horovod image
      runPolicy: {cleanPodPolicy, ttlSecondsAfterFinished, backoffLimit,
                  activeDeadlineSeconds}
      mpiReplicaSpecs:
        Launcher: {replicas: 1, restartPolicy: OnFailure, template: <PodTemplateSpec>}
        Worker:   {replicas: N, restartPolicy: Never,     template: <PodTemplateSpec>}

The Launcher runs ``mpirun -np N*G -bind-to none -map-by slot -x ...`` (the mpirun form
of the Horovod docs, "Run Horovod with Open MPI"); the operator mounts the hostfile and
sets ``OMPI_MCA_orte_default_hostfile`` itself. Workers run ``sshd`` and carry the GPU
request (from :mod:`kfp_gpu.gpu`), the RDMA extended resource, ``IPC_LOCK``, a
Memory-backed ``/dev/shm``, the NCCL settings and the shared PVCs of
``MPIJobOptions.volumes`` (:class:`PvcMount`: pod ``volumes[].persistentVolumeClaim`` +
container ``volumeMounts``), e.g. the ``work_dir`` rank 0 writes the model and metrics to.

Defaults fit the project's ``horovod`` image (``images/horovod/Dockerfile``), which follows
the MPI Operator's non-root base image (``build/base/Dockerfile`` and the
``examples/v2beta1/pi`` MPIJob of kubeflow/mpi-operator): user ``mpiuser`` (uid/gid 1000,
home ``/home/mpiuser``), so ``sshAuthMountPath: /home/mpiuser/.ssh``, pods with
``runAsUser``/``runAsGroup`` 1000, and Workers running
``/usr/sbin/sshd -De -f /home/mpiuser/.sshd_config`` (port 2222, host key = the operator's
``id_rsa``). The image's ``/etc/ssh/ssh_config`` sets ``Port 2222`` for the ssh client, so
mpirun needs no ``-mca plm_rsh_args "-p 2222"``; images without that line need it (or an
ssh config). For a root image use ``run_as_user=None, run_as_group=None,
ssh_auth_mount_path="/root/.ssh", worker_command=("/usr/sbin/sshd", "-De")``
(:data:`ROOT_SSH`).

Upstream names used here:
- ``rdma/rdma_shared_device_a``: the resource name of the Mellanox k8s-rdma-shared-dev-plugin
  sample config (NVIDIA Network Operator); ``rdma/hca_shared_devices_a``: the name in the
  Network Operator's ``NicClusterPolicy`` examples. Any ``rdma/<name>`` is accepted.
- ``k8s.v1.cni.cncf.io/networks``: the Multus pod annotation selecting secondary networks
  (NetworkAttachmentDefinitions), e.g. an SR-IOV or macvlan network on the RDMA NIC.
- ``NCCL_IB_HCA``, ``NCCL_NET_GDR_LEVEL``, ``NCCL_SOCKET_IFNAME``, ``NCCL_DEBUG``: NCCL
  environment variables (NCCL user guide, "Environment Variables").
- ``IPC_LOCK``: Linux capability needed to pin (register) memory for RDMA verbs.
- labels ``training.kubeflow.org/job-name`` / ``training.kubeflow.org/job-role``: set by the
  operator on the pods it creates (``pkg/apis/kubeflow/v2beta1/constants.go``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "kubeflow.org/v2beta1"
KIND = "MPIJob"
GROUP = "kubeflow.org"
VERSION = "v2beta1"
PLURAL = "mpijobs"

#: Pod labels the MPI Operator sets (constants.go: JobNameLabel, JobRoleLabel).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

#: Labels/annotations this suite puts on the MPIJob it creates.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kfp-gpu"
RUN_ID_ANNOTATION = "kfp-gpu/pipeline-run-id"
TASK_ANNOTATION = "kfp-gpu/task-name"

MULTUS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
RDMA_SHARED_DEVICE_A = "rdma/rdma_shared_device_a"
RDMA_HCA_SHARED_DEVICES_A = "rdma/hca_shared_devices_a"
KNOWN_RDMA_RESOURCES = (RDMA_SHARED_DEVICE_A, RDMA_HCA_SHARED_DEVICES_A)

CLEAN_POD_POLICIES = ("Running", "All", "None")  # types.go CleanPodPolicy
LAUNCHER_CREATION_POLICIES = ("AtStartup", "WaitForWorkersReady")  # types.go
MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")  # types.go MPIImplementation
RESTART_POLICIES = ("Never", "OnFailure")  # validation.go validRestartPolicies
#: NCCL_NET_GDR_LEVEL values (NCCL user guide): path names or the legacy integers 0-5.
NCCL_GDR_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5")
NCCL_DEBUG_LEVELS = ("", "VERSION", "WARN", "INFO", "TRACE")

#: The non-root user of the horovod image and of the MPI Operator's base images.
MPI_USER = "mpiuser"
MPI_USER_ID = 1000
MPI_USER_HOME = "/home/mpiuser"
#: sshd port of the non-root image (a non-root sshd cannot bind 22 without a capability).
SSH_PORT = 2222
#: Where the operator mounts the SSH Secret (id_rsa, authorized_keys) for ``mpiuser``.
DEFAULT_SSH_AUTH_MOUNT_PATH = f"{MPI_USER_HOME}/.ssh"
#: Worker command: sshd in the foreground with the user's own config (PidFile and HostKey
#: under the home directory, ``Port 2222``), as in kubeflow/mpi-operator's pi example.
DEFAULT_WORKER_COMMAND = ("/usr/sbin/sshd", "-De", "-f", f"{MPI_USER_HOME}/.sshd_config")
#: Option overrides for an image whose sshd runs as root (``/root/.ssh``, system config).
ROOT_SSH = {"run_as_user": None, "run_as_group": None, "ssh_auth_mount_path": "/root/.ssh",
            "worker_command": ("/usr/sbin/sshd", "-De")}

#: Environment always forwarded by ``mpirun -x`` (the Horovod docs' example list).
BASE_FORWARDED_ENV = ("LD_LIBRARY_PATH", "PATH")

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Service names (the MPI Operator creates a Service named after the MPIJob).
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RDMA_RESOURCE = re.compile(r"^rdma/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$")
# Multus short form: [namespace/]name[@interface], comma separated.
_MULTUS_ITEM = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
                          r"(@[A-Za-z0-9_.-]{1,15})?$")
_IFNAME_LIST = re.compile(r"^[\^=]?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$")
_HCA_LIST = re.compile(r"^[\^=]?[A-Za-z0-9_]+(:[0-9]+)?(,[A-Za-z0-9_]+(:[0-9]+)?)*$")

#: Longest name accepted for an MPIJob: ``<name>-launcher`` and ``<name>-worker-<i>`` must
#: stay DNS-1123 labels (63 characters) -- validation.go validateMPIJobName.
MAX_NAME_LEN = 40


def job_name(run_id: str, task_name: str, prefix: str = "mpijob") -> str:
    """Deterministic DNS-1123 label for the MPIJob of one pipeline task.

    ``<prefix>-<first 10 hex of sha256(run_id + "/" + task_name)>``: the same run and task
    always give the same name (so a retried launcher re-attaches instead of creating a
    duplicate), different runs or tasks give different names. The prefix is lower-cased,
    characters outside ``[a-z0-9-]`` become ``-`` and it is cut to 24 characters.

    Raises:
        ValueError: if ``run_id`` or ``task_name`` is empty.
    """
    if not run_id or not task_name:
        raise ValueError("job_name needs a non-empty run_id and task_name")
    digest = hashlib.sha256(f"{run_id}/{task_name}".encode()).hexdigest()[:10]
    clean = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:24].strip("-") or "mpijob"
    if not clean[0].isalpha():  # DNS-1035: the operator's Service takes the job's name
        clean = f"mpijob-{clean}"[:24].strip("-")
    return f"{clean}-{digest}"


def check_name(name: str, workers: int = 1) -> str:
    """Return ``name`` if it is a usable MPIJob name, else raise ``ValueError``.

    Usable: a DNS-1035 label (starts with a letter: the MPI Operator creates a Service
    named after the MPIJob) of at most :data:`MAX_NAME_LEN` characters such that the pod
    hostnames ``<name>-launcher`` and ``<name>-worker-<workers-1>`` are DNS-1123 labels.
    """
    longest = f"{name}-worker-{max(workers, 1) - 1}"
    if (not _DNS1035_LABEL.match(name or "") or len(name) > MAX_NAME_LEN
            or len(longest) > 63 or len(f"{name}-launcher") > 63):
        raise ValueError(
            f"invalid MPIJob name {name!r}: accepted are DNS-1035 labels (lower-case "
            f"letters, digits, '-', starting with a letter and ending alphanumeric: the MPI "
            f"Operator names a Service after the job) of at most {MAX_NAME_LEN} characters; "
            "use kfp_gpu.mpi.mpijob.job_name(run_id, task_name)")
    return name


#: Mount paths a PVC may not take (nor sit above or below): the Memory-backed ``/dev/shm``
#: of the Workers and the operator's hostfile ConfigMap on the Launcher (``/etc/mpi``,
#: mpi-operator ``configMountPath``). ``ssh_auth_mount_path`` is checked per job.
RESERVED_MOUNT_PATHS = ("/dev/shm", "/etc/mpi")


def _nested(a: str, b: str) -> bool:
    """True if ``a`` and ``b`` are the same path or one lies under the other."""
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


@dataclass(frozen=True)
class PvcMount:
    """A PersistentVolumeClaim mounted into the Worker containers.

    The Kubernetes form is a pod ``volumes`` entry ``{name, persistentVolumeClaim:
    {claimName}}`` plus a container ``volumeMounts`` entry ``{name, mountPath[, readOnly]
    [, subPath]}`` (core/v1 ``PersistentVolumeClaimVolumeSource`` / ``VolumeMount``). This
    is what ``kfp.kubernetes.mount_pvc(task, pvc_name=..., mount_path=..., sub_path=...)``
    puts on a KFP task; :func:`kfp_gpu.components.train_resnet_mpijob.trainjob.pvc_mounts`
    reads it back from the task's ``dsl.TaskConfig``.

    Attributes:
        claim_name: name of an existing PVC in the MPIJob's namespace (DNS-1123 subdomain,
            at most 253 characters). Several Workers mount it at once, so it must be
            ``ReadWriteMany`` (or ``ReadOnlyMany`` for ``read_only``) unless ``workers=1``.
        mount_path: absolute, normalised path in the container (no ``..``, no ``:``).
        read_only: mount read-only (``volumeMounts[].readOnly``).
        sub_path: path inside the volume to mount instead of its root (relative, no ``..``);
            empty = the root.
    """

    claim_name: str
    mount_path: str
    read_only: bool = False
    sub_path: str = ""

    def volume_name(self) -> str:
        """Pod volume name: ``pvc-<claim>`` when that is a DNS-1123 label (63 characters),
        else ``pvc-<first 12 hex of sha256(claim)>``; never one of the names the builder or
        the operator use (``dshm``, ``ssh-auth``, ``mpi-job-config``)."""
        name = f"pvc-{self.claim_name}"
        if len(name) <= 63 and _DNS1123_LABEL.match(name):
            return name
        return "pvc-" + hashlib.sha256(self.claim_name.encode()).hexdigest()[:12]

    def validate(self) -> PvcMount:
        """Check the claim name and paths; return ``self``.

        Raises:
            ValueError: naming the field and what is accepted.
        """
        claim = self.claim_name
        if not isinstance(claim, str) or len(claim) > 253 or not _DNS1123_SUBDOMAIN.match(claim):
            raise ValueError(f"invalid PVC claim_name {claim!r}: accepted are DNS-1123 "
                             "subdomains (lower-case letters, digits, '-', '.'; at most 253 "
                             "characters), the metadata.name of an existing PVC")
        path = self.mount_path
        if (not isinstance(path, str) or not path.startswith("/") or path == "/"
                or ":" in path or posixpath.normpath(path) != path):
            raise ValueError(f"invalid PVC mount_path {path!r} for claim {claim!r}: accepted "
                             "are normalised absolute paths other than '/' without ':' or "
                             "'..', e.g. '/mnt/shared'")
        sub = self.sub_path
        if not isinstance(sub, str) or sub.startswith("/") or ".." in sub.split("/"):
            raise ValueError(f"invalid PVC sub_path {sub!r} for claim {claim!r}: accepted are "
                             "relative paths without '..' (empty = the volume's root)")
        if not isinstance(self.read_only, bool):
            raise ValueError(f"PVC read_only must be a bool: {self.read_only!r}")  # noqa: TRY004
        return self

    def volume(self) -> dict:
        """The pod ``volumes`` entry."""
        return {"name": self.volume_name(),
                "persistentVolumeClaim": {"claimName": self.claim_name}}

    def volume_mount(self) -> dict:
        """The container ``volumeMounts`` entry."""
        out: dict[str, Any] = {"name": self.volume_name(), "mountPath": self.mount_path}
        if self.read_only:
            out["readOnly"] = True
        if self.sub_path:
            out["subPath"] = self.sub_path
        return out

    def covers(self, path: str) -> bool:
        """True if the absolute ``path`` lies at or under :attr:`mount_path`."""
        norm = posixpath.normpath(path)
        return norm == self.mount_path or norm.startswith(self.mount_path.rstrip("/") + "/")


@dataclass(frozen=True)
class MPIJobOptions:
    """Everything :func:`build` needs; validated by :meth:`validate`.

    Attributes:
        name: MPIJob name (see :func:`job_name`, :func:`check_name`).
        namespace: namespace of the MPIJob.
        image: container image of Launcher and Workers (the ``horovod`` runtime image,
            ``kfp_gpu.build.images.image("horovod")``).
        program: argv the ranks run, e.g. ``("kfp-gpu", "train-resnet", "--mode",
            "benchmark")``; appended to the mpirun command.
        workers: number of Worker pods (>= 1); one per node in the RDMA layout.
        gpu: GPU request per Worker pod: the text form of ``kfp_gpu.gpu.parse`` (``"gpu:8"``,
            ``"mig:1g.10gb"``, ``"none"``, ...) or a parsed ``GpuRequest``.
        slots_per_worker: MPI ranks per Worker; ``None`` = whole GPUs per pod of the
            request (1 for fractional/shared/CPU requests).
        rdma: request the RDMA extended resource and add ``IPC_LOCK`` on Workers.
        rdma_resource: RDMA extended resource name (``rdma/<name>``).
        rdma_count: quantity of ``rdma_resource`` per Worker (>= 1; shared-device plugins
            hand out many per node).
        multus_networks: value of ``k8s.v1.cni.cncf.io/networks`` on Workers (and the
            Launcher), e.g. ``"rdma-net"`` or ``"ns/net1@net1"``; empty = no annotation.
        nccl_ib_hca: ``NCCL_IB_HCA`` (e.g. ``"mlx5_0,mlx5_1"``, ``"=mlx5_0:1"``); empty = unset.
        nccl_net_gdr_level: ``NCCL_NET_GDR_LEVEL`` (one of :data:`NCCL_GDR_LEVELS`); empty =
            unset (NCCL's default).
        nccl_socket_ifname: ``NCCL_SOCKET_IFNAME`` (e.g. ``"eth0"``, ``"^lo,docker0"``).
        nccl_debug: ``NCCL_DEBUG`` (one of :data:`NCCL_DEBUG_LEVELS`).
        env: extra environment for the ranks (name -> value), forwarded with ``-x``.
        tolerations: extra tolerations for Workers (Kubernetes Toleration dicts).
        node_selector: extra node selector for Workers.
        worker_cpu / worker_memory: CPU / memory requests per Worker; empty = none.
        worker_cpu_limit / worker_memory_limit: their limits; empty = the request.
        launcher_cpu / launcher_memory: requests (= limits) of the Launcher.
        shm_size: ``sizeLimit`` of the Memory-backed ``/dev/shm`` emptyDir; empty = none.
        worker_command: command of the Worker container (``sshd`` in the foreground;
            default :data:`DEFAULT_WORKER_COMMAND`, the non-root sshd of the horovod image).
        clean_pod_policy, ttl_seconds_after_finished, backoff_limit,
        active_deadline_seconds: ``spec.runPolicy`` (seconds; ``None`` = unset).
        launcher_creation_policy: ``AtStartup`` or ``WaitForWorkersReady``.
        mpi_implementation: ``OpenMPI``, ``Intel`` or ``MPICH``.
        ssh_auth_mount_path: where the operator mounts the SSH keys (default
            :data:`DEFAULT_SSH_AUTH_MOUNT_PATH`: the ``.ssh`` of the user the pods run as).
        run_as_user / run_as_group: pod ``securityContext.runAsUser``/``runAsGroup`` of
            Launcher and Workers (default 1000, ``mpiuser`` of the horovod image; ``None`` =
            the image's user). They must match ``ssh_auth_mount_path``'s owner's home.
        fs_group: pod ``securityContext.fsGroup`` (e.g. 1000 so a shared PVC the Workers
            write to is group-writable for ``mpiuser``); ``None`` = unset.
        volumes: PVCs mounted into every Worker container (:class:`PvcMount`), e.g. the
            shared ``work_dir`` rank 0 writes the model, checkpoints and metrics to. Not
            mounted on the Launcher, which only runs ``mpirun`` (it reads no data). Mount
            paths must be distinct and must not be, contain or lie under ``/dev/shm``,
            ``/etc/mpi`` or ``ssh_auth_mount_path``.
        service_account: service account of the pods (empty = namespace default).
        scheduler_name: ``schedulerName`` of the Worker pods (e.g. ``kai-scheduler`` for
            KAI/Run:ai fractions, ``hami-scheduler`` for HAMi); empty = the request's own
            ``schedulerName`` if its pod fragment has one, else the cluster default.
        labels / annotations: extra metadata of the MPIJob object.
        run_id / task_name: recorded as annotations (the name's provenance).
    """

    name: str
    image: str
    program: Sequence[str]
    namespace: str = "default"
    workers: int = 2
    gpu: Any = "none"
    slots_per_worker: int | None = None
    rdma: bool = False
    rdma_resource: str = RDMA_SHARED_DEVICE_A
    rdma_count: int = 1
    multus_networks: str = ""
    nccl_ib_hca: str = ""
    nccl_net_gdr_level: str = ""
    nccl_socket_ifname: str = ""
    nccl_debug: str = "INFO"
    env: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    worker_cpu: str = ""
    worker_memory: str = ""
    worker_cpu_limit: str = ""
    worker_memory_limit: str = ""
    launcher_cpu: str = "500m"
    launcher_memory: str = "512Mi"
    shm_size: str = ""
    worker_command: Sequence[str] = DEFAULT_WORKER_COMMAND
    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int | None = 86400
    backoff_limit: int | None = 0
    active_deadline_seconds: int | None = None
    launcher_creation_policy: str = "WaitForWorkersReady"
    mpi_implementation: str = "OpenMPI"
    ssh_auth_mount_path: str = DEFAULT_SSH_AUTH_MOUNT_PATH
    run_as_user: int | None = MPI_USER_ID
    run_as_group: int | None = MPI_USER_ID
    fs_group: int | None = None
    volumes: Sequence[PvcMount] = ()
    service_account: str = ""
    scheduler_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    run_id: str = ""
    task_name: str = ""

    def replace(self, **changes) -> MPIJobOptions:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def gpu_request(self):
        """The parsed ``kfp_gpu.gpu.GpuRequest`` of :attr:`gpu`.

        Raises:
            ValueError: from ``kfp_gpu.gpu.parse`` for an invalid text form.
        """
        from kfp_gpu import gpu as gpu_mod

        return gpu_mod.parse(self.gpu) if isinstance(self.gpu, str) else self.gpu

    def slots(self) -> int:
        """MPI slots per Worker: :attr:`slots_per_worker` or whole GPUs per pod (min 1)."""
        if self.slots_per_worker is not None:
            return self.slots_per_worker
        return max(1, whole_gpus(self.gpu_request()))

    def validate(self) -> MPIJobOptions:
        """Check every field; return ``self``.

        Raises:
            ValueError: naming the field and the accepted values.
        """
        check_name(self.name, self.workers if isinstance(self.workers, int) else 1)
        if not _DNS1123_LABEL.match(self.namespace or "") or len(self.namespace) > 63:
            raise ValueError(f"invalid namespace {self.namespace!r}: accepted are DNS-1123 labels")
        if not self.image:
            raise ValueError("image is required (e.g. kfp_gpu.build.images.image('horovod'))")
        if isinstance(self.program, str) or not self.program or not all(
                isinstance(a, str) and a for a in self.program):
            raise ValueError("program must be a non-empty sequence of non-empty strings "
                             "(argv), e.g. ('kfp-gpu', 'train-resnet')")
        _positive_int("workers", self.workers)
        if self.slots_per_worker is not None:
            _positive_int("slots_per_worker", self.slots_per_worker)
        _positive_int("rdma_count", self.rdma_count)
        if not _RDMA_RESOURCE.match(self.rdma_resource or ""):
            raise ValueError(f"invalid rdma_resource {self.rdma_resource!r}; accepted: "
                             f"'rdma/<name>', e.g. {', '.join(KNOWN_RDMA_RESOURCES)}")
        _choice("clean_pod_policy", self.clean_pod_policy, CLEAN_POD_POLICIES)
        _choice("launcher_creation_policy", self.launcher_creation_policy,
                LAUNCHER_CREATION_POLICIES)
        _choice("mpi_implementation", self.mpi_implementation, MPI_IMPLEMENTATIONS)
        _choice("nccl_debug", self.nccl_debug, NCCL_DEBUG_LEVELS)
        if self.nccl_net_gdr_level:
            _choice("nccl_net_gdr_level", self.nccl_net_gdr_level, NCCL_GDR_LEVELS)
        if self.nccl_ib_hca and not _HCA_LIST.match(self.nccl_ib_hca):
            raise ValueError(f"invalid nccl_ib_hca {self.nccl_ib_hca!r}; accepted: a comma list "
                             "of HCA names with optional ':port', optionally prefixed by '^' "
                             "or '=', e.g. 'mlx5_0,mlx5_1' or '=mlx5_0:1'")
        if self.nccl_socket_ifname and not _IFNAME_LIST.match(self.nccl_socket_ifname):
            raise ValueError(f"invalid nccl_socket_ifname {self.nccl_socket_ifname!r}; accepted:"
                             " a comma list of interface names or prefixes, optionally "
                             "prefixed by '^' or '=', e.g. 'eth0' or '^lo,docker0'")
        if self.multus_networks and not all(
                _MULTUS_ITEM.match(x.strip()) for x in self.multus_networks.split(",")):
            raise ValueError(f"invalid multus_networks {self.multus_networks!r}; accepted: "
                             "comma list of '[namespace/]name[@interface]'")
        for k, v in self.env.items():
            if not _ENV_NAME.match(k) or not isinstance(v, str):
                raise ValueError(f"invalid env entry {k!r}={v!r}: accepted are C identifiers "
                                 "mapped to strings")
        for key in ("worker_cpu", "worker_memory", "worker_cpu_limit", "worker_memory_limit",
                    "launcher_cpu", "launcher_memory", "shm_size"):
            value = getattr(self, key)
            if value and not _QUANTITY.match(value):
                raise ValueError(f"invalid {key} {value!r}: accepted are Kubernetes quantities "
                                 "such as '4', '500m', '16Gi'")
        for key in ("ttl_seconds_after_finished", "backoff_limit"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                raise ValueError(f"{key} must be a non-negative integer or None, got {value!r}")
        if self.active_deadline_seconds is not None:
            _positive_int("active_deadline_seconds", self.active_deadline_seconds)
        if self.scheduler_name and not _DNS1123_SUBDOMAIN.match(self.scheduler_name):
            raise ValueError(f"invalid scheduler_name {self.scheduler_name!r}: accepted are "
                             "DNS-1123 subdomains such as 'kai-scheduler'")
        if not self.ssh_auth_mount_path.startswith("/"):
            raise ValueError("ssh_auth_mount_path must be an absolute path")
        if isinstance(self.worker_command, str) or not self.worker_command or not all(
                isinstance(a, str) and a for a in self.worker_command):
            raise ValueError("worker_command must be a non-empty sequence of non-empty "
                             f"strings (argv), e.g. {list(DEFAULT_WORKER_COMMAND)}")
        for key in ("run_as_user", "run_as_group", "fs_group"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                raise ValueError(f"{key} must be a non-negative integer (uid/gid) or None, "
                                 f"got {value!r}")
        self._validate_volumes()
        for t in self.tolerations:
            if not isinstance(t, Mapping) or t.get("operator", "Equal") not in ("Equal", "Exists"):
                raise ValueError(f"invalid toleration {t!r}: accepted are Toleration dicts with "
                                 "operator 'Equal' or 'Exists'")
        self.gpu_request()  # raises ValueError for an invalid GPU request text
        return self

    def _validate_volumes(self) -> None:
        if isinstance(self.volumes, (str, Mapping)) or not all(
                isinstance(v, PvcMount) for v in self.volumes):
            raise ValueError("volumes must be a sequence of kfp_gpu.mpi.mpijob.PvcMount("
                             "claim_name, mount_path, read_only, sub_path)")
        reserved = (*RESERVED_MOUNT_PATHS, self.ssh_auth_mount_path)
        seen: list[str] = []
        for v in self.volumes:
            v.validate()
            for r in reserved:
                if _nested(v.mount_path, r):
                    raise ValueError(f"PVC {v.claim_name!r} mount_path {v.mount_path!r} clashes "
                                     f"with {r!r} (the /dev/shm emptyDir, the operator's "
                                     "/etc/mpi hostfile or the SSH key mount); accepted: a "
                                     "path outside them, e.g. '/mnt/shared'")
            if v.mount_path in seen:
                raise ValueError(f"duplicate PVC mount_path {v.mount_path!r}: each mount "
                                 "needs its own path")
            seen.append(v.mount_path)


def _positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _choice(name: str, value, accepted: Sequence[str]) -> None:
    if value not in accepted:
        shown = ", ".join(repr(a) for a in accepted)
        raise ValueError(f"invalid {name} {value!r}; accepted: {shown}")


def whole_gpus(request) -> int:
    """Devices each pod sees for a ``GpuRequest``: its ``gpus_per_pod`` (count for
    gpu/shared/hami, 1 for MIG and fractional kinds, 0 for none)."""
    value = getattr(request, "gpus_per_pod", None)
    if value is not None:
        return int(value)
    return int(getattr(request, "count", 0)) if getattr(request, "kind", "") == "gpu" else 0


def _pod_fragment(request) -> dict:
    """The request's ``pod_fragment()`` (resources/annotations/labels/env/tolerations/
    nodeSelector), with every key present."""
    frag = dict(request.pod_fragment()) if hasattr(request, "pod_fragment") else {}
    res = frag.get("resources") or {}
    return {
        "resources": {"limits": dict(res.get("limits") or {}),
                      "requests": dict(res.get("requests") or {})},
        "annotations": dict(frag.get("annotations") or {}),
        "labels": dict(frag.get("labels") or {}),
        "env": [dict(e) for e in frag.get("env") or []],
        "tolerations": [dict(t) for t in frag.get("tolerations") or []],
        "nodeSelector": dict(frag.get("nodeSelector") or {}),
        "schedulerName": frag.get("schedulerName", ""),
    }


def nccl_env(opts: MPIJobOptions) -> dict[str, str]:
    """NCCL environment of the ranks (name -> value), in a stable order.

    ``NCCL_IB_DISABLE=1`` is set when RDMA is off, so NCCL uses sockets instead of probing
    InfiniBand/RoCE verbs it may not be allowed to use (no ``IPC_LOCK``, no RDMA device).
    """
    env: dict[str, str] = {}
    if opts.nccl_debug:
        env["NCCL_DEBUG"] = opts.nccl_debug
    if opts.rdma:
        if opts.nccl_ib_hca:
            env["NCCL_IB_HCA"] = opts.nccl_ib_hca
        if opts.nccl_net_gdr_level:
            env["NCCL_NET_GDR_LEVEL"] = opts.nccl_net_gdr_level
    else:
        env["NCCL_IB_DISABLE"] = "1"
    if opts.nccl_socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = opts.nccl_socket_ifname
    return env


def rank_env(opts: MPIJobOptions) -> dict[str, str]:
    """All environment the ranks get: NCCL/Horovod settings, the GPU request's env
    (e.g. its share variable), then ``opts.env`` (which wins)."""
    env = nccl_env(opts)
    for e in _pod_fragment(opts.gpu_request())["env"]:
        if "value" in e:
            env[e["name"]] = str(e["value"])
    env.update(opts.env)
    return env


def mpirun_command(np: int, forwarded_env: Sequence[str], program: Sequence[str],
                   mpi_implementation: str = "OpenMPI") -> list[str]:
    """The Launcher's argv: ``mpirun`` for ``np`` ranks running ``program``.

    OpenMPI form (Horovod docs, "Run Horovod with Open MPI")::

        mpirun --allow-run-as-root -np N -bind-to none -map-by slot
               -x NCCL_DEBUG -x ... -mca pml ob1 -mca btl ^openib <program...>

    ``-bind-to none`` leaves thread placement to the framework (one rank drives one GPU),
    ``-map-by slot`` fills each Worker's ``slotsPerWorker`` slots before the next one,
    ``-x NAME`` forwards the Launcher's value of ``NAME`` to every rank (ranks started over
    ssh do not see the Worker pod's environment). ``-mca btl ^openib`` keeps Open MPI off
    the deprecated openib transport (NCCL does the GPU traffic over RDMA). Intel MPI and
    MPICH use ``-n``/``-genvlist`` instead.

    Raises:
        ValueError: for ``np < 1``, an empty program or an unknown implementation.
    """
    _positive_int("np", np)
    if not program:
        raise ValueError("program must be a non-empty argv")
    _choice("mpi_implementation", mpi_implementation, MPI_IMPLEMENTATIONS)
    names = list(dict.fromkeys([*BASE_FORWARDED_ENV, *forwarded_env]))
    if mpi_implementation != "OpenMPI":
        return ["mpirun", "-n", str(np), "-genvlist", ",".join(names), *program]
    cmd = ["mpirun", "--allow-run-as-root", "-np", str(np), "-bind-to", "none",
           "-map-by", "slot"]
    for n in names:
        cmd += ["-x", n]
    cmd += ["-mca", "pml", "ob1", "-mca", "btl", "^openib", *program]
    return cmd


def _env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in env.items()]


def _resources(limits: dict, requests: dict) -> dict:
    out = {}
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    if requests:
        out["requests"] = dict(sorted(requests.items()))
    return out


def pod_security_context(opts: MPIJobOptions) -> dict:
    """PodSecurityContext (``runAsUser``, ``runAsGroup``, ``fsGroup``) of Launcher and
    Workers; empty when all three are ``None``.

    ``IPC_LOCK`` (added on Workers with RDMA) only reaches the effective capabilities of a
    root process: Kubernetes sets no ambient capabilities, so for a non-root rank the
    memory it can register for RDMA is bounded by ``RLIMIT_MEMLOCK`` (``ulimit -l``) that
    the container runtime gives the pod (see docs/distributed.md).
    """
    out = {}
    for key, field_ in (("runAsUser", "run_as_user"), ("runAsGroup", "run_as_group"),
                        ("fsGroup", "fs_group")):
        value = getattr(opts, field_)
        if value is not None:
            out[key] = value
    return out


def worker_template(opts: MPIJobOptions) -> dict:
    """PodTemplateSpec of a Worker: GPU request, RDMA, IPC_LOCK, /dev/shm, NCCL env, and
    the PVCs of ``opts.volumes`` (one pod volume per claim, one mount per entry)."""
    frag = _pod_fragment(opts.gpu_request())
    limits = dict(frag["resources"]["limits"])
    requests = dict(frag["resources"]["requests"])
    for key, value, limit in (("cpu", opts.worker_cpu, opts.worker_cpu_limit),
                              ("memory", opts.worker_memory, opts.worker_memory_limit)):
        if value or limit:
            limits.setdefault(key, limit or value)
            requests.setdefault(key, value or limit)
    if opts.rdma:
        # Extended resources: request must equal limit (Kubernetes rule).
        limits[opts.rdma_resource] = str(opts.rdma_count)
        requests[opts.rdma_resource] = str(opts.rdma_count)
    container: dict[str, Any] = {
        "name": "worker",
        "image": opts.image,
        "command": list(opts.worker_command),
        "env": _env_list(rank_env(opts)),
        "resources": _resources(limits, requests),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                         *(v.volume_mount() for v in opts.volumes)],
    }
    if opts.rdma:
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    shm: dict[str, str] = {"medium": "Memory"}
    if opts.shm_size:
        shm["sizeLimit"] = opts.shm_size
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": shm},
                    *_dedupe([v.volume() for v in opts.volumes])],
    }
    tolerations = _dedupe([*frag["tolerations"], *(dict(t) for t in opts.tolerations)])
    if tolerations:
        spec["tolerations"] = tolerations
    selector = {**frag["nodeSelector"], **opts.node_selector}
    if selector:
        spec["nodeSelector"] = dict(sorted(selector.items()))
    scheduler = opts.scheduler_name or frag["schedulerName"]
    if scheduler:
        spec["schedulerName"] = scheduler
    if opts.service_account:
        spec["serviceAccountName"] = opts.service_account
    security = pod_security_context(opts)
    if security:
        spec["securityContext"] = security
    annotations = dict(frag["annotations"])
    if opts.multus_networks:
        annotations[MULTUS_ANNOTATION] = opts.multus_networks
    return {"metadata": _meta(frag["labels"], annotations), "spec": spec}


def launcher_template(opts: MPIJobOptions) -> dict:
    """PodTemplateSpec of the Launcher: no GPU, runs :func:`mpirun_command`."""
    env = rank_env(opts)
    np = opts.workers * opts.slots()
    limits = {k: v for k, v in (("cpu", opts.launcher_cpu),
                                ("memory", opts.launcher_memory)) if v}
    container = {
        "name": "launcher",
        "image": opts.image,
        "command": mpirun_command(np, list(env), list(opts.program), opts.mpi_implementation),
        "env": _env_list(env),
        "resources": _resources(limits, dict(limits)),
    }
    spec: dict[str, Any] = {"containers": [container]}
    if opts.service_account:
        spec["serviceAccountName"] = opts.service_account
    security = pod_security_context(opts)
    if security:
        spec["securityContext"] = security
    annotations = {MULTUS_ANNOTATION: opts.multus_networks} if opts.multus_networks else {}
    return {"metadata": _meta({}, annotations), "spec": spec}


def _meta(labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict:
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def _dedupe(items: list[dict]) -> list[dict]:
    seen, out = set(), []
    for item in items:
        key = tuple(sorted((k, str(v)) for k, v in item.items()))
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def build(opts: MPIJobOptions) -> dict:
    """The MPIJob for ``opts`` as a JSON-ready ``dict`` (see the module docstring).

    ``spec.slotsPerWorker`` = :meth:`MPIJobOptions.slots`; ``mpirun -np`` =
    ``workers * slotsPerWorker``. Deterministic: the same options give an equal dict.

    Raises:
        ValueError: from :meth:`MPIJobOptions.validate`.
    """
    opts.validate()
    run_policy: dict[str, Any] = {"cleanPodPolicy": opts.clean_pod_policy}
    if opts.ttl_seconds_after_finished is not None:
        run_policy["ttlSecondsAfterFinished"] = opts.ttl_seconds_after_finished
    if opts.backoff_limit is not None:
        run_policy["backoffLimit"] = opts.backoff_limit
    if opts.active_deadline_seconds is not None:
        run_policy["activeDeadlineSeconds"] = opts.active_deadline_seconds
    labels = {MANAGED_BY_LABEL: MANAGED_BY, **opts.labels}
    annotations = dict(opts.annotations)
    if opts.run_id:
        annotations[RUN_ID_ANNOTATION] = opts.run_id
    if opts.task_name:
        annotations[TASK_ANNOTATION] = opts.task_name
    metadata: dict[str, Any] = {"name": opts.name, "namespace": opts.namespace,
                                "labels": dict(sorted(labels.items()))}
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "slotsPerWorker": opts.slots(),
            "launcherCreationPolicy": opts.launcher_creation_policy,
            "mpiImplementation": opts.mpi_implementation,
            "sshAuthMountPath": opts.ssh_auth_mount_path,
            "runPolicy": run_policy,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                             "template": launcher_template(opts)},
                "Worker": {"replicas": opts.workers, "restartPolicy": "Never",
                           "template": worker_template(opts)},
            },
        },
    }


def to_yaml(job: Mapping) -> str:
    """``job`` as YAML (keys in insertion order), for goldens and ``kubectl apply``."""
    import yaml

    return yaml.safe_dump(dict(job), sort_keys=False, default_flow_style=False)
