"""``shared:N``: N time-slicing or MPS replicas of a GPU (k8s-device-plugin ``sharing``
config): ``nvidia.com/gpu: N``, or ``nvidia.com/gpu.shared`` with ``renameByDefault``;
``strategy=`` selects nodes by the GFD label ``nvidia.com/gpu.sharing-strategy``."""

from dataclasses import dataclass

from kfp_gpu.gpu.kinds.base import Kind, parse_int
from kfp_gpu.gpu.kinds.whole import product_option, require_count
from kfp_gpu.gpu.names import (
    GPU_RESOURCE,
    PRODUCT_LABEL,
    SHARED_RESOURCE,
    SHARING_STRATEGY_LABEL,
)

STRATEGIES = ("time-slicing", "mps")
#: GFD's product-label suffix for shared GPUs without a renamed resource.
SHARED_SUFFIX = "-SHARED"


@dataclass(frozen=True)
class Sharing:
    """The device plugin's sharing config as the request knows it.

    Attributes:
        replicas: replicas per GPU in the plugin's config (0 = unknown); the memory share of
            ``shared:N`` is N/replicas.
        strategy: ``time-slicing`` or ``mps`` ("" = no node selector).
        renamed: request ``nvidia.com/gpu.shared`` (``renameByDefault: true``).
        allow_multiple: the cluster's time-slicing config leaves
            ``failRequestsGreaterThanOne`` false, so ``shared:N`` with N > 1 is admitted
            (MPS always refuses it).
        interval: ``dra`` time-slicing: the driver's ``TimeSliceInterval`` (``Default``,
            ``Short``, ``Medium``, ``Long``; "" = the driver's default).
        threads: ``dra`` MPS: ``defaultActiveThreadPercentage`` 1..100 (0 = not given).
        pinned_mib: ``dra`` MPS: ``defaultPinnedDeviceMemoryLimit`` in MiB (0 = not given).
    """

    replicas: int = 0
    strategy: str = ""
    renamed: bool = False
    allow_multiple: bool = False
    interval: str = ""
    threads: int = 0
    pinned_mib: int = 0


def _bool(opts: dict[str, str], key: str) -> bool:
    value = opts.get(key, "false").lower()
    if value not in ("true", "false"):
        raise ValueError(f"shared: {key} must be true or false, got {value!r}")
    return value == "true"


class SharedReplicas(Kind):
    name = "shared"
    options = frozenset({"product", "replicas", "strategy", "renamed", "allow-multiple"})
    count_parameter = True

    def parse(self, value, opts):
        replicas = (parse_int(self.name, "replicas", opts["replicas"], lo=1)
                    if "replicas" in opts else 0)
        return {"kind": "shared", "count": parse_int(self.name, "count", value, lo=1),
                "product": opts.get("product", ""),
                "sharing": Sharing(replicas, opts.get("strategy", ""), _bool(opts, "renamed"),
                                   _bool(opts, "allow-multiple"))}

    def validate(self, r):
        require_count(r)
        s = r.sharing
        if s.replicas < 0:
            raise ValueError(f"shared: replicas must be an integer >= 1, got {s.replicas}")
        if s.replicas and r.count > s.replicas:
            raise ValueError(f"shared: {r.count} replicas asked but the plugin makes only "
                             f"{s.replicas} per GPU; use gpu:N for whole GPUs")
        if isinstance(r.count, int) and r.count > 1 and (
                not s.allow_multiple or s.strategy == "mps"):
            # manifests/device-plugin/time-slicing.yaml sets failRequestsGreaterThanOne;
            # MPS always fails such requests (NVIDIA/k8s-device-plugin README, "Shared Access
            # to GPUs": with failRequestsGreaterThanOne a request for more than one shared
            # replica fails at admission, since it would not give more GPU access anyway).
            raise ValueError(f"shared:{r.count}: the device plugin refuses more than one "
                             "time-slicing/MPS replica per container "
                             "(failRequestsGreaterThanOne, set in this project's time-slicing "
                             "config and implied by MPS; k8s-device-plugin internal/rm/rm.go "
                             "ValidateRequest); use shared:1, or gpu:N for whole GPUs; a "
                             "time-slicing config without it: add allow-multiple=true")
        if s.strategy not in ("", *STRATEGIES):
            raise ValueError(f"shared: strategy must be 'time-slicing' or 'mps', "
                             f"got {s.strategy!r}")

    def resource(self, r):
        return (SHARED_RESOURCE if r.sharing.renamed else GPU_RESOURCE), r.count

    def share(self, r):
        return r.count / r.sharing.replicas if r.sharing.replicas else float(r.count)

    def gpus_per_pod(self, r):
        return r.count

    def node_selector(self, r):
        """The sharing-strategy label, and the product label with GFD's ``-SHARED`` suffix.

        GPU Feature Discovery labels the product of a node whose GPUs are shared (replicas
        > 1) without renamed resources ``<product>-SHARED`` (NVIDIA/k8s-device-plugin
        internal/lm/resource.go ``getProductName``: ``isShared() && !isRenamed()``); with
        ``renamed=true`` the product keeps its name.
        """
        out = {}
        if r.product and not r.sharing.renamed and not r.product.endswith(SHARED_SUFFIX):
            out[PRODUCT_LABEL] = r.product + SHARED_SUFFIX
        if r.sharing.strategy:
            out[SHARING_STRATEGY_LABEL] = r.sharing.strategy
        return out

    def text(self, r):
        s = r.sharing
        opts = product_option(r)
        if s.replicas:
            opts.append(f"replicas={s.replicas}")
        if s.strategy:
            opts.append(f"strategy={s.strategy}")
        if s.renamed:
            opts.append("renamed=true")
        if s.allow_multiple:
            opts.append("allow-multiple=true")
        return str(r.count), opts


KIND = SharedReplicas()
