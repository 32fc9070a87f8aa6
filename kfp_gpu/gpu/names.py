"""Names the GPU requests write, with their upstream sources, and the environment contract
between a request (compile time) and the runtime memory cap (:mod:`kfp_gpu.gpu.memory_cap`).
"""

#: NVIDIA k8s-device-plugin extended resource (whole GPUs, time-slicing/MPS replicas).
GPU_RESOURCE = "nvidia.com/gpu"
#: k8s-device-plugin ``sharing.timeSlicing/mps.renameByDefault: true`` advertises this.
SHARED_RESOURCE = "nvidia.com/gpu.shared"
#: cnvrg MetaGPU device plugin resource (100 units = 1 GPU in this suite's config).
METAGPU_RESOURCE = "cnvrg.io/metagpu"
#: HAMi (Project-HAMi) per-container memory (MiB) and core (percent) resources.
HAMI_MEM_RESOURCE = "nvidia.com/gpumem"
HAMI_CORES_RESOURCE = "nvidia.com/gpucores"
#: The taint GPU node pools carry (GKE, EKS and the GPU Operator docs use this key).
GPU_TOLERATION_KEY = "nvidia.com/gpu"
#: GPU Feature Discovery node labels.
PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
#: KAI Scheduler pod annotations and queue label (Run:ai uses ``runai/queue``).
FRACTION_ANNOTATION = "gpu-fraction"
MEMORY_ANNOTATION = "gpu-memory"
#: KAI Scheduler: the container that gets the fraction (default: the pod's first);
#: NVIDIA/KAI-Scheduler pkg/common/constants (GpuFractionContainerName), KAI >= v0.10.0.
FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
#: The container of a KFP (Argo) task pod that runs the component: Argo puts its ``wait``
#: sidecar first (argoproj/argo-workflows workflow/controller/workflowpod.go), then ``main``.
KFP_MAIN_CONTAINER = "main"
DEFAULT_QUEUE_LABEL = "kai.scheduler/queue"
#: KAI pod annotation naming the container that gets the fraction (default: container 0).
#: NVIDIA/KAI-Scheduler pkg/common/constants/constants.go ``GpuFractionContainerName``, read
#: by pkg/binder/common/gpu_access.go ``GetFractionContainerRef``; since KAI v0.10.0.
FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
#: The component's container in a KFP v2 (Argo) pod. Argo puts ``wait`` FIRST
#: (argoproj/argo-workflows workflow/controller/workflowpod.go ``createWorkflowPod``), so
#: without the annotation KAI would hand the fraction to ``wait``.
KFP_MAIN_CONTAINER = "main"
#: MetaGPU: units per physical GPU (the plugin's ``metaGpus`` setting used by this suite).
METAGPU_UNITS_PER_GPU = 100

#: Environment variable telling the container the GPUs' worth it may use on the device(s)
#: it sees (0 < s <= N; a MIG slice counts as one device). Below 1 the runtime caps memory.
SHARE_ENV = "KFP_GPU_SHARE"
#: Environment variable with an absolute per-device memory cap in MiB (gpu-memory, hami mem).
MEMORY_ENV = "KFP_GPU_MEMORY_MIB"
#: Environment variable naming the request kind (``gpu``, ``mig``, ``fraction``, ...).
KIND_ENV = "KFP_GPU_KIND"

# ---------------------------------------------------------------- Dynamic Resource Allocation
# Kubernetes resource.k8s.io/v1 (GA in 1.34; k8s.io/api v0.36.3 resource/v1/types.go) and
# NVIDIA's DRA driver, kubernetes-sigs/dra-driver-nvidia-gpu @v0.4.1 (764900e7, the newest
# release tag of the snapshot read; it has no v0.5.0 tag, HEAD 95932046 has the same names):
#: The API group/version of ResourceClaimTemplate, DeviceClass, ResourceSlice.
RESOURCE_API_VERSION = "resource.k8s.io/v1"
RESOURCE_GROUP = "resource.k8s.io"
#: The driver name its GPU kubelet plugin registers and its ResourceSlices carry
#: (cmd/gpu-kubelet-plugin/main.go ``DriverName``); also the attribute/capacity domain.
DRA_DRIVER = "gpu.nvidia.com"
#: DeviceClasses of the driver's Helm chart (deployments/helm/dra-driver-nvidia-gpu/templates/
#: deviceclass-gpu.yaml, deviceclass-mig.yaml): CEL ``device.driver == 'gpu.nvidia.com' &&
#: device.attributes['gpu.nvidia.com'].type == 'gpu'`` (resp. ``'mig'``).
DRA_GPU_CLASS = "gpu.nvidia.com"
DRA_MIG_CLASS = "mig.nvidia.com"
#: Device attributes / capacity the plugin publishes (cmd/gpu-kubelet-plugin/deviceinfo.go
#: ``GpuInfo.Attributes``; mig.go ``CommonAttributesMig``, ``CommonCapacitiesMig``;
#: partitions.go ``fullGpuCapacity``): ``type`` (``gpu`` / ``mig``: types.go
#: ``GpuDeviceType``, prepared.go ``PreparedMigDeviceType``), ``productName`` (NVML's name,
#: e.g. ``NVIDIA H100 80GB HBM3``), ``profile`` (MIG, e.g. ``1g.10gb``), capacity ``memory``
#: in bytes.
DRA_ATTR_TYPE = "type"
DRA_ATTR_PRODUCT = "productName"
DRA_ATTR_PROFILE = "profile"
DRA_CAPACITY_MEMORY = "memory"
#: The opaque configuration's API (api/nvidia.com/resource/v1beta1/api.go: GroupName
#: ``resource.nvidia.com``, Version ``v1beta1``, kinds ``GpuConfig``, ``MigDeviceConfig``).
DRA_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
DRA_GPU_CONFIG = "GpuConfig"
DRA_MIG_CONFIG = "MigDeviceConfig"
#: Sharing strategies and time-slice intervals (api/nvidia.com/resource/v1beta1/sharing.go
#: ``TimeSlicingStrategy``, ``MpsStrategy``, ``DefaultTimeSlice``..``LongTimeSlice``); both
#: behind the driver's alpha feature gates ``TimeSlicingSettings`` / ``MPSSupport``
#: (pkg/featuregates/featuregates.go, default off).
DRA_TIME_SLICING = "TimeSlicing"
DRA_MPS = "MPS"
DRA_INTERVALS = ("Default", "Short", "Medium", "Long")
#: The claim and request name this suite uses in pod specs and claim templates.
DRA_CLAIM_NAME = "gpu"
