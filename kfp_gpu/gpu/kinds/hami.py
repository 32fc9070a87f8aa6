"""``hami:N[,mem=MiB][,cores=PERCENT]``: HAMi (Project-HAMi) vGPUs: ``nvidia.com/gpu: N``
plus ``nvidia.com/gpumem`` (MiB) and ``nvidia.com/gpucores`` (percent) in pod templates the
suite writes itself (MPIJob Workers); HAMi's own limit wins over the runtime cap.

A KFP task carries ONE resource. ``hami:1,mem=M`` then asks for ``nvidia.com/gpumem: M``
alone: HAMi's webhook adds ``nvidia.com/gpu: 1`` to a container that has gpumem but no gpu
(Project-HAMi/HAMi pkg/device/nvidia/device.go ``mutateContainerResource``,
``DefaultGPUNum``, chart default 1; since HAMi v2.4.1). Everything else keeps
``nvidia.com/gpu: N``, for which HAMi gives the WHOLE device memory (device.go
``GenerateResourceRequests``: no gpumem -> ``mempnum = 100`` when ``defaultMemory`` is 0,
the chart default); the compiler warns.
"""

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

    def task_resource(self, r):
        if r.count == 1 and r.memory_mib and not r.cores:
            return HAMI_MEM_RESOURCE, r.memory_mib
        return self.resource(r)

    def task_warning(self, r, count_parameter=False):
        if not count_parameter and self.task_resource(r)[0] == HAMI_MEM_RESOURCE:
            return ""
        lost = [x for x, on in (("mem", r.memory_mib), ("cores", r.cores)) if on]
        what = (f"{'/'.join(lost)} cannot be carried: a KFP task has one accelerator "
                f"resource and hami:{r.count}" + (" with a count parameter" if count_parameter
                                                  else "") + " keeps nvidia.com/gpu"
                if lost else "bare nvidia.com/gpu")
        return (f"hami on a KFP task ({what}): HAMi's default memory for a bare nvidia.com/gpu "
                "is the whole device (Project-HAMi/HAMi pkg/device/nvidia/device.go: mempnum = "
                "100 when the scheduler-wide defaultMemory is 0, the chart default), so the "
                "device is not split. Use 'hami:1,mem=MiB' (the task then asks for "
                "nvidia.com/gpumem alone; HAMi >= v2.4.1 adds nvidia.com/gpu: 1), a pod "
                "template the suite writes (GpuRequest.pod_fragment(), MPIJob Workers), or "
                "HAMi's scheduler-wide defaultMemory (device ConfigMap). The runtime "
                "TensorFlow cap still applies mem.")

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
