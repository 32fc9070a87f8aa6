"""What a GPU request or a compiled pipeline needs from the cluster (pure)."""

from __future__ import annotations

from kfp_gpu import gpu
from kfp_gpu.cluster import kfp_api
from kfp_gpu.cluster.doctor.kueue import compiled_kueue_queues
from kfp_gpu.cluster.doctor.model import Needs


def needs_from_request(request: gpu.GpuRequest, *, mpi: bool = False,
                       source: str = "") -> Needs:
    """Needs of one GPU request (resource names and selector from ``pod_fragment``)."""
    frag = request.pod_fragment()
    # HAMi's gpumem / gpucores are not node resources (its scheduler reads the node
    # registration annotation): they are checked in _fits, not against allocatable.
    res = {k: int(float(v)) for k, v in frag["resources"]["limits"].items()
           if k not in (gpu.HAMI_MEM_RESOURCE, gpu.HAMI_CORES_RESOURCE)}
    return Needs(request=request, resources=res, node_selector=dict(frag["nodeSelector"]),
                 mpi=mpi, source=source or f"--gpu {request.to_text()}",
                 annotations=dict(frag["annotations"]), labels=dict(frag["labels"]),
                 tolerations=list(frag["tolerations"]))


#: Components that create an MPIJob (their ``--function_to_execute``).
MPIJOB_COMPONENTS = ("train_resnet_horovod",)


def _creates_mpijob(container: dict) -> bool:
    """True for an executor that creates an MPIJob: a known MPIJob component (it runs on
    the trainer image) or anything on the kfp-gpu launcher image."""
    args = [str(a) for a in container.get("args") or []]
    fn = args[args.index("--function_to_execute") + 1] \
        if "--function_to_execute" in args[:-1] else ""
    return fn in MPIJOB_COMPONENTS or "kfp-gpu-launcher" in container.get("image", "")


def compiled_runtime_image(pipeline: dict) -> str:
    """The ``runtime_image`` a compiled pipeline's distributed task expects the
    ClusterTrainingRuntime to run: a constant the task passes, else the component's
    compiled default (``kfp-gpu compile --registry`` writes both); "" when none."""
    comps = pipeline.get("components") or {}
    found = ""
    for comp in comps.values():
        params = (comp.get("inputDefinitions") or {}).get("parameters") or {}
        default = (params.get("runtime_image") or {}).get("defaultValue")
        if default:
            found = found or str(default)
        for task in ((comp.get("dag") or {}).get("tasks") or {}).values():
            value = ((task.get("inputs") or {}).get("parameters") or {}).get("runtime_image")
            const = ((value or {}).get("runtimeValue") or {}).get("constant")
            if const:
                return str(const)
    return found


def compiled_worker_gpu(pipeline: dict) -> gpu.GpuRequest | None:
    """The ``worker_gpu`` request a compiled pipeline's distributed task passes as a
    constant (``kfp-gpu compile --gpu`` writes it there for every kind: the Workers'
    request goes to the component as text, not as a task resource), parsed; None when
    there is none or it is empty."""
    dags = [c.get("dag") or {} for c in (pipeline.get("components") or {}).values()]
    for dag in [pipeline.get("root", {}).get("dag") or {}, *dags]:
        for task in (dag.get("tasks") or {}).values():
            value = ((task.get("inputs") or {}).get("parameters") or {}).get("worker_gpu")
            const = ((value or {}).get("runtimeValue") or {}).get("constant")
            if const:
                return gpu.parse(str(const))
    return None


def needs_from_pipeline(spec: dict, request: gpu.GpuRequest | None = None,
                        source: str = "") -> Needs:
    """Needs of a compiled KFP pipeline (IR YAML loaded as dict).

    The accelerator (``resources.accelerator.resourceType`` / ``resourceCount``) of each
    executor and the Kubernetes platform spec (:func:`platform_needs`: node selectors,
    tolerations, pod annotations such as KAI's ``gpu-fraction``, labels such as its queue)
    give the needs; an
    executor of an MPIJob component (``MPIJOB_COMPONENTS``) or on the kfp-gpu launcher
    image means an MPIJob. ``request`` (``--gpu``)
    replaces the pipeline's own GPU settings, as ``kfp-gpu compile --gpu`` would; without
    it a ``worker_gpu`` constant of the distributed task (the Workers' request compiled
    in, :func:`compiled_worker_gpu`) is the request.
    """
    docs = spec if isinstance(spec, list) else [spec]
    pipeline = docs[0]
    executors = pipeline.get("deploymentSpec", {}).get("executors", {})
    mpi = any(_creates_mpijob(e.get("container", {})) for e in executors.values())
    kfp_min = kfp_api.backend_requirements(pipeline)
    runtime_image = compiled_runtime_image(pipeline)
    if request is None:
        request = compiled_worker_gpu(pipeline)
        if request is not None:
            source = source or f"compiled worker_gpu {request.to_text()}"
    if request is not None:
        out = needs_from_request(request, mpi=mpi, source=source)
        out.kfp_min = kfp_min
        out.runtime_image = runtime_image
        out.kueue_queues = compiled_kueue_queues(pipeline)
        return out
    resources: dict[str, int] = {}
    for e in executors.values():
        acc = e.get("container", {}).get("resources", {}).get("accelerator", {})
        rtype = acc.get("resourceType") or acc.get("type")
        text = str(acc.get("resourceCount") or acc.get("count") or 0)
        count = int(text) if text.isdigit() else 1  # a parameter: at least one
        if rtype and count:
            resources[rtype] = max(resources.get(rtype, 0), count)
    platform = platform_needs(docs[1:])
    return Needs(resources=resources, node_selector=platform["node_selector"], mpi=mpi,
                 source=source, kfp_min=kfp_min, runtime_image=runtime_image,
                 kueue_queues=compiled_kueue_queues(pipeline),
                 annotations=platform["annotations"], labels=platform["labels"],
                 tolerations=platform["tolerations"])


def platform_needs(platform_docs: list[dict]) -> dict:
    """What the Kubernetes platform spec of a compiled pipeline puts on the pods, merged over
    its executors (kfp-kubernetes 2.17 ``kubernetes_executor_config.proto``: ``podMetadata``
    ``annotations`` / ``labels``, ``tolerations``, ``nodeSelector.labels``): ``{"annotations",
    "labels", "node_selector": name -> value, "tolerations": [dict]}``. A task with
    ``taskConfigPassthroughs`` hands these to its component (the MPIJob Workers get them,
    components/train_resnet_horovod/run_training.py ``worker_settings``), so they are
    needs either way. Values given by a pipeline parameter (``...FromParameter``) are not
    known here and are left out."""
    out: dict = {"annotations": {}, "labels": {}, "node_selector": {}, "tolerations": []}
    for d in platform_docs:
        k8s = ((d or {}).get("platforms") or {}).get("kubernetes", {})
        for e in (k8s.get("deploymentSpec", {}).get("executors") or {}).values():
            meta = e.get("podMetadata") or {}
            out["annotations"].update(meta.get("annotations") or {})
            out["labels"].update(meta.get("labels") or {})
            out["node_selector"].update((e.get("nodeSelector") or {}).get("labels") or {})
            for tol in e.get("tolerations") or []:
                if tol not in out["tolerations"]:
                    out["tolerations"].append(dict(tol))
    return out
