"""GPU request model: one typed request -> KFP task settings / pod resources / runtime cap.

(Foundation version: whole GPUs and CPU only. The full model -- MIG, time-slicing/MPS,
Run:ai/KAI fractions, cnvrg MetaGPU, HAMi -- extends this module, keeping ``parse``,
``GpuRequest.apply_to_task`` and ``GpuRequest.pod_fragment``.)

Upstream names:
- ``nvidia.com/gpu``: extended resource advertised by the NVIDIA k8s-device-plugin.
- toleration ``nvidia.com/gpu`` Exists NoSchedule: the taint GPU node pools carry
  (GKE, EKS and the GPU Operator docs use this key).
- ``nvidia.com/gpu.product``: node label set by GPU Feature Discovery.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
GPU_TOLERATION_KEY = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Environment variable telling the container the share of one GPU it was given (0 < s <= N).
SHARE_ENV = "KFP_GPU_SHARE"


@dataclass(frozen=True)
class GpuRequest:
    """A request for GPU capacity.

    Attributes:
        kind: ``"none"`` (CPU only) or ``"gpu"`` (whole GPUs).
        count: number of whole GPUs (int >= 0).
        product: optional GPU Feature Discovery product label value.
    """

    kind: str = "none"
    count: int = 0
    product: str = ""

    @property
    def share(self) -> float:
        """GPUs' worth of device memory this request may use (0.0 for CPU only)."""
        return float(self.count) if self.kind == "gpu" else 0.0

    def apply_to_task(self, task):
        """Render onto a KFP ``PipelineTask`` (accelerator, toleration, selector, env)."""
        if self.kind == "none":
            return task
        from kfp import kubernetes

        task.set_accelerator_type(GPU_RESOURCE).set_accelerator_limit(self.count)
        kubernetes.add_toleration(task, key=GPU_TOLERATION_KEY, operator="Exists",
                                  effect="NoSchedule")
        if self.product:
            kubernetes.add_node_selector(task, label_key=PRODUCT_LABEL, label_value=self.product)
        task.set_env_variable(SHARE_ENV, str(self.share))
        return task


def parse(text: str) -> GpuRequest:
    """Parse the compact text form: ``none``, ``gpu:N``, ``gpu:N,product=NAME``.

    Raises:
        ValueError: naming the accepted forms, for anything else.
    """
    accepted = "accepted: 'none', 'gpu:N' (N a non-negative integer), 'gpu:N,product=NAME'"
    t = text.strip()
    if t in ("", "none", "cpu"):
        return GpuRequest()
    head, _, rest = t.partition(",")
    kind, _, value = head.partition(":")
    if kind != "gpu" or not value.isdigit():
        raise ValueError(f"invalid GPU request {text!r}; {accepted}")
    opts = dict(kv.split("=", 1) for kv in rest.split(",") if kv) if rest else {}
    return GpuRequest(kind="gpu", count=int(value), product=opts.get("product", ""))
