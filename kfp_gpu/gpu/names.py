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
