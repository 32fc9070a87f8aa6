"""Doctor, subject Dynamic Resource Allocation (``dra`` GPU requests; alpha upstream).

What is read (cluster-scoped LISTs of ``resource.k8s.io/v1``, k8s.io/api v0.36.3
resource/v1/types.go): ``deviceclasses`` (a 404 for the list = the API is not served) and
``resourceslices`` of the driver ``gpu.nvidia.com``, whose devices (``spec.devices[]``:
``attributes`` ``type``/``productName``/``profile``, capacity ``memory``; NVIDIA's
cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go, kubernetes-sigs/dra-driver-nvidia-gpu
@v0.4.1) are attached to their Node (``spec.nodeName``) for the fit check.

What is judged:

- a ``dra`` request on a cluster that does not serve ``resource.k8s.io/v1``: a problem --
  the API server drops a pod's ``resourceClaims`` when DRA is off, and the pod then runs
  without a GPU, silently;
- the DeviceClass the request needs (``gpu.nvidia.com`` / ``mig.nvidia.com``, NVIDIA's Helm
  chart, or the request's ``class=``) missing, or (NVIDIA's classes) no node publishing the
  driver's ResourceSlices: a problem;
- a node that has both the device plugin's ``nvidia.com/gpu`` allocatable and the DRA
  driver's devices: a warning -- the two must not run on one node (each would hand out
  the same GPUs);
- a request with sharing: a warning that the driver's ``TimeSlicingSettings`` /
  ``MPSSupport`` feature gates (alpha, off by default: pkg/featuregates/featuregates.go)
  must be on.
"""

from __future__ import annotations

import json

from kfp_gpu import gpu
from kfp_gpu.cluster.doctor.model import ClusterFacts, Needs, Node, Report, api_error
from kfp_gpu.gpu import claim, names


def _device(dev: dict) -> dict:
    """One published device as ``{"name", "type", "profile", "product", "memory_mib"}``."""
    from kubernetes.utils import parse_quantity

    attrs = dev.get("attributes") or {}

    def text(key: str) -> str:
        return str((attrs.get(key) or {}).get("string", ""))

    mem = ((dev.get("capacity") or {}).get(names.DRA_CAPACITY_MEMORY) or {}).get("value")
    try:
        mib = int(parse_quantity(mem) // 2**20) if mem is not None else 0
    except ValueError:
        mib = 0
    return {"name": dev.get("name", ""), "type": text(names.DRA_ATTR_TYPE),
            "profile": text(names.DRA_ATTR_PROFILE), "product": text(names.DRA_ATTR_PRODUCT),
            "memory_mib": mib}


def _list(api_client, plural: str) -> dict:
    from kubernetes import client

    resp = client.CustomObjectsApi(api_client).list_cluster_custom_object(
        names.RESOURCE_GROUP, "v1", plural, _preload_content=False, _request_timeout=30)
    return json.loads(resp.data)


def read_dra(api_client, facts: ClusterFacts) -> None:
    """DeviceClasses and the driver's ResourceSlices into ``facts.dra``
    (:class:`~kfp_gpu.cluster.doctor.model.DraFacts`) and each Node's
    ``dra_devices``; never raises on API errors."""
    from kubernetes.client.exceptions import ApiException

    dra = facts.dra
    try:
        classes = _list(api_client, "deviceclasses")
    except ApiException as e:
        if e.status == 404:
            dra.served = False
        else:
            dra.error = api_error(e)
        return
    dra.served = True
    dra.classes = tuple(sorted((c.get("metadata") or {}).get("name", "")
                               for c in classes.get("items") or []))
    try:
        slices = _list(api_client, "resourceslices").get("items") or []
    except ApiException as e:
        dra.error = api_error(e)
        return
    by_node = {n.name: n for n in facts.nodes}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != names.DRA_DRIVER:
            continue
        dra.slices += 1
        node = by_node.get(spec.get("nodeName") or "")
        if node is not None:
            node.dra_devices.extend(_device(d) for d in spec.get("devices") or [])


def matching_devices(node: Node, req: gpu.GpuRequest) -> int:
    """How many of ``node``'s DRA devices a ``dra`` request's DeviceClass and selectors
    accept (type, MIG profile, product substring, memory at least)."""
    kind = "mig" if req.profile else "gpu"
    return sum(1 for d in node.dra_devices
               if d["type"] == kind and (not req.profile or d["profile"] == req.profile)
               and req.product in d["product"]
               and (not req.memory_mib or d["memory_mib"] >= req.memory_mib))


def summary(node: Node) -> str:
    """``dra: 8 gpu`` / ``dra: 7 mig 1g.10gb`` for the node table ("" without devices)."""
    counts: dict[str, int] = {}
    for d in node.dra_devices:
        key = d["type"] + (f" {d['profile']}" if d["profile"] else "")
        counts[key] = counts.get(key, 0) + 1
    return ("dra: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))) if counts else ""


def dra_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The DRA table and its problems/warnings (see the module docstring)."""
    dra, req = facts.dra, needs.request
    wants = req is not None and req.kind == "dra"
    if (dra.served is None and not dra.error) or (dra.served is False and not wants):
        return  # nothing read, or a cluster without DRA and a request that needs none
    status = ("served" if dra.served else "NOT served") if not dra.error else dra.error
    rows = [(names.RESOURCE_API_VERSION, status)]
    nvidia_classes = (names.DRA_GPU_CLASS, names.DRA_MIG_CLASS)
    extra = (claim.device_class(req),) if wants and req.device_class else ()
    for cls in (*nvidia_classes, *extra):
        rows.append((f"DeviceClass {cls}", "present" if cls in dra.classes else "missing"))
    rows.append((f"ResourceSlices of {names.DRA_DRIVER}", str(dra.slices)))
    rep.sections.append(("Dynamic Resource Allocation (NVIDIA DRA driver, alpha)",
                         ("what", "status"), rows))
    both = sorted(n.name for n in facts.nodes
                  if n.dra_devices and n.allocatable.get(gpu.GPU_RESOURCE, 0) > 0)
    if both:
        rep.warnings.append(f"node(s) {', '.join(both)} run both NVIDIA's device plugin "
                            f"({gpu.GPU_RESOURCE} allocatable) and its DRA driver: run one "
                            "of them per node, or both hand out the same GPUs")
    if not wants:
        return
    target = rep.problems
    if dra.error:
        target.append(f"cannot read {names.RESOURCE_API_VERSION}: {dra.error}")
    elif not dra.served:
        target.append(f"'{req.to_text()}' needs {names.RESOURCE_API_VERSION} (Dynamic Resource "
                      "Allocation, Kubernetes >= 1.34), which this cluster does not serve: "
                      "its API server drops a pod's resourceClaims and the pod runs WITHOUT a "
                      "GPU, silently")
    else:
        cls = claim.device_class(req)
        nvidia = cls in nvidia_classes
        if cls not in dra.classes:
            target.append(f"DeviceClass {cls} is missing: install " + (
                "NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu Helm chart)"
                if nvidia else "the DRA driver that provides it"))
        if nvidia and not dra.slices:
            target.append(f"no node publishes ResourceSlices of {names.DRA_DRIVER}: is "
                          "NVIDIA's DRA driver's kubelet plugin running?")
    if req.sharing.strategy:
        gate = "MPSSupport" if req.sharing.strategy == "mps" else "TimeSlicingSettings"
        rep.warnings.append(f"'{req.to_text()}' needs the DRA driver's alpha feature gate "
                            f"{gate} (off by default); without it the claim's GpuConfig is "
                            "refused when the pod starts")
