"""DRA objects shaped as NVIDIA's DRA driver publishes them, for the doctor double and the
cluster tests (kwok nodes have no driver: the tests create these objects themselves).

Source: kubernetes-sigs/dra-driver-nvidia-gpu @v0.4.1 (764900e7):

- DeviceClasses ``gpu.nvidia.com`` / ``mig.nvidia.com``: deployments/helm/
  dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml / deviceclass-mig.yaml, rendered
  for ``resource.k8s.io/v1`` (the gpu class then carries ``extendedResourceName:
  nvidia.com/gpu``);
- one ResourceSlice per node (``spec.driver: gpu.nvidia.com``, ``pool.name`` = the node,
  ``nodeName``), devices as cmd/gpu-kubelet-plugin builds them: a full GPU
  (deviceinfo.go ``GpuInfo.GetDevice``: name ``gpu-<minor>``, attributes ``type``,
  ``uuid``, ``productName``, ``brand``, ``architecture``, ``cudaComputeCapability``,
  ``driverVersion``, ``cudaDriverVersion``; capacity ``memory`` in bytes,
  partitions.go ``fullGpuCapacity``), a MIG device (``MigDeviceInfo.GetDevice``: name
  ``gpu-<parent minor>-mig-<profile without dots>-<GI profile id>-<placement start>``,
  mig.go ``ToCanonicalName``; ``CommonAttributesMig`` adds ``parentUUID`` and
  ``profile``; ``CommonCapacitiesMig``: ``multiprocessors``, ``copyEngines``,
  ``decoders``, ``encoders``, ``jpegEngines``, ``ofaEngines``, ``memory`` (NVML's
  ``memorySizeMB`` x 2^20); one ``memorySlice<i>`` capacity of 1 per memory slice).

The device values (UUIDs, driver version, SM counts, 9856 MiB for an H100 1g.10gb slice,
81559 MiB for a whole H100 80GB HBM3) are of the kind NVML reports, not read from a GPU here.
"""

from __future__ import annotations

DRIVER = "gpu.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
H100_MIB = 81559
#: H100 80GB: GPU instance profile id and NVML memory (MiB) of 1g.10gb (7 per GPU).
MIG_1G10GB = {"profile": "1g.10gb", "profile_id": 19, "memory_mib": 9856,
              "multiprocessors": 16}


def device_classes() -> list[dict]:
    """The chart's two DeviceClasses as resource.k8s.io/v1 objects."""
    def cls(name: str, kind: str, extra: dict) -> dict:
        expr = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expr}}], **extra}}
    return [cls("gpu.nvidia.com", "gpu", {"extendedResourceName": "nvidia.com/gpu"}),
            cls("mig.nvidia.com", "mig", {})]


def _common(uuid: str) -> dict:
    return {"uuid": {"string": uuid}, "productName": {"string": H100},
            "brand": {"string": "Nvidia"}, "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.95.5"}, "cudaDriverVersion": {"version": "13.0.0"}}


def gpu_device(minor: int) -> dict:
    """A whole H100 80GB HBM3 as ``GpuInfo.GetDevice`` publishes it."""
    uuid = f"GPU-4b1e{minor:04d}-0000-4000-8000-00000000{minor:04d}"
    return {"name": f"gpu-{minor}", "attributes": {"type": {"string": "gpu"}, **_common(uuid)},
            "capacity": {"memory": {"value": f"{H100_MIB}Mi"}}}


def mig_device(parent_minor: int, start: int, spec: dict = MIG_1G10GB) -> dict:
    """One MIG device at memory slice ``start`` of GPU ``parent_minor``."""
    parent = f"GPU-4b1e{parent_minor:04d}-0000-4000-8000-00000000{parent_minor:04d}"
    attrs = {"type": {"string": "mig"}, **_common(f"MIG-{parent[4:12]}-{start:04d}"),
             "parentUUID": {"string": parent}, "profile": {"string": spec["profile"]}}
    capacity = {"multiprocessors": {"value": str(spec["multiprocessors"])},
                "copyEngines": {"value": "1"}, "decoders": {"value": "1"},
                "encoders": {"value": "0"}, "jpegEngines": {"value": "1"},
                "ofaEngines": {"value": "0"},
                "memory": {"value": f"{spec['memory_mib']}Mi"},
                f"memorySlice{start}": {"value": "1"}}
    pname = spec["profile"].replace(".", "")
    return {"name": f"gpu-{parent_minor}-mig-{pname}-{spec['profile_id']}-{start}",
            "attributes": attrs, "capacity": capacity}


def resource_slice(node: str, devices: list[dict]) -> dict:
    """The one ResourceSlice of ``node`` (pool = node name, generation 1)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-x7k2p"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def h100_node_slice(node: str, gpus: int = 8) -> dict:
    """An 8-GPU H100 node: ``gpu-0`` .. ``gpu-7``."""
    return resource_slice(node, [gpu_device(i) for i in range(gpus)])


def mig_node_slice(node: str) -> dict:
    """An H100 split into seven 1g.10gb MIG devices (placements 0..6)."""
    return resource_slice(node, [mig_device(0, i) for i in range(7)])
