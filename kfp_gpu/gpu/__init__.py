"""GPU requests: the typed request model and what it renders to.

- :mod:`kfp_gpu.gpu.request`: parse/validate the text form (``gpu:1``, ``mig:1g.10gb``,
  ``fraction:0.5``, ...) into a :class:`GpuRequest`.
- :mod:`kfp_gpu.gpu.kinds`: one module per request kind (none, whole GPUs, MIG, shared
  time-slicing/MPS replicas, KAI/Run:ai fraction and gpu-memory, MetaGPU, HAMi, and
  ``dra``: Dynamic Resource Allocation on NVIDIA's DRA driver, alpha upstream).
- :mod:`kfp_gpu.gpu.claim`: a ``dra`` request as a ResourceClaimTemplate (resource.k8s.io/v1)
  and the pod's claim references.
- :mod:`kfp_gpu.gpu.render`: a request onto a KFP task, or into a pod-spec fragment.
- :mod:`kfp_gpu.gpu.names`: the resource names, labels, annotations and environment
  variables written, with their upstream sources.
- :mod:`kfp_gpu.gpu.mig`: MIG profile tables per GPU model.
- :mod:`kfp_gpu.gpu.memory_cap`: the runtime side, capping TensorFlow's GPU memory to the
  share the request told the container.

The request model's public names are re-exported here (``from kfp_gpu import gpu;
gpu.parse("gpu:1")``).
"""

from kfp_gpu.gpu.names import (
    DEFAULT_QUEUE_LABEL,
    FRACTION_ANNOTATION,
    GPU_RESOURCE,
    GPU_TOLERATION_KEY,
    HAMI_CORES_RESOURCE,
    HAMI_MEM_RESOURCE,
    KIND_ENV,
    MEMORY_ANNOTATION,
    MEMORY_ENV,
    METAGPU_RESOURCE,
    METAGPU_UNITS_PER_GPU,
    PRODUCT_LABEL,
    SHARE_ENV,
    SHARED_RESOURCE,
    SHARING_STRATEGY_LABEL,
)
from kfp_gpu.gpu.render import KfpCannotExpressWarning
from kfp_gpu.gpu.request import ACCEPTED, KINDS, GpuRequest, KaiQueue, Sharing, parse

__all__ = [
    "ACCEPTED",
    "DEFAULT_QUEUE_LABEL",
    "FRACTION_ANNOTATION",
    "GPU_RESOURCE",
    "GPU_TOLERATION_KEY",
    "HAMI_CORES_RESOURCE",
    "HAMI_MEM_RESOURCE",
    "KINDS",
    "KIND_ENV",
    "MEMORY_ANNOTATION",
    "MEMORY_ENV",
    "METAGPU_RESOURCE",
    "METAGPU_UNITS_PER_GPU",
    "PRODUCT_LABEL",
    "SHARED_RESOURCE",
    "SHARE_ENV",
    "SHARING_STRATEGY_LABEL",
    "GpuRequest",
    "KaiQueue",
    "KfpCannotExpressWarning",
    "Sharing",
    "parse",
]
