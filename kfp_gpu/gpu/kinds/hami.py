"""``hami:N[,mem=MiB][,cores=PERCENT]``: HAMi (Project-HAMi) vGPUs: ``nvidia.com/gpu: N``
plus ``nvidia.com/gpumem`` (MiB) and ``nvidia.com/gpucores`` (percent). KFP tasks carry one
resource, so the last two are only written in pod templates the suite writes itself
(MPIJob Workers); HAMi's own limit wins over the runtime cap."""

from kfp_gpu.gpu.kinds.base import Kind, parse_int
from kfp_gpu.gpu.kinds.whole import product_option, require_count
from kfp_gpu.gpu.names import GPU_RESOURCE, HAMI_CORES_RESOURCE, HAMI_MEM_RESOURCE


class HamiVgpus(Kind):
    name = "hami"
    options = frozenset({"product", "mem", "cores"})
    count_parameter = True

    def parse(self, value, opts):
        return {"kind": "hami", "count": parse_int(self.name, "count", value, lo=1),
                "product": opts.get("product", ""),
                "memory_mib": (parse_int(self.name, "mem (MiB)", opts["mem"], lo=1)
                               if "mem" in opts else 0),
                "cores": (parse_int(self.name, "cores (percent)", opts["cores"], lo=1, hi=100)
                          if "cores" in opts else 0)}

    def validate(self, r):
        require_count(r)
        if r.memory_mib < 0:
            raise ValueError(f"hami: mem (MiB) must be an integer >= 1, got {r.memory_mib!r}")
        if not (0 <= r.cores <= 100):
            raise ValueError(f"hami: cores must be an integer percent 1..100, got {r.cores!r}")

    def resource(self, r):
        return GPU_RESOURCE, r.count

    def extra_limits(self, r):
        out = {}
        if r.memory_mib:
            out[HAMI_MEM_RESOURCE] = str(r.memory_mib)
        if r.cores:
            out[HAMI_CORES_RESOURCE] = str(r.cores)
        return out

    def share(self, r):
        return float(r.count)  # ``mem`` caps in MiB (MEMORY_ENV)

    def gpus_per_pod(self, r):
        return r.count

    def text(self, r):
        opts = product_option(r)
        if r.memory_mib:
            opts.append(f"mem={r.memory_mib}")
        if r.cores:
            opts.append(f"cores={r.cores}")
        return str(r.count), opts


KIND = HamiVgpus()
