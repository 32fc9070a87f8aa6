"""``gpu:N``: N whole GPUs, ``nvidia.com/gpu: N`` (NVIDIA k8s-device-plugin), optionally on a
GPU Feature Discovery product (``product=``, label ``nvidia.com/gpu.product``)."""

from kfp_gpu.gpu.kinds.base import Kind, parse_int
from kfp_gpu.gpu.names import GPU_RESOURCE


def product_option(r) -> list[str]:
    """``["product=P"]`` when the request names a GPU product, else ``[]``."""
    return [f"product={r.product}"] if r.product else []


def require_count(r) -> None:
    """Kinds with a device count need at least one device."""
    if r.count < 1:
        raise ValueError(f"{r.kind}: count must be an integer >= 1 (use 'none' for CPU only)")


class WholeGpus(Kind):
    name = "gpu"
    options = frozenset({"product"})
    count_parameter = True

    def parse(self, value, opts):
        n = parse_int(self.name, "count", value)
        # gpu:0 is CPU only: the empty request.
        return {"kind": "gpu", "count": n, "product": opts.get("product", "")} if n else {}

    def validate(self, r):
        require_count(r)

    def resource(self, r):
        return GPU_RESOURCE, r.count

    def share(self, r):
        return float(r.count)

    def gpus_per_pod(self, r):
        return r.count

    def text(self, r):
        return str(r.count), product_option(r)


KIND = WholeGpus()
