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
==============  ==========================================  ===================================

Options (after a comma, ``key=value``): ``gpu`` and ``shared`` and ``hami`` take
``product=`` (GPU Feature Discovery label ``nvidia.com/gpu.product``); ``mig`` takes
``model=`` (validates the profile, see :mod:`kfp_gpu.gpu.mig`) and ``product=``; ``shared``
takes ``replicas=R`` (the plugin's replicas per GPU: the memory share becomes N/R),
``strategy=time-slicing|mps`` (node selector on the GFD label
``nvidia.com/gpu.sharing-strategy``) and ``renamed=true`` (``renameByDefault``:
``nvidia.com/gpu.shared``); ``fraction`` and ``gpu-memory`` take ``queue=NAME`` (label
``kai.scheduler/queue``) and ``queue-label=KEY`` (e.g. ``runai/queue`` on Run:ai);
``hami`` takes ``mem=MiB`` and ``cores=PERCENT``.

Other upstream names: toleration ``nvidia.com/gpu`` Exists NoSchedule -- the taint GPU node
pools carry (GKE, EKS and the GPU Operator docs use this key).

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

import math
import re
import warnings
from dataclasses import dataclass, field

from kfp_gpu.gpu import mig

GPU_RESOURCE = "nvidia.com/gpu"
#: k8s-device-plugin ``sharing.timeSlicing/mps.renameByDefault: true`` advertises this.
SHARED_RESOURCE = "nvidia.com/gpu.shared"
METAGPU_RESOURCE = "cnvrg.io/metagpu"
HAMI_MEM_RESOURCE = "nvidia.com/gpumem"
HAMI_CORES_RESOURCE = "nvidia.com/gpucores"
GPU_TOLERATION_KEY = "nvidia.com/gpu"
#: GPU Feature Discovery node labels.
PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
#: KAI Scheduler pod annotations and queue label (Run:ai uses ``runai/queue``).
FRACTION_ANNOTATION = "gpu-fraction"
MEMORY_ANNOTATION = "gpu-memory"
DEFAULT_QUEUE_LABEL = "kai.scheduler/queue"
#: MetaGPU: units per physical GPU (the plugin's ``metaGpus`` setting used by this suite).
METAGPU_UNITS_PER_GPU = 100

#: Environment variable telling the container the GPUs' worth it may use on the device(s)
#: it sees (0 < s <= N; a MIG slice counts as one device). Below 1 the runtime caps memory.
SHARE_ENV = "KFP_GPU_SHARE"
#: Environment variable with an absolute per-device memory cap in MiB (gpu-memory, hami mem).
MEMORY_ENV = "KFP_GPU_MEMORY_MIB"
#: Environment variable naming the request kind (``gpu``, ``mig``, ``fraction``, ...).
KIND_ENV = "KFP_GPU_KIND"

KINDS = ("none", "gpu", "mig", "shared", "fraction", "gpu-memory", "metagpu", "hami")
ACCEPTED = ("accepted: 'none', 'gpu:N[,product=P]', 'mig:PROFILE[,model=M]', "
            "'shared:N[,replicas=R][,strategy=time-slicing|mps][,renamed=true]', "
            "'fraction:F' (0<F<=1)[,queue=Q], 'gpu-memory:MiB[,queue=Q]', "
            "'metagpu:UNITS' (integer 1..100, 100 = 1 GPU), 'hami:N[,mem=MiB][,cores=1..100]'")
_OPTIONS = {
    "none": set(), "gpu": {"product"}, "mig": {"model", "product"},
    "shared": {"product", "replicas", "strategy", "renamed"},
    "fraction": {"queue", "queue-label"}, "gpu-memory": {"queue", "queue-label"},
    "metagpu": set(), "hami": {"product", "mem", "cores"},
}
_INT = re.compile(r"^\d+$")


class KfpCannotExpressWarning(UserWarning):
    """A part of the request that a KFP task cannot carry (see the message for what to do)."""


def _toleration() -> dict:
    return {"key": GPU_TOLERATION_KEY, "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True)
class GpuRequest:
    """A request for GPU capacity. Build with :func:`parse`; fields are validated on creation.

    Attributes:
        kind: one of :data:`KINDS`.
        count: whole GPUs (``gpu``), replicas (``shared``), vGPUs (``hami``); 1 for ``mig``
            (a CUDA process can use one MIG device only); 0 otherwise.
        product: GPU Feature Discovery ``nvidia.com/gpu.product`` value ("" = any).
        profile: MIG profile, e.g. ``1g.10gb`` (kind ``mig``).
        model: GPU model key of :data:`kfp_gpu.gpu.mig.PROFILES` the profile was checked against
            ("" = checked against every model; the resource name does not depend on it).
        fraction: share of one GPU, 0 < f <= 1 (kind ``fraction``).
        memory_mib: MiB of GPU memory (``gpu-memory``; ``hami`` ``mem=``), 0 = not given.
        units: MetaGPU units, 1..100 (kind ``metagpu``).
        cores: HAMi ``nvidia.com/gpucores`` percent 1..100, 0 = not given.
        replicas: ``shared``: replicas per GPU in the plugin's sharing config, 0 = unknown.
        strategy: ``shared``: ``time-slicing`` or ``mps`` ("" = no node selector).
        renamed: ``shared``: request ``nvidia.com/gpu.shared`` (``renameByDefault: true``).
        queue: KAI/Run:ai queue name ("" = no label).
        queue_label: label key for the queue (default ``kai.scheduler/queue``).
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
    replicas: int = 0
    strategy: str = ""
    renamed: bool = False
    queue: str = ""
    queue_label: str = field(default=DEFAULT_QUEUE_LABEL)

    def __post_init__(self):
        k = self.kind
        if k not in KINDS:
            raise ValueError(f"unknown GPU request kind {k!r}; {ACCEPTED}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise ValueError(f"GPU count must be a non-negative integer, got {self.count!r}; "
                             f"{ACCEPTED}")
        if k in ("gpu", "shared", "hami") and self.count < 1:
            raise ValueError(f"{k}: count must be an integer >= 1 (use 'none' for CPU only)")
        if k == "mig":
            if self.count != 1:
                raise ValueError("mig: exactly one MIG device per container (a CUDA process "
                                 "enumerates one MIG instance); use several tasks for more")
            model, _ = mig.lookup(self.profile, self.model)
            object.__setattr__(self, "profile", self.profile.strip().lower())
            if self.model:
                object.__setattr__(self, "model", model)
        if k == "fraction" and not (isinstance(self.fraction, (int, float))
                                    and math.isfinite(self.fraction)
                                    and 0.0 < self.fraction <= 1.0):
            raise ValueError(f"fraction must be a number with 0 < F <= 1, got {self.fraction!r}; "
                             "for more than one GPU use 'gpu:N'")
        if k == "gpu-memory" and self.memory_mib < 1:
            raise ValueError(f"gpu-memory: MiB must be an integer >= 1, got {self.memory_mib!r}")
        if k == "hami" and self.memory_mib < 0:
            raise ValueError(f"hami: mem (MiB) must be an integer >= 1, got {self.memory_mib!r}")
        if k == "metagpu" and not (isinstance(self.units, int) and not isinstance(self.units, bool)
                                   and 1 <= self.units <= METAGPU_UNITS_PER_GPU):
            raise ValueError(f"metagpu: units must be an integer 1..{METAGPU_UNITS_PER_GPU} "
                             f"({METAGPU_UNITS_PER_GPU} units = 1 GPU), got {self.units!r}; "
                             "for whole GPUs use 'gpu:N'")
        if k == "hami" and not (0 <= self.cores <= 100):
            raise ValueError(f"hami: cores must be an integer percent 1..100, got {self.cores!r}")
        if k == "shared":
            if self.replicas < 0:
                raise ValueError(f"shared: replicas must be an integer >= 1, got {self.replicas}")
            if self.replicas and self.count > self.replicas:
                raise ValueError(f"shared: {self.count} replicas asked but the plugin makes only "
                                 f"{self.replicas} per GPU; use gpu:N for whole GPUs")
            if self.strategy not in ("", "time-slicing", "mps"):
                raise ValueError(f"shared: strategy must be 'time-slicing' or 'mps', "
                                 f"got {self.strategy!r}")

    # ---------------------------------------------------------------- derived values
    @property
    def resource_name(self) -> str:
        """The one extended resource a KFP task gets ("" for none and KAI/Run:ai kinds)."""
        return {
            "gpu": GPU_RESOURCE, "hami": GPU_RESOURCE, "metagpu": METAGPU_RESOURCE,
            "shared": SHARED_RESOURCE if self.renamed else GPU_RESOURCE,
            "mig": mig.resource_name(self.profile) if self.kind == "mig" else "",
        }.get(self.kind, "")

    @property
    def resource_count(self) -> int:
        """The integer quantity of :attr:`resource_name` (0 when there is none)."""
        if self.kind in ("gpu", "shared", "hami", "mig"):
            return self.count
        if self.kind == "metagpu":
            return self.units
        return 0

    @property
    def share(self) -> float:
        """GPUs' worth of device memory this request may use on the device(s) it sees.

        ``gpu:N`` -> N; ``mig`` -> 1.0 (the slice is the visible device, its memory is
        enforced by hardware); ``shared:N`` -> N/replicas (N when replicas is unknown);
        ``fraction:F`` -> F; ``metagpu:U`` -> U/100; ``hami:N`` -> N (``mem`` caps in MiB);
        ``gpu-memory`` -> 1.0 (the cap is absolute, :attr:`memory_mib`); ``none`` -> 0.0.
        """
        k = self.kind
        if k == "none":
            return 0.0
        if k in ("gpu", "hami"):
            return float(self.count)
        if k == "shared":
            return self.count / self.replicas if self.replicas else float(self.count)
        if k == "fraction":
            return float(self.fraction)
        if k == "metagpu":
            return self.units / METAGPU_UNITS_PER_GPU
        return 1.0  # mig, gpu-memory

    @property
    def physical_share(self) -> float:
        """Fraction of physical GPU memory held (MIG: the profile's memory fraction)."""
        if self.kind == "mig":
            return mig.lookup(self.profile, self.model)[1].memory_fraction
        return self.share

    @property
    def gpus_per_pod(self) -> int:
        """Devices each pod sees, for MPIJob ``slotsPerWorker`` (count for gpu/shared/hami,
        1 for fractional kinds and MIG, 0 for none)."""
        if self.kind == "none":
            return 0
        if self.kind in ("gpu", "shared", "hami"):
            return self.count
        return 1

    @property
    def is_gpu(self) -> bool:
        return self.kind != "none"

    def env(self) -> dict[str, str]:
        """Environment for the container: {KIND_ENV, SHARE_ENV[, MEMORY_ENV]} ({} for none)."""
        if self.kind == "none":
            return {}
        out = {KIND_ENV: self.kind, SHARE_ENV: _num(self.share)}
        if self.memory_mib:
            out[MEMORY_ENV] = str(self.memory_mib)
        return out

    def tolerations(self) -> list[dict]:
        """Kubernetes tolerations: the GPU node taint, for every GPU kind."""
        return [_toleration()] if self.is_gpu else []

    def node_selector(self) -> dict[str, str]:
        """GFD node selector: product and (shared) sharing strategy."""
        out = {}
        if self.product:
            out[PRODUCT_LABEL] = self.product
        if self.kind == "shared" and self.strategy:
            out[SHARING_STRATEGY_LABEL] = self.strategy
        return out

    def annotations(self) -> dict[str, str]:
        """Pod annotations (KAI/Run:ai ``gpu-fraction`` / ``gpu-memory``)."""
        if self.kind == "fraction":
            return {FRACTION_ANNOTATION: _num(self.fraction)}
        if self.kind == "gpu-memory":
            return {MEMORY_ANNOTATION: str(self.memory_mib)}
        return {}

    def labels(self) -> dict[str, str]:
        """Pod labels (the KAI/Run:ai queue)."""
        if self.kind in ("fraction", "gpu-memory") and self.queue:
            return {self.queue_label: self.queue}
        return {}

    # ---------------------------------------------------------------- renderings
    def apply_to_task(self, task, count=None):
        """Render onto a KFP ``PipelineTask``; returns the task.

        Sets the accelerator type and integer limit (when the kind has a resource),
        the GPU toleration, node selectors, pod annotations/labels and the environment.

        Args:
            task: a ``kfp.dsl.PipelineTask``.
            count: optional override of the resource count: an int or a pipeline parameter
                (``PipelineChannel``), so integer counts stay pipeline parameters. Only for
                kinds ``gpu``, ``shared`` and ``hami``; with a parameter, :data:`SHARE_ENV`
                is left out (whole devices: no cap is needed).

        Raises:
            ValueError: ``count`` given for a kind without an integer count.
        Warns:
            KfpCannotExpressWarning: for ``hami`` with ``mem``/``cores`` (KFP tasks carry one
            resource; use HAMi's device-plugin defaults or a pod template, see module doc).
        """
        if self.kind == "none":
            return task
        from kfp import kubernetes

        env = self.env()
        limit = self.resource_count
        if count is not None:
            if self.kind not in ("gpu", "shared", "hami"):
                raise ValueError(f"a count parameter applies to gpu, shared and hami requests, "
                                 f"not {self.kind!r}")
            if isinstance(count, int):
                if count < 1:
                    raise ValueError(f"count must be an integer >= 1, got {count}")
                return GpuRequest(**{**self.__dict__, "count": count}).apply_to_task(task)
            if self.kind == "shared" and self.replicas:
                raise ValueError(
                    "a count parameter cannot carry the share of time-sliced/MPS replicas "
                    "(count/replicas); give the count at compile time: 'shared:N,replicas=R'")
            limit = count
            env.pop(SHARE_ENV, None)
        if self.resource_name:
            task.set_accelerator_type(self.resource_name).set_accelerator_limit(limit)
        if self.kind == "hami" and (self.memory_mib or self.cores):
            warnings.warn(
                "KFP tasks carry one accelerator resource: nvidia.com/gpumem and "
                "nvidia.com/gpucores are not written into the task pod (HAMi then applies its "
                "device-plugin defaults); the runtime TensorFlow cap still applies mem. For the "
                "full HAMi form use GpuRequest.pod_fragment() in a pod template (MPIJob workers).",
                KfpCannotExpressWarning, stacklevel=2)
        for tol in self.tolerations():
            kubernetes.add_toleration(task, key=tol["key"], operator=tol["operator"],
                                      effect=tol["effect"])
        for key, value in self.node_selector().items():
            kubernetes.add_node_selector(task, label_key=key, label_value=value)
        for key, value in self.annotations().items():
            kubernetes.add_pod_annotation(task, annotation_key=key, annotation_value=value)
        for key, value in self.labels().items():
            kubernetes.add_pod_label(task, label_key=key, label_value=value)
        for key, value in env.items():
            task.set_env_variable(key, value)
        return task

    def pod_fragment(self) -> dict:
        """Pod-spec pieces for pod templates the suite writes itself (e.g. MPIJob workers).

        Returns:
            ``{"resources": {"limits": {name: qty}, "requests": {name: qty}},
            "annotations": {...}, "labels": {...}, "env": [{"name", "value"}...],
            "tolerations": [k8s toleration dicts], "nodeSelector": {...}}``; quantities are
            strings; extended resources have requests == limits (Kubernetes requires it).
            HAMi gets its full form here: ``nvidia.com/gpu`` + ``nvidia.com/gpumem`` (MiB)
            + ``nvidia.com/gpucores`` (percent). Empty containers for ``none``.
        """
        limits: dict[str, str] = {}
        if self.resource_name:
            limits[self.resource_name] = str(self.resource_count)
        if self.kind == "hami":
            if self.memory_mib:
                limits[HAMI_MEM_RESOURCE] = str(self.memory_mib)
            if self.cores:
                limits[HAMI_CORES_RESOURCE] = str(self.cores)
        return {
            "resources": {"limits": dict(limits), "requests": dict(limits)},
            "annotations": self.annotations(),
            "labels": self.labels(),
            "env": [{"name": k, "value": v} for k, v in self.env().items()],
            "tolerations": self.tolerations(),
            "nodeSelector": self.node_selector(),
        }

    def to_text(self) -> str:
        """The canonical text form; ``parse(r.to_text()) == r``."""
        k = self.kind
        if k == "none":
            return "none"
        head = {"gpu": self.count, "shared": self.count, "hami": self.count,
                "mig": self.profile, "fraction": _num(self.fraction),
                "gpu-memory": self.memory_mib, "metagpu": self.units}[k]
        opts = []
        if k == "mig" and self.model:
            opts.append(f"model={self.model}")
        if self.product:
            opts.append(f"product={self.product}")
        if k == "shared":
            if self.replicas:
                opts.append(f"replicas={self.replicas}")
            if self.strategy:
                opts.append(f"strategy={self.strategy}")
            if self.renamed:
                opts.append("renamed=true")
        if k in ("fraction", "gpu-memory") and self.queue:
            opts.append(f"queue={self.queue}")
            if self.queue_label != DEFAULT_QUEUE_LABEL:
                opts.append(f"queue-label={self.queue_label}")
        if k == "hami":
            if self.memory_mib:
                opts.append(f"mem={self.memory_mib}")
            if self.cores:
                opts.append(f"cores={self.cores}")
        return ",".join([f"{k}:{head}", *opts])

    def __str__(self) -> str:
        return self.to_text()

    def describe(self) -> dict:
        """Plain dict for logs and metrics (text, kind, resource, count, share, memory_mib)."""
        return {"request": self.to_text(), "kind": self.kind, "resource": self.resource_name,
                "count": self.resource_count, "share": self.share,
                "memory_mib": self.memory_mib, "gpus_per_pod": self.gpus_per_pod}


def _num(x: float) -> str:
    """Shortest exact decimal text of a share (1.0 -> '1', 0.25 -> '0.25'); round-trips."""
    return repr(float(x)) if float(x) != int(x) else str(int(x))


def _int(kind: str, what: str, text: str, lo: int = 0, hi: int | None = None) -> int:
    t = text.strip()
    if not _INT.match(t) or int(t) < lo or (hi is not None and int(t) > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        hint = ""
        if kind in ("gpu", "shared", "hami") and what == "count":
            hint = ("; for part of a GPU use 'fraction:F' (0<F<=1), 'gpu-memory:MiB', "
                    "'metagpu:UNITS' or 'mig:PROFILE'")
        raise ValueError(f"{kind}: {what} must be an integer {rng}, got {text!r}{hint}; "
                         f"{ACCEPTED}")
    return int(t)


def parse(text: str | GpuRequest) -> GpuRequest:
    """Parse the compact text form (see the module docstring); a GpuRequest passes through.

    Examples: ``gpu:1``, ``gpu:2,product=NVIDIA-H100-80GB-HBM3``, ``mig:1g.10gb``,
    ``mig:3g.40gb,model=H100-80GB``, ``shared:1``, ``fraction:0.5``, ``gpu-memory:8192``,
    ``metagpu:25``, ``hami:1,mem=8000,cores=30``, ``none``.

    Raises:
        ValueError: naming the accepted values, for an unknown kind or option, a fraction
            not in (0, 1], a non-integer or negative count (``gpu:1.5``, ``gpu:-1``), an
            unknown MIG profile or one the model lacks, MetaGPU units outside 1..100.
    """
    if isinstance(text, GpuRequest):
        return text
    if not isinstance(text, str):
        raise TypeError(f"GPU request must be text, got {type(text).__name__}; {ACCEPTED}")
    t = text.strip()
    if t.lower() in ("", "none", "cpu"):
        return GpuRequest()
    head, *rest = [p.strip() for p in t.split(",")]
    kind, sep, value = head.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS or kind == "none" or not sep:
        raise ValueError(f"invalid GPU request {text!r}; {ACCEPTED}")
    opts: dict[str, str] = {}
    for kv in rest:
        key, eq, val = kv.partition("=")
        key = key.strip().lower()
        if not eq or key not in _OPTIONS[kind]:
            allowed = ", ".join(sorted(_OPTIONS[kind])) or "none"
            raise ValueError(f"invalid option {kv!r} for {kind!r} in {text!r}; "
                             f"options accepted for {kind}: {allowed}")
        opts[key] = val.strip()
    value = value.strip()
    product = opts.get("product", "")
    if kind == "gpu":
        n = _int(kind, "count", value)
        return GpuRequest(kind="gpu", count=n, product=product) if n else GpuRequest()
    if kind == "mig":
        return GpuRequest(kind="mig", count=1, profile=value, model=opts.get("model", ""),
                          product=product)
    if kind == "shared":
        renamed = opts.get("renamed", "false").lower()
        if renamed not in ("true", "false"):
            raise ValueError(f"shared: renamed must be true or false, got {renamed!r}")
        return GpuRequest(kind="shared", count=_int(kind, "count", value, lo=1),
                          product=product,
                          replicas=_int(kind, "replicas", opts["replicas"], lo=1)
                          if "replicas" in opts else 0,
                          strategy=opts.get("strategy", ""), renamed=renamed == "true")
    if kind == "fraction":
        try:
            f = float(value)
        except ValueError:
            f = float("nan")
        if not (math.isfinite(f) and 0.0 < f <= 1.0):
            raise ValueError(f"fraction must be a number with 0 < F <= 1, got {value!r}; "
                             f"for whole GPUs use 'gpu:N'; {ACCEPTED}")
        return GpuRequest(kind="fraction", fraction=f, queue=opts.get("queue", ""),
                          queue_label=opts.get("queue-label", DEFAULT_QUEUE_LABEL))
    if kind == "gpu-memory":
        return GpuRequest(kind="gpu-memory", memory_mib=_int(kind, "MiB", value, lo=1),
                          queue=opts.get("queue", ""),
                          queue_label=opts.get("queue-label", DEFAULT_QUEUE_LABEL))
    if kind == "metagpu":
        return GpuRequest(kind="metagpu",
                          units=_int(kind, "units", value, lo=1, hi=METAGPU_UNITS_PER_GPU))
    # hami
    return GpuRequest(kind="hami", count=_int(kind, "count", value, lo=1), product=product,
                      memory_mib=_int(kind, "mem (MiB)", opts["mem"], lo=1) if "mem" in opts
                      else 0,
                      cores=_int(kind, "cores (percent)", opts["cores"], lo=1, hi=100)
                      if "cores" in opts else 0)
