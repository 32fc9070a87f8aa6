"""``metagpu:U``: U units of a GPU from the cnvrg MetaGPU device plugin
(``cnvrg.io/metagpu: U``; 100 units = 1 GPU with the plugin's ``metaGpus`` setting this
suite uses). MetaGPU enforces the memory share: the runtime cap keeps jobs inside it."""

from kfp_gpu.gpu.kinds.base import Kind, parse_int
from kfp_gpu.gpu.names import METAGPU_RESOURCE, METAGPU_UNITS_PER_GPU


class MetaGpuUnits(Kind):
    name = "metagpu"

    def parse(self, value, opts):
        return {"kind": "metagpu",
                "units": parse_int(self.name, "units", value, lo=1, hi=METAGPU_UNITS_PER_GPU)}

    def validate(self, r):
        u = r.units
        if not (isinstance(u, int) and not isinstance(u, bool)
                and 1 <= u <= METAGPU_UNITS_PER_GPU):
            raise ValueError(f"metagpu: units must be an integer 1..{METAGPU_UNITS_PER_GPU} "
                             f"({METAGPU_UNITS_PER_GPU} units = 1 GPU), got {u!r}; "
                             "for whole GPUs use 'gpu:N'")

    def resource(self, r):
        return METAGPU_RESOURCE, r.units

    def share(self, r):
        return r.units / METAGPU_UNITS_PER_GPU

    def gpus_per_pod(self, r):
        return 1

    def text(self, r):
        return str(r.units), []


KIND = MetaGpuUnits()
