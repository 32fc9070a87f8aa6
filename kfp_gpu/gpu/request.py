"""GPU request model: one typed request -> KFP task settings / pod fragment / runtime cap.

One :class:`GpuRequest` covers every way this suite asks a Kubernetes cluster for GPU
capacity, each in the terms of the device plugin or scheduler that serves it:

==============  ==========================================  ===================================
text form       what the pod gets                           served by (upstream name source)
==============  ==========================================  ===================================
``none``        nothing (CPU only)                          --
``gpu:N``       ``nvidia.com/gpu: N``                       NVIDIA k8s-device-plugin
``mig:P``       ``nvidia.com/mig-<P>: 1``                   k8s-device-plugin, migStrategy mixed
``shared:N``    ``nvidia.com/gpu: N`` (or                   k8s-device-plugin ``sharing``
                ``nvidia.com/gpu.shared`` when renamed)     ``timeSlicing`` / ``mps`` replicas
``fraction:F``  annotation ``gpu-fraction: "F"``, no limit  KAI Scheduler / Run:ai
``gpu-memory:M``  annotation ``gpu-memory: "M"`` (MiB)      KAI Scheduler / Run:ai
``metagpu:U``   ``cnvrg.io/metagpu: U`` (100 = 1 GPU)       cnvrg MetaGPU device plugin
``hami:N,...``  ``nvidia.com/gpu: N`` (+ ``nvidia.com/      HAMi (Project-HAMi) device plugin
                gpumem``, ``nvidia.com/gpucores`` in pod    and scheduler
                templates the suite writes itself)
``dra:gpu=N``   pod ``resourceClaims`` -> a                 NVIDIA DRA driver (kubernetes-sigs/
``dra:mig=P``   ResourceClaimTemplate (DeviceClass          dra-driver-nvidia-gpu), Kubernetes
                ``gpu.nvidia.com`` / ``mig.nvidia.com``);   resource.k8s.io/v1; only in pod
                no extended resource                        templates the suite writes itself
==============  ==========================================  ===================================

Options (after a comma, ``key=value``): ``gpu`` and ``shared`` and ``hami`` take
``product=`` (GPU Feature Discovery label ``nvidia.com/gpu.product``); ``mig`` takes
``model=`` (validates the profile, see :mod:`kfp_gpu.gpu.mig`), ``product=`` and
``unchecked=true`` (a profile the tables do not know; warns); ``shared``
takes ``replicas=R`` (the plugin's replicas per GPU: the memory share becomes N/R),
``strategy=time-slicing|mps`` (node selector on the GFD label
``nvidia.com/gpu.sharing-strategy``), ``renamed=true`` (``renameByDefault``:
``nvidia.com/gpu.shared``; without it GFD labels the product ``<P>-SHARED``, which the
product selector then uses) and ``allow-multiple=true`` (``shared:N>1`` on a time-slicing
config without ``failRequestsGreaterThanOne``); every kind (``none`` too: KAI
queues every pod it schedules) takes ``queue=NAME`` (label ``kai.scheduler/queue``) and
``queue-label=KEY`` (e.g. ``runai/queue`` on Run:ai);
``hami`` takes ``mem=MiB`` and ``cores=PERCENT``; ``dra`` (alpha upstream) takes
``product=``, ``memory>=QTY``, ``model=`` and ``sharing=time-slicing|mps`` with
``interval=`` / ``threads=`` / ``pinned=``, or ``class=DEVICECLASS`` alone with ``gpu=N``
(another DRA driver's DeviceClass, e.g. ``gpu.example.com``) (:mod:`kfp_gpu.gpu.kinds.dra`;
the claim: :mod:`kfp_gpu.gpu.claim`).

Other upstream names: toleration ``nvidia.com/gpu`` Exists NoSchedule -- the taint GPU node
pools carry (GKE, EKS and the GPU Operator docs use this key).

Each kind is its own module in :mod:`kfp_gpu.gpu.kinds` (parse, validate, resource, share,
selectors, text form); rendering is :mod:`kfp_gpu.gpu.render`; the names written are in
:mod:`kfp_gpu.gpu.names`.

KFP limits (kfp 2.17): a task carries ONE accelerator resource (``set_accelerator_type`` /
``set_accelerator_limit``, a non-negative integer) and has no ``schedulerName``. So HAMi's
second and third resources are only written by :meth:`GpuRequest.pod_fragment`; on a KFP
task a HAMi request keeps ``nvidia.com/gpu`` and falls back to HAMi's device-plugin defaults
for memory/cores (a ``UserWarning`` says so), while the runtime memory cap (see
:mod:`kfp_gpu.gpu.memory_cap`) still applies ``mem``. KAI/Run:ai needs its scheduler chosen outside
the pod spec KFP writes (namespace default / admission webhook), see docs/gpu-sharing.md.

Every GPU request also tells the container its share in environment variables
(:data:`KIND_ENV`, :data:`SHARE_ENV`, :data:`MEMORY_ENV`), which
:func:`kfp_gpu.gpu.memory_cap.apply_gpu_share` turns into a TensorFlow memory cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kfp_gpu.gpu import render
from kfp_gpu.gpu.kinds import KINDS, REGISTRY
from kfp_gpu.gpu.kinds.base import ACCEPTED
from kfp_gpu.gpu.kinds.kai import QUEUE_OPTIONS, KaiQueue, queue_from
from kfp_gpu.gpu.kinds.shared import Sharing
from kfp_gpu.gpu.names import (
    GPU_TOLERATION_KEY,
    PRODUCT_LABEL,
)

__all__ = ["ACCEPTED", "KINDS", "GpuRequest", "KaiQueue", "Sharing", "parse"]


@dataclass(frozen=True)
class GpuRequest:
    """A request for GPU capacity. Build with :func:`parse`; fields are validated on creation.

    Attributes:
        kind: one of :data:`KINDS`.
        count: devices: whole GPUs (``gpu``), replicas (``shared``), vGPUs (``hami``); 1 for
            ``mig`` (a CUDA process can use one MIG device only); 0 otherwise.
        product: GPU Feature Discovery ``nvidia.com/gpu.product`` value ("" = any).
        profile: MIG profile, e.g. ``1g.10gb`` (kind ``mig``).
        model: GPU model key of :data:`kfp_gpu.gpu.mig.PROFILES` the profile was checked
            against ("" = checked against every model; the resource name does not depend on it).
        fraction: share of one GPU, 0 < f < 1 (kind ``fraction``).
        memory_mib: MiB of GPU memory (``gpu-memory``; ``hami`` ``mem=``; ``dra``: the least
            memory a device must have, ``memory>=``), 0 = not given.
        units: MetaGPU units, 1..100 (kind ``metagpu``).
        cores: HAMi ``nvidia.com/gpucores`` percent 1..100, 0 = not given.
        sharing: ``shared``: the plugin's replicas per GPU, strategy, renamed resource;
            ``dra``: the driver's sharing strategy, time-slice interval, MPS settings.
        queue: the KAI/Run:ai queue (name, label key), any kind.
        device_class: ``dra``: another DRA driver's DeviceClass (``class=``, e.g.
            ``gpu.example.com``); "" = NVIDIA's ``gpu.nvidia.com`` / ``mig.nvidia.com``
            (naming one of those is the same as "").
        unchecked: ``mig``: the profile was not checked against the MIG tables
            (``unchecked=true``, for profiles newer than the tables).
    """

    kind: str = "none"
    count: int = 0
    product: str = ""
    profile: str = ""
    model: str = ""
    fraction: float = 0.0
    memory_mib: int = 0
    units: int = 0
    cores: int = 0
    sharing: Sharing = field(default_factory=Sharing)
    queue: KaiQueue = field(default_factory=KaiQueue)
    unchecked: bool = False
    device_class: str = ""

    def __post_init__(self):
        if self.kind not in REGISTRY:
            raise ValueError(f"unknown GPU request kind {self.kind!r}; {ACCEPTED}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise ValueError(f"GPU count must be a non-negative integer, got {self.count!r}; "
                             f"{ACCEPTED}")
        if self.device_class and self.kind != "dra":
            raise ValueError(f"a DeviceClass (class=) is for 'dra' requests, not {self.kind!r}; "
                             f"{ACCEPTED}")
        kind = REGISTRY[self.kind]
        kind.validate(self)
        for key, value in kind.normalized(self).items():
            object.__setattr__(self, key, value)

    # ---------------------------------------------------------------- derived values
    @property
    def resource_name(self) -> str:
        """The one extended resource a KFP task gets ("" for none and KAI/Run:ai kinds)."""
        return REGISTRY[self.kind].resource(self)[0]

    @property
    def resource_count(self) -> int:
        """The integer quantity of :attr:`resource_name` (0 when there is none)."""
        return REGISTRY[self.kind].resource(self)[1]

    @property
    def share(self) -> float:
        """GPUs' worth of device memory this request may use on the device(s) it sees.

        ``gpu:N`` -> N; ``mig`` -> 1.0 (the slice is the visible device, its memory is
        enforced by hardware); ``shared:N`` -> N/replicas (N when replicas is unknown);
        ``fraction:F`` -> F; ``metagpu:U`` -> U/100; ``hami:N`` -> N (``mem`` caps in MiB);
        ``gpu-memory`` -> 1.0 (the cap is absolute, :attr:`memory_mib`); ``none`` -> 0.0.
        """
        return REGISTRY[self.kind].share(self)

    @property
    def physical_share(self) -> float:
        """Fraction of physical GPU memory held (MIG: the profile's memory fraction)."""
        return REGISTRY[self.kind].physical_share(self)

    @property
    def gpus_per_pod(self) -> int:
        """Devices each pod sees, for MPIJob ``slotsPerWorker`` (count for gpu/shared/hami,
        1 for fractional kinds and MIG, 0 for none)."""
        return REGISTRY[self.kind].gpus_per_pod(self)

    @property
    def is_gpu(self) -> bool:
        return self.kind != "none"

    def env(self) -> dict[str, str]:
        """Environment for the container: {KIND_ENV, SHARE_ENV[, MEMORY_ENV]} ({} for none)."""
        if self.kind == "none":
            return {}
        return REGISTRY[self.kind].env(self)

    def tolerations(self) -> list[dict]:
        """Kubernetes tolerations: the GPU node taint, for every GPU kind."""
        if not self.is_gpu:
            return []
        return [{"key": GPU_TOLERATION_KEY, "operator": "Exists", "effect": "NoSchedule"}]

    def node_selector(self) -> dict[str, str]:
        """GFD node selector: product and (shared) sharing strategy."""
        kind = REGISTRY[self.kind]
        out = {PRODUCT_LABEL: self.product} if self.product and kind.product_is_label else {}
        out.update(kind.node_selector(self))
        return out

    def annotations(self) -> dict[str, str]:
        """Pod annotations (KAI/Run:ai ``gpu-fraction`` / ``gpu-memory``)."""
        return REGISTRY[self.kind].annotations(self)

    def labels(self) -> dict[str, str]:
        """Pod labels: the KAI/Run:ai queue (any kind, ``none`` included)."""
        return {**self.queue.labels(), **REGISTRY[self.kind].labels(self)}

    # ---------------------------------------------------------------- renderings
    def apply_to_task(self, task, count=None):
        """Render onto a KFP ``PipelineTask``; returns the task
        (:func:`kfp_gpu.gpu.render.apply_to_task`)."""
        return render.apply_to_task(self, task, count)

    def pod_fragment(self, container: str = "") -> dict:
        """Pod-spec pieces for pod templates the suite writes itself; ``container`` names
        the GPU container for KAI kinds (:func:`kfp_gpu.gpu.render.pod_fragment`)."""
        return render.pod_fragment(self, container)

    def to_text(self) -> str:
        """The canonical text form; ``parse(r.to_text()) == r``."""
        if self.kind == "none":
            return ",".join(["none", *self.queue.options()])
        head, opts = REGISTRY[self.kind].text(self)
        return ",".join([f"{self.kind}:{head}", *opts, *self.queue.options()])

    def __str__(self) -> str:
        return self.to_text()

    def describe(self) -> dict:
        """Plain dict for logs and metrics (text, kind, resource, count, share, memory_mib)."""
        return {"request": self.to_text(), "kind": self.kind, "resource": self.resource_name,
                "count": self.resource_count, "share": self.share,
                "memory_mib": self.memory_mib, "gpus_per_pod": self.gpus_per_pod}


def _options(text: str, kind: str, rest: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    accepted = REGISTRY[kind].options | QUEUE_OPTIONS
    for kv in rest:
        key, eq, val = kv.partition("=")
        key = key.strip().lower()
        if not eq or key not in accepted:
            allowed = ", ".join(k + "=" if k.endswith(">") else k  # memory>=
                                for k in sorted(accepted)) or "none"
            raise ValueError(f"invalid option {kv!r} for {kind!r} in {text!r}; "
                             f"options accepted for {kind}: {allowed}")
        opts[key] = val.strip()
    return opts


def parse(text: str | GpuRequest) -> GpuRequest:
    """Parse the compact text form (see the module docstring); a GpuRequest passes through.

    Examples: ``gpu:1``, ``gpu:2,product=NVIDIA-H100-80GB-HBM3``, ``mig:1g.10gb``,
    ``mig:3g.40gb,model=H100-80GB``, ``shared:1``, ``fraction:0.5``, ``gpu-memory:8192``,
    ``metagpu:25``, ``hami:1,mem=8000,cores=30``, ``dra:mig=1g.10gb``,
    ``dra:gpu=1,product=H100,memory>=80Gi``, ``none``.

    Raises:
        ValueError: naming the accepted values, for an unknown kind or option, a fraction
            not in (0, 1), a non-integer or negative count (``gpu:1.5``, ``gpu:-1``), an
            unknown MIG profile or one the model lacks, MetaGPU units outside 1..100.
        TypeError: ``text`` is neither text nor a GpuRequest.
    """
    if isinstance(text, GpuRequest):
        return text
    if not isinstance(text, str):
        raise TypeError(f"GPU request must be text, got {type(text).__name__}; {ACCEPTED}")
    t = text.strip()
    head, *rest = [p.strip() for p in t.split(",")]
    if head.lower() in ("", "none", "cpu"):
        return GpuRequest(queue=queue_from(_options(text, "none", rest)))
    kind, sep, value = head.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS or kind == "none" or not sep:
        raise ValueError(f"invalid GPU request {text!r}; {ACCEPTED}")
    opts = _options(text, kind, rest)
    fields = REGISTRY[kind].parse(value.strip(), opts)
    if fields:  # gpu:0 is the empty request
        fields["queue"] = queue_from(opts)
    return GpuRequest(**fields)
