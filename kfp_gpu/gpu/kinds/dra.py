"""``dra:gpu=N`` / ``dra:mig=PROFILE``: GPUs through Dynamic Resource Allocation
(``resource.k8s.io/v1``, GA in Kubernetes 1.34) on NVIDIA's DRA driver. Alpha upstream: the
driver is at v0.x and its sharing settings sit behind its alpha feature gates.

The request becomes a ResourceClaimTemplate (:mod:`kfp_gpu.gpu.claim`) that pod templates
the suite writes itself reference (MPIJob Workers, TrainJob nodes); there is no extended
resource and no accelerator limit. Text form::

    dra:gpu=N | dra:mig=PROFILE
        [,product=TEXT]          CEL: productName contains TEXT (NVML's name, "NVIDIA H100 80GB HBM3")
        [,memory>=QUANTITY]      CEL: capacity memory >= QUANTITY (e.g. 80Gi; Ki/Mi/Gi/Ti, k/M/G/T)
        [,model=MODEL]           mig: check PROFILE against that GPU model's MIG table
        [,sharing=time-slicing[,interval=Default|Short|Medium|Long]]   gpu only for interval
        [,sharing=mps[,threads=1..100][,pinned=QUANTITY]]
    dra:gpu=N,class=DEVICECLASS  another DRA driver's DeviceClass (e.g. gpu.example.com)

``class=DEVICECLASS`` targets another DRA driver: the claim's ``deviceClassName`` becomes
DEVICECLASS (a Kubernetes object name: a DNS subdomain, lowercase, at most 253 characters)
instead of NVIDIA's ``gpu.nvidia.com``. Such a request is ``dra:gpu=N`` alone: ``mig=``,
``product=``, ``memory>=``, ``model=`` and ``sharing=`` read NVIDIA DRA driver attributes
(domain ``gpu.nvidia.com``) or pass its opaque ``GpuConfig`` / ``MigDeviceConfig``, which
another driver does not publish or understand, so they are refused with ``class=``.
``class=gpu.nvidia.com`` is the same as no class (every option allowed), as is
``class=mig.nvidia.com`` with ``dra:mig=``. Example: the reference driver
kubernetes-sigs/dra-example-driver @v0.2.1 publishes DeviceClass ``gpu.example.com``
(deployments/helm/dra-example-driver/templates/deviceclass.yaml, CEL ``device.driver ==
'gpu.example.com'``; driver name pkg/consts/consts.go ``DriverName``), so
``dra:gpu=1,class=gpu.example.com`` asks for one of its GPUs.

Upstream names (kubernetes-sigs/dra-driver-nvidia-gpu @v0.4.1, see
:mod:`kfp_gpu.gpu.names`): driver and attribute domain ``gpu.nvidia.com``; DeviceClasses
``gpu.nvidia.com`` (``type == 'gpu'``) and ``mig.nvidia.com`` (``type == 'mig'``); the
attributes ``productName``, ``profile`` and capacity ``memory`` of
cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go; sharing as the opaque ``GpuConfig`` /
``MigDeviceConfig`` (api/nvidia.com/resource/v1beta1 gpuconfig.go, migconfig.go,
sharing.go): ``TimeSlicing`` with ``timeSlicingConfig.interval`` (GPUs only: a MIG device's
``MigDeviceSharing`` has no time-slicing config), ``MPS`` with
``mpsConfig.defaultActiveThreadPercentage`` (0..100 upstream; 0 would starve the
clients, so 1..100 here) and ``defaultPinnedDeviceMemoryLimit``.

The memory cap follows the claim: a MIG device caps at the profile's memory minus the
runtime's headroom (:mod:`kfp_gpu.gpu.memory_cap`), MPS at its pinned limit; a shared
device without a limit gets memory growth (``KFP_GPU_KIND=dra-shared``).
"""

from __future__ import annotations

import math
import re

from kfp_gpu.gpu import mig
from kfp_gpu.gpu.kinds.base import Kind, num, parse_int
from kfp_gpu.gpu.kinds.shared import Sharing
from kfp_gpu.gpu.names import (
    DRA_GPU_CLASS,
    DRA_INTERVALS,
    DRA_MIG_CLASS,
    KIND_ENV,
    MEMORY_ENV,
    SHARE_ENV,
)

#: One line naming what ``dra`` accepts (appended to its errors).
DRA_ACCEPTED = ("accepted: 'dra:gpu=N' or 'dra:mig=PROFILE' [,product=TEXT] [,memory>=QTY] "
                "[,model=M (mig)] [,sharing=time-slicing[,interval=Default|Short|Medium|"
                "Long]] [,sharing=mps[,threads=1..100][,pinned=QTY]]; QTY like 80Gi or "
                "10240Mi; or 'dra:gpu=N[,class=DEVICECLASS]' for another DRA driver's "
                "DeviceClass (a Kubernetes object name, e.g. gpu.example.com; NVIDIA's "
                "options do not apply); DRA is alpha upstream (NVIDIA DRA driver v0.x)")
#: A Kubernetes object name (DNS-1123 subdomain, apimachinery validation.IsDNS1123Subdomain).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: NVIDIA's own DeviceClasses: ``class=`` naming one is the same as no class.
_NVIDIA_CLASSES = (DRA_GPU_CLASS, DRA_MIG_CLASS)
_QTY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
_UNIT = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
         "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
#: What ``product=`` may contain: it is quoted into a CEL string literal.
_PRODUCT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+-]*$")
_HATCH = " (a profile the tables do not know: add 'unchecked=true')"
_SHARING = {"time-slicing": "time-slicing", "timeslicing": "time-slicing", "mps": "mps"}


def _fail(msg: str) -> ValueError:
    return ValueError(f"dra: {msg}; {DRA_ACCEPTED}")


def quantity_mib(what: str, text: str, *, round_up: bool) -> int:
    """MiB of a Kubernetes quantity (``80Gi``, ``40G``, ``10240Mi``; apimachinery
    resource.Quantity suffixes), rounded up (a minimum) or down (a limit).

    Raises:
        ValueError: not a quantity, or less than 1 MiB.
    """
    m = _QTY.match(text.strip())
    if not m:
        raise _fail(f"{what} must be a quantity such as 80Gi or 10240Mi, got {text!r}")
    size = float(m.group(1)) * _UNIT[m.group(2)] / 2**20
    mib = math.ceil(size) if round_up else math.floor(size)
    if mib < 1:
        raise _fail(f"{what} must be at least 1Mi, got {text!r}")
    return mib


def mib_text(mib: int) -> str:
    """Canonical quantity text of ``mib`` MiB: ``80Gi`` when whole GiB, else ``NMi``."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def profile_memory_mib(profile: str, model: str = "") -> int:
    """MiB of a MIG profile's memory, from the nominal GB of its name in the MIG tables
    (``1g.10gb`` -> 10 GB = 9536 MiB, floor). NVML reports a little more (9984 MiB for
    1g.10gb on H100), so the cap stays inside the device."""
    return mig.lookup(profile, model)[1].memory_gb * 10**9 // 2**20


class DraDevices(Kind):
    name = "dra"
    options = frozenset({"product", "memory>", "model", "sharing", "interval", "threads",
                         "pinned", "class"})
    #: ``product=`` is a CEL selector on the device, not the GFD node label.
    product_is_label = False

    def parse(self, value, opts):
        device, eq, arg = value.partition("=")
        device = device.strip().lower()
        if not eq or device not in ("gpu", "mig"):
            raise _fail(f"'dra:{value}' names no device")
        count = parse_int(self.name, "gpu count", arg, lo=1) if device == "gpu" else 1
        strategy = opts.get("sharing", "").lower()
        if strategy and strategy not in _SHARING:
            raise _fail(f"sharing must be time-slicing or mps, got {opts['sharing']!r}")
        interval = opts.get("interval", "")
        sharing = Sharing(
            strategy=_SHARING.get(strategy, ""),
            interval=next((i for i in DRA_INTERVALS if i.lower() == interval.lower()),
                          interval),
            threads=(parse_int(self.name, "threads (percent)", opts["threads"], lo=1, hi=100)
                     if "threads" in opts else 0),
            pinned_mib=(quantity_mib("pinned", opts["pinned"], round_up=False)
                        if "pinned" in opts else 0))
        return {"kind": "dra", "count": count, "profile": arg.strip() if device == "mig" else "",
                "model": opts.get("model", ""), "product": opts.get("product", ""),
                "device_class": opts.get("class", ""),
                "memory_mib": (quantity_mib("memory>=", opts["memory>"], round_up=True)
                               if "memory>" in opts else 0),
                "sharing": sharing}

    def validate(self, r):
        if r.count < 1:
            raise _fail("the gpu count must be an integer >= 1")
        _validate_class(r)
        if r.profile:
            if r.count != 1:
                raise _fail("exactly one MIG device per container")
            if r.profile.lower().endswith(mig.SHARED_SUFFIX):
                raise _fail(f"'{r.profile}' is a device-plugin resource name; a DRA MIG "
                            "device is its profile (e.g. 1g.10gb)")
            try:
                mig.lookup(r.profile, r.model)
            except ValueError as e:  # no unchecked=true here: the slice's memory is needed
                raise ValueError("dra: " + str(e).replace(_HATCH, "")) from None
        elif r.model:
            raise _fail("model= checks a MIG profile; use product= to select GPUs")
        if r.product and not _PRODUCT.match(r.product):
            raise _fail(f"product must be letters, digits, spaces and ._+-, got {r.product!r}")
        if r.memory_mib < 0:
            raise _fail(f"memory>= must be a quantity, got {r.memory_mib!r}")
        _validate_sharing(r)

    def normalized(self, r):
        out = {"device_class": ""} if r.device_class in _NVIDIA_CLASSES else {}
        if not r.profile:
            return out
        model, _ = mig.lookup(r.profile, r.model)
        return {**out, "profile": mig.canonical(r.profile), "model": model if r.model else ""}

    def share(self, r):
        return 1.0 if r.profile else float(r.count)

    def physical_share(self, r):
        return mig.lookup(r.profile, r.model)[1].memory_fraction if r.profile else float(r.count)

    def gpus_per_pod(self, r):
        return r.count

    def env(self, r):
        """``KFP_GPU_KIND`` ``dra`` (``dra-shared`` with sharing), the share, and the cap
        in MiB: the MIG profile's memory, or MPS's pinned limit (the smaller of both)."""
        caps = [c for c in (profile_memory_mib(r.profile, r.model) if r.profile else 0,
                            r.sharing.pinned_mib) if c]
        out = {KIND_ENV: "dra-shared" if r.sharing.strategy else "dra",
               SHARE_ENV: num(self.share(r))}
        if caps:
            out[MEMORY_ENV] = str(min(caps))
        return out

    def text(self, r):
        s = r.sharing
        opts = [f"class={r.device_class}"] if r.device_class else []
        opts += [f"product={r.product}"] if r.product else []
        opts += [f"memory>={mib_text(r.memory_mib)}"] if r.memory_mib else []
        opts += [f"model={r.model}"] if r.model else []
        opts += [f"sharing={s.strategy}"] if s.strategy else []
        opts += [f"interval={s.interval}"] if s.interval else []
        opts += [f"threads={s.threads}"] if s.threads else []
        opts += [f"pinned={mib_text(s.pinned_mib)}"] if s.pinned_mib else []
        return (f"mig={r.profile}" if r.profile else f"gpu={r.count}"), opts


def _validate_class(r) -> None:
    """``class=``: a Kubernetes object name; with another driver's class, none of the
    options that read NVIDIA DRA driver attributes or pass its opaque configs."""
    c = r.device_class
    if not c:
        return
    if not isinstance(c, str) or len(c) > 253 or not _DNS_SUBDOMAIN.match(c):
        raise _fail(f"class must be a DeviceClass name (a Kubernetes object name: lowercase "
                    f"letters, digits, '-' and '.', starting and ending with a letter or "
                    f"digit, at most 253 characters), got {c!r}")
    if c == DRA_MIG_CLASS and not r.profile:
        raise _fail(f"class={DRA_MIG_CLASS} is NVIDIA's MIG DeviceClass: ask for a MIG "
                    "device with 'dra:mig=PROFILE'")
    if c in _NVIDIA_CLASSES:
        return
    s = r.sharing
    nvidia = [name for name, given in (
        ("mig=", r.profile), ("product=", r.product), ("memory>=", r.memory_mib),
        ("model=", r.model), ("sharing=", s.strategy), ("interval=", s.interval),
        ("threads=", s.threads), ("pinned=", s.pinned_mib)) if given]
    if nvidia:
        raise _fail(f"{', '.join(nvidia)} with class={c}: those are NVIDIA DRA driver "
                    f"attributes (domain {DRA_GPU_CLASS}) or its opaque sharing config, which "
                    f"another driver does not publish; with class= ask for "
                    f"'dra:gpu=N,class={c}' alone")


def _validate_sharing(r) -> None:
    s = r.sharing
    if s.replicas or s.renamed or s.allow_multiple:
        raise _fail("replicas/renamed/allow-multiple are device-plugin settings")
    if s.strategy not in ("", "time-slicing", "mps"):
        raise _fail(f"sharing must be time-slicing or mps, got {s.strategy!r}")
    if s.interval and s.strategy != "time-slicing":
        raise _fail("interval= goes with sharing=time-slicing")
    if s.interval and r.profile:
        raise _fail("interval= is for whole GPUs: a MIG device's sharing config "
                    "(MigDeviceSharing) has no time-slicing interval")
    if s.interval and s.interval not in DRA_INTERVALS:
        raise _fail(f"interval must be one of {', '.join(DRA_INTERVALS)}, got {s.interval!r}")
    if (s.threads or s.pinned_mib) and s.strategy != "mps":
        raise _fail("threads= and pinned= go with sharing=mps")
    if not 0 <= s.threads <= 100:
        raise _fail(f"threads must be a percent 1..100, got {s.threads!r}")


KIND = DraDevices()
