"""What doctor works with: facts read from the cluster, needs of a request or pipeline,
and the report (plain data; no I/O)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kfp_gpu import gpu
from kfp_gpu.cluster.kfp_api import KfpHealth

DEFAULT_NAMESPACE = "kubeflow"
#: How :attr:`ClusterFacts.connect_error` starts when the API answered 401.
UNAUTHORIZED = "unauthorized (HTTP 401)"
#: KFP's runner account (standalone; multi-user: default-editor), bound by manifests/rbac.
DEFAULT_SERVICE_ACCOUNT = "pipeline-runner"


@dataclass
class Node:
    """One Node as doctor needs it. ``allocatable``: resource -> quantity (float)."""

    name: str
    allocatable: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    #: Devices NVIDIA's DRA driver publishes for this node (:mod:`.dra`): ``{"name", "type",
    #: "profile", "product", "memory_mib"}`` each.
    dra_devices: list[dict] = field(default_factory=list)

    @classmethod
    def from_api(cls, obj: dict) -> Node:
        """From a Node object (JSON dict as the API returns it)."""
        from kubernetes.utils import parse_quantity

        meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status", {})
        alloc = {}
        for k, v in (status.get("allocatable") or {}).items():
            try:
                alloc[k] = float(parse_quantity(v))
            except ValueError:
                continue
        return cls(name=meta.get("name", "?"), allocatable=alloc,
                   labels=dict(meta.get("labels") or {}),
                   annotations=dict(meta.get("annotations") or {}),
                   unschedulable=bool(spec.get("unschedulable")))


@dataclass
class Crd:
    """A CRD lookup: ``present`` False when the API said 404; ``error`` for anything else."""

    name: str
    present: bool = False
    served: tuple[str, ...] = ()
    error: str = ""


@dataclass
class Access:
    """One SelfSubjectAccessReview answer (``allowed`` None when the review itself failed)."""

    group: str
    resource: str
    verb: str
    allowed: bool | None
    reason: str = ""


@dataclass
class Runtime:
    """One ClusterTrainingRuntime (Kubeflow Trainer) as doctor reports it."""

    name: str
    mpi: bool = False
    launcher_as_node: bool = False
    images: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, obj: dict) -> Runtime:
        """From a ClusterTrainingRuntime object (JSON dict as the API returns it)."""
        spec = obj.get("spec") or {}
        mpi = (spec.get("mlPolicy") or {}).get("mpi")
        images: list[str] = []
        for rj in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
            pod = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            for c in (pod.get("spec") or {}).get("containers") or []:
                if c.get("image") and c["image"] not in images:
                    images.append(c["image"])
        return cls(name=(obj.get("metadata") or {}).get("name", ""), mpi=mpi is not None,
                   launcher_as_node=bool((mpi or {}).get("runLauncherAsNode")),
                   images=tuple(images))


@dataclass
class RuntimeFacts:
    """The ClusterTrainingRuntimes seen (``error``: why they could not be listed)."""

    runtimes: list[Runtime] = field(default_factory=list)
    error: str = ""
    listed: bool = False


@dataclass
class PodSecurityFacts:
    """The namespace's Pod Security labels without their prefix (``levels``, e.g.
    ``{"enforce": "baseline", "enforce-version": "latest"}``); ``read``: the namespace was
    read; ``error``: why not."""

    levels: dict[str, str] = field(default_factory=dict)
    read: bool = False
    error: str = ""


@dataclass
class DraFacts:
    """Dynamic Resource Allocation as doctor saw it (:mod:`.dra`). ``served``:
    ``resource.k8s.io/v1`` answered (None = not looked at); ``classes``: DeviceClass names;
    ``slices``: ResourceSlices of NVIDIA's driver; ``error``: why a list failed (other than
    the API not being served)."""

    served: bool | None = None
    classes: tuple[str, ...] = ()
    slices: int = 0
    error: str = ""


@dataclass
class OperatorFacts:
    """The MPI Operator's leader-election Leases as doctor saw them (:mod:`.operators`):
    ``leases``: ``(namespace, holder, seconds since renewTime, leaseDurationSeconds)``
    of each Lease named ``mpi-operator``; ``read``: the list answered; ``error``: why not."""

    leases: list[tuple[str, str, float, int]] = field(default_factory=list)
    read: bool = False
    error: str = ""


@dataclass
class LocalQueue:
    """One LocalQueue: its ClusterQueue and ``Active`` condition (None = not reported)."""

    name: str
    cluster_queue: str = ""
    active: bool | None = None
    reason: str = ""
    message: str = ""


@dataclass
class KueueFacts:
    """What doctor saw of Kueue (:mod:`.kueue`): the LocalQueue CRD and the namespace's
    LocalQueues (``listed``: the LIST answered; ``error``: why not)."""

    crd: Crd = field(default_factory=lambda: Crd("localqueues.kueue.x-k8s.io"))
    queues: dict[str, LocalQueue] = field(default_factory=dict)
    listed: bool = False
    error: str = ""


@dataclass
class ClusterFacts:
    """Everything :func:`gather` saw. ``*_error``: why that part could not be read."""

    nodes: list[Node] = field(default_factory=list)
    nodes_error: str = ""
    crds: dict[str, Crd] = field(default_factory=dict)
    runtimes: RuntimeFacts = field(default_factory=RuntimeFacts)
    kfp_host: str = ""
    kfp: KfpHealth | None = None
    namespace: str = DEFAULT_NAMESPACE
    subject: str = ""
    access: list[Access] = field(default_factory=list)
    access_error: str = ""
    pod_security: PodSecurityFacts = field(default_factory=PodSecurityFacts)
    connect_error: str = ""
    dra: DraFacts = field(default_factory=DraFacts)
    operators: OperatorFacts = field(default_factory=OperatorFacts)
    #: Kueue's LocalQueue CRD and the namespace's LocalQueues (:mod:`.kueue`); None = unread.
    kueue: KueueFacts | None = None
    #: The KAI Scheduler's Deployments and queues (:mod:`.kai`); None = unread.
    kai: KaiFacts | None = None

    @property
    def unreachable(self) -> bool:
        """No answer from the Kubernetes API at all, or no cluster configured (the CLI's exit
        status 3); an API that answers 401 is reachable (:data:`UNAUTHORIZED`)."""
        return bool(self.connect_error) and not self.connect_error.startswith(UNAUTHORIZED)


@dataclass
class Needs:
    """What the pipeline / request needs from the cluster.

    Attributes:
        request: the GPU request (None = only report what is there).
        resources: extended resource -> count per pod (from ``pod_fragment`` or the compiled
            pipeline's accelerator settings).
        node_selector: labels a node must carry.
        mpi: the pipeline launches a distributed job (its backend's CRDs + launcher RBAC
            needed).
        source: where the needs came from, for the report.
        backend: the kind that job is: ``mpijob`` (MPI Operator) or ``trainjob`` (Kubeflow
            Trainer v2; ``--backend``).
        kfp_min: minimum KFP backend versions with their reasons
            (:func:`kfp_gpu.cluster.kfp_api.backend_requirements`).
        runtime_image: the image the pipeline expects the ClusterTrainingRuntime's nodes
            to run (the compiled ``runtime_image`` of its distributed task, which
            ``kfp-gpu compile --registry`` sets); "" = the default ImageSet's Horovod image.
        kueue_queues: the Kueue LocalQueues the pipeline's tasks queue their jobs in
            (``kueue_queue``; :func:`kfp_gpu.cluster.doctor.kueue.compiled_kueue_queues`).
    """

    request: gpu.GpuRequest | None = None
    resources: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    mpi: bool = False
    source: str = ""
    backend: str = "mpijob"
    kfp_min: list[tuple[tuple[int, int, int], str]] = field(default_factory=list)
    runtime_image: str = ""
    kueue_queues: tuple[str, ...] = ()
    #: Pod annotations / labels / tolerations the GPU pods carry (the request's
    #: ``pod_fragment``, or the compiled platform spec's ``podMetadata`` and ``tolerations``).
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict] = field(default_factory=list)

    @property
    def kai(self) -> bool:
        """The pods need the KAI Scheduler: a ``fraction`` / ``gpu-memory`` request, or its
        pod annotation (``gpu-fraction`` / ``gpu-memory``) in the compiled platform spec."""
        kinds = ("fraction", "gpu-memory")
        return (self.request is not None and self.request.kind in kinds) or any(
            a in self.annotations for a in (gpu.FRACTION_ANNOTATION, gpu.MEMORY_ANNOTATION))

    def kai_queue(self) -> str:
        """The KAI queue the pods land in: their ``kai.scheduler/queue`` label (or the
        request's own queue label), else KAI's ``default-queue`` (NVIDIA/KAI-Scheduler
        pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go
        ``CalcPodGroupQueue``; plugins/constants/constants.go ``DefaultQueueName``)."""
        label = self.request.queue.label if self.request is not None else \
            gpu.DEFAULT_QUEUE_LABEL
        return self.labels.get(label) or self.labels.get(gpu.DEFAULT_QUEUE_LABEL) or \
            KAI_DEFAULT_QUEUE


#: KAI's queue for pods without a queue label (see :meth:`Needs.kai_queue`).
KAI_DEFAULT_QUEUE = "default-queue"


@dataclass
class KaiFacts:
    """What doctor saw of the KAI Scheduler (:mod:`.kai`): ``deployments``: ``(namespace,
    name, ready replicas)`` of the scheduler Deployments; ``queues``: queue name -> present
    (None = the GET failed); ``read``: the Deployment list answered; ``error``: why not."""

    deployments: list[tuple[str, str, int]] = field(default_factory=list)
    queues: dict[str, bool | None] = field(default_factory=dict)
    read: bool = False
    error: str = ""


@dataclass
class Report:
    """Sections of rows (tuples of str) for the table, and the verdict."""

    sections: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]] = field(
        default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    satisfied_by: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self) -> str:
        """The readable table (plain text, fixed-width columns)."""
        out: list[str] = []
        for title, header, rows in self.sections:
            out.append(f"== {title}")
            table = [header, *rows] if rows else [header, ("(none)",)]
            widths = [max(len(r[i]) if i < len(r) else 0 for r in table)
                      for i in range(len(header))]
            for r in table:
                out.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
            out.append("")
        for w in self.warnings:
            out.append(f"warning: {w}")
        for p in self.problems:
            out.append(f"PROBLEM: {p}")
        if self.satisfied_by:
            out.append(f"request fits on: {', '.join(self.satisfied_by)}")
        out.append("verdict: OK" if self.ok else "verdict: NOT READY")
        return "\n".join(out)


def fmt(q: float) -> str:
    return str(int(q)) if float(q).is_integer() else f"{q:g}"


def api_error(e: Exception) -> str:
    status = getattr(e, "status", None)
    body = getattr(e, "body", None) or ""
    msg = ""
    try:
        msg = json.loads(body).get("message", "")
    except (ValueError, TypeError, AttributeError):
        msg = str(body)[:200]
    if status:
        return f"HTTP {status} {getattr(e, 'reason', '')}".rstrip() + (f": {msg}" if msg else "")
    return f"{type(e).__name__}: {e}"


def list_named(list_call, name: str) -> list[dict]:
    """The items named ``name`` in every namespace, as JSON dicts: ``list_call`` is a
    kubernetes client ``list_*_for_all_namespaces`` method, called with a
    ``metadata.name`` field selector and a 30 s timeout. Raises what the call raises
    (``ApiException``, connection errors)."""
    resp = list_call(field_selector=f"metadata.name={name}", _preload_content=False,
                     _request_timeout=30)
    return json.loads(resp.data).get("items") or []
