"""A ``dra`` GPU request as Kubernetes DRA objects (pure builders, no I/O).

Field names are those of k8s.io/api v0.36.3 ``resource/v1/types.go`` (the JSON tags):
``ResourceClaimTemplate{metadata, spec: ResourceClaimTemplateSpec{metadata, spec:
ResourceClaimSpec{devices: DeviceClaim{requests: [DeviceRequest{name, exactly:
ExactDeviceRequest{deviceClassName, selectors: [DeviceSelector{cel: CELDeviceSelector
{expression}}], allocationMode, count}}], config: [DeviceClaimConfiguration{requests,
opaque: OpaqueDeviceConfiguration{driver, parameters}}]}}}}``; in a pod, k8s.io/api
v0.36.3 ``core/v1/types.go``: ``PodSpec.resourceClaims: [PodResourceClaim{name,
resourceClaimTemplateName}]`` and ``Container.resources.claims: [ResourceClaim{name}]``.

The NVIDIA names (driver, DeviceClasses, attributes, the opaque ``GpuConfig`` /
``MigDeviceConfig``) and their sources are in :mod:`kfp_gpu.gpu.names`. CEL on the
driver's attributes (the ``device`` variable of ``CELDeviceSelector``: ``attributes`` and
``capacity`` grouped by domain; the driver's unqualified names are in its own domain):

- MIG profile: ``device.attributes['gpu.nvidia.com'].profile == '1g.10gb'``
- product: ``device.attributes['gpu.nvidia.com'].productName.contains('H100')``
- memory: ``'memory' in device.capacity['gpu.nvidia.com'] &&
  device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0`` (Kubernetes'
  CEL quantity library, part of the DRA CEL environment: k8s.io/dynamic-resource-allocation
  v0.36.3 cel/compile.go; partitions.go ``fullGpuCapacity`` publishes no memory when NVML
  gave none, hence the ``in`` guard).
"""

from __future__ import annotations

import copy

from kfp_gpu.gpu.kinds.dra import mib_text
from kfp_gpu.gpu.names import (
    DRA_ATTR_PRODUCT,
    DRA_ATTR_PROFILE,
    DRA_CAPACITY_MEMORY,
    DRA_CLAIM_NAME,
    DRA_CONFIG_API_VERSION,
    DRA_DRIVER,
    DRA_GPU_CLASS,
    DRA_GPU_CONFIG,
    DRA_MIG_CLASS,
    DRA_MIG_CONFIG,
    DRA_MPS,
    DRA_TIME_SLICING,
    RESOURCE_API_VERSION,
)

KIND = "ResourceClaimTemplate"
PLURAL = "resourceclaimtemplates"


def _require_dra(r) -> None:
    if r.kind != "dra":
        raise ValueError(f"a ResourceClaimTemplate is built for 'dra' requests, not {r.kind!r} "
                         f"({r.to_text()})")


def device_class(r) -> str:
    """The DeviceClass a ``dra`` request's claim names: its ``class=``, else NVIDIA's
    ``mig.nvidia.com`` (MIG) or ``gpu.nvidia.com``."""
    return r.device_class or (DRA_MIG_CLASS if r.profile else DRA_GPU_CLASS)


def selectors(r) -> list[str]:
    """The CEL expressions of a ``dra`` request (MIG profile, product, memory), in that
    order; [] for a bare ``dra:gpu=N`` (the DeviceClass selects every GPU)."""
    attrs = f"device.attributes['{DRA_DRIVER}']"
    out = []
    if r.profile:
        out.append(f"{attrs}.{DRA_ATTR_PROFILE} == '{r.profile}'")
    if r.product:
        out.append(f"{attrs}.{DRA_ATTR_PRODUCT}.contains('{r.product}')")
    if r.memory_mib:  # guarded: a GPU whose memory NVML did not report has no capacity
        cap = f"device.capacity['{DRA_DRIVER}']"
        out.append(f"'{DRA_CAPACITY_MEMORY}' in {cap} && {cap}.{DRA_CAPACITY_MEMORY}"
                   f".compareTo(quantity('{mib_text(r.memory_mib)}')) >= 0")
    return out


def opaque_parameters(r) -> dict | None:
    """The driver's opaque config for the request's sharing: ``GpuConfig`` (whole GPUs) or
    ``MigDeviceConfig`` (MIG) with ``sharing: {strategy: TimeSlicing|MPS,
    timeSlicingConfig: {interval}, mpsConfig: {defaultActiveThreadPercentage,
    defaultPinnedDeviceMemoryLimit}}``; None without sharing."""
    s = r.sharing
    if not s.strategy:
        return None
    sharing: dict = {"strategy": DRA_MPS if s.strategy == "mps" else DRA_TIME_SLICING}
    if s.interval:
        sharing["timeSlicingConfig"] = {"interval": s.interval}
    mps = {}
    if s.threads:
        mps["defaultActiveThreadPercentage"] = s.threads
    if s.pinned_mib:
        mps["defaultPinnedDeviceMemoryLimit"] = mib_text(s.pinned_mib)
    if mps:
        sharing["mpsConfig"] = mps
    return {"apiVersion": DRA_CONFIG_API_VERSION,
            "kind": DRA_MIG_CONFIG if r.profile else DRA_GPU_CONFIG, "sharing": sharing}


def claim_spec(r) -> dict:
    """``ResourceClaimSpec`` of a ``dra`` request: one request named
    :data:`~kfp_gpu.gpu.names.DRA_CLAIM_NAME` for ``count`` devices (``ExactCount``) of
    the request's DeviceClass, the CEL selectors, and the sharing config for that request.
    The DeviceClass is the request's ``class=`` (``r.device_class``: another DRA driver's,
    e.g. ``gpu.example.com``; such a request has no selectors and no config), else
    NVIDIA's ``mig.nvidia.com`` for ``dra:mig=`` and ``gpu.nvidia.com`` for ``dra:gpu=``.

    Raises:
        ValueError: ``r`` is not a ``dra`` request.
    """
    _require_dra(r)
    exactly: dict = {"deviceClassName": device_class(r)}
    cel = selectors(r)
    if cel:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in cel]
    exactly.update(allocationMode="ExactCount", count=r.count)
    devices: dict = {"requests": [{"name": DRA_CLAIM_NAME, "exactly": exactly}]}
    params = opaque_parameters(r)
    if params:
        devices["config"] = [{"requests": [DRA_CLAIM_NAME],
                              "opaque": {"driver": DRA_DRIVER, "parameters": params}}]
    return {"devices": devices}


def template(r, name: str, namespace: str, *, labels: dict | None = None,
             owner: dict | None = None) -> dict:
    """A ``resource.k8s.io/v1`` ResourceClaimTemplate named ``name`` in ``namespace``.

    Args:
        r: a ``dra`` :class:`kfp_gpu.gpu.request.GpuRequest`.
        labels: labels of the template (copied to nothing else).
        owner: an ``ownerReferences`` entry (e.g. the job), so garbage collection removes
            the template with its owner.

    Raises:
        ValueError: ``r`` is not a ``dra`` request.
    """
    meta: dict = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    if owner:
        meta["ownerReferences"] = [copy.deepcopy(owner)]
    return {"apiVersion": RESOURCE_API_VERSION, "kind": KIND, "metadata": meta,
            "spec": {"spec": claim_spec(r)}}


def pod_claims(template_name: str) -> list[dict]:
    """``PodSpec.resourceClaims``: one claim :data:`~kfp_gpu.gpu.names.DRA_CLAIM_NAME`
    generated per pod from the ResourceClaimTemplate ``template_name`` (same namespace)."""
    return [{"name": DRA_CLAIM_NAME, "resourceClaimTemplateName": template_name}]


def container_claims() -> list[dict]:
    """``Container.resources.claims``: the pod's claim :data:`~kfp_gpu.gpu.names.
    DRA_CLAIM_NAME`, all of its requests."""
    return [{"name": DRA_CLAIM_NAME}]
