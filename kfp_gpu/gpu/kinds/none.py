"""``none``: CPU only; the pod gets nothing GPU-related."""

from kfp_gpu.gpu.kinds.base import Kind


class NoGpu(Kind):
    name = "none"


KIND = NoGpu()
