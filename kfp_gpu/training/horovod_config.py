"""Settings of the Horovod ResNet trainer (:class:`HorovodConfig`) and its learning-rate
schedule. No TensorFlow: validated before anything is launched (the component checks its
inputs with it on the launcher side)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kfp_gpu.training import resnet_data, resnet_models

MODES = ("train", "benchmark")
OPTIMIZERS = ("sgd", "adam")
MODEL_FILE = "model.keras"
METRICS_FILE = "metrics.json"


@dataclass
class HorovodConfig:
    """Trainer settings (units in the names; every field has a ``kfp-gpu train-resnet`` flag of the same name).

    Attributes:
        mode: ``train`` (real data) or ``benchmark`` (synthetic data, throughput only).
        model: ``small`` or ``resnet50``; empty = ``resnet50`` for benchmark, ``small`` for train.
        data / test_data: sources for train mode (see :func:`resnet_data.load_source`).
        image_size: side of the synthetic images (benchmark; default 224) -- train mode
            uses the data's own size.
        batch_size: images per step per process (per GPU).
        epochs: passes over each rank's shard (train mode).
        steps: train: cap on steps per epoch (0 = the whole shard); benchmark: timed steps.
        warmup_steps: first steps excluded from img/sec (graph tracing, autotuning).
        lr: learning rate per worker; the optimizer uses ``lr * world size`` after warm-up.
        lr_warmup_steps: steps of linear ramp from ``lr`` to ``lr * size`` (0 = none).
        optimizer: ``sgd`` (momentum 0.9, as Horovod's ResNet examples) or ``adam``.
        mixed_precision: mixed-precision compute; ``None`` (the default) = on where a GPU
            is visible, off on CPU. On: ``mixed_bfloat16`` on GPUs of compute capability
            >= 8.0, ``mixed_float16`` + loss scaling below (see :func:`precision_plan`).
        xla: XLA-compile the forward/backward pass; ``None`` (the default) = on where a GPU
            is visible, off on CPU.
        allreduce: False only to demonstrate what skipping the allreduce does (ranks drift).
        output_dir: where rank 0 writes ``model/model.keras``, ``metrics.json`` and (unless
            ``checkpoint_dir`` is set) ``checkpoints/``; local path or ``gs://``.
        model_dir / metrics_path / checkpoint_dir: override the places above.
        blocks / width: size of the ``small`` model.
        classes: output classes of the benchmark model (train mode: from the data).
        synthetic_rows: rows of ``data=synthetic`` in train mode.
        seed: model initialiser and shuffling seed.
    """

    mode: str = "train"
    model: str = ""
    data: str = resnet_data.FASHION_MNIST
    test_data: str = ""
    image_size: int = 224
    batch_size: int = 32
    epochs: int = 1
    steps: int = 0
    warmup_steps: int = 10
    lr: float = 0.0125
    lr_warmup_steps: int = 100
    optimizer: str = "sgd"
    mixed_precision: bool | None = None
    xla: bool | None = None
    allreduce: bool = True
    output_dir: str = ""
    model_dir: str = ""
    metrics_path: str = ""
    checkpoint_dir: str = ""
    blocks: int = 2
    width: int = 16
    classes: int = 1000
    synthetic_rows: int = 6000
    seed: int = 0

    def resolved(self) -> HorovodConfig:
        """A copy with defaults filled in (model, output places), validated.

        Raises:
            ValueError: naming the offending setting and the accepted values.
        """
        c = dataclasses.replace(self)
        if c.mode not in MODES:
            raise ValueError(f"mode {c.mode!r}; accepted: {', '.join(MODES)}")
        if not c.model:
            c.model = "resnet50" if c.mode == "benchmark" else "small"
        if c.model not in resnet_models.MODELS:
            raise ValueError(f"model {c.model!r}; accepted: {', '.join(resnet_models.MODELS)}")
        if c.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {c.optimizer!r}; accepted: {', '.join(OPTIMIZERS)}")
        for name in ("batch_size", "epochs", "image_size", "classes"):
            if getattr(c, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(c, name)}")
        for name in ("steps", "warmup_steps", "lr_warmup_steps"):
            if getattr(c, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(c, name)}")
        if not c.lr > 0:
            raise ValueError(f"lr must be > 0, got {c.lr}")
        if c.mode == "benchmark" and c.steps == 0:
            c.steps = 100
        if c.output_dir:
            base = c.output_dir.rstrip("/")
            c.model_dir = c.model_dir or f"{base}/model"
            c.metrics_path = c.metrics_path or f"{base}/{METRICS_FILE}"
            c.checkpoint_dir = c.checkpoint_dir or f"{base}/checkpoints"
        return c


#: Compute capability from which NVIDIA tensor cores run bfloat16 (Ampere, sm_80): the
#: CUDA C++ Programming Guide's "Compute Capabilities" table; Keras' ``mixed_bfloat16``
#: policy needs no loss scaling (bfloat16 has float32's exponent range).
BF16_MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class PrecisionPlan:
    """What a rank compiles: Keras dtype policy, loss scaling, XLA, and why."""

    policy: str
    loss_scaling: bool
    xla: bool
    reason: str


def precision_plan(mixed_precision: bool | None, xla: bool | None,
                   capability: tuple[int, int] | None) -> PrecisionPlan:
    """Resolve the trainer's precision and XLA settings for the device a rank sees.

    ``None`` means "the GPU default": on where a GPU is visible, off on a CPU. The GPU
    default is what measured fastest for this model on an H200 (docs/benchmarks.md, GPU:
    the project's ResNet-50 compiled by XLA in mixed_bfloat16 ran 1.64x its float32 XLA
    speed and 1.21x torchvision's AMP channels_last reference in the same run).

    Args:
        mixed_precision, xla: the user's choice, or ``None``.
        capability: the visible GPU's compute capability ``(major, minor)``; ``None`` on CPU.

    Returns:
        PrecisionPlan: ``mixed_bfloat16`` (no loss scaling) on capability >= 8.0,
        ``mixed_float16`` with loss scaling below it (and on CPU when asked for), else
        ``float32``.
    """
    on_gpu = capability is not None
    mixed = on_gpu if mixed_precision is None else bool(mixed_precision)
    use_xla = on_gpu if xla is None else bool(xla)
    where = f"GPU compute capability {capability[0]}.{capability[1]}" if on_gpu else "CPU"
    if not mixed:
        return PrecisionPlan("float32", False, use_xla, f"float32 on {where}")
    if on_gpu and tuple(capability) >= BF16_MIN_CAPABILITY:
        return PrecisionPlan("mixed_bfloat16", False, use_xla,
                             f"bfloat16 tensor cores on {where}")
    return PrecisionPlan("mixed_float16", True, use_xla,
                         f"float16 with loss scaling on {where} (no bfloat16 below 8.0)")


def scaled_lr(step: int, base_lr: float, size: int, warmup_steps: int) -> float:
    """Learning rate at global ``step`` (0-based): linear from ``base_lr`` to ``base_lr*size``.

    The "linear scaling rule with gradual warm-up" of Goyal et al. 2017 (arXiv:1706.02677).
    """
    target = base_lr * size
    if warmup_steps <= 0 or step >= warmup_steps:
        return target
    return base_lr + (target - base_lr) * step / warmup_steps
