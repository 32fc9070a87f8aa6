"""The Horovod ResNet trainer: the program every MPIJob worker (and local ``mpirun``) runs.

One process per GPU (``mpirun -np N``; on a cluster the MPI Operator's Launcher starts
``slotsPerWorker`` processes on each Worker). Each process:

1. ``hvd.init()`` (MPI controller; mpi4py shares the same ``MPI_COMM_WORLD`` for
   gathering per-rank figures), sees only GPU ``hvd.local_rank()`` with memory growth on
   (on CPU: ``cpu_count / local_size`` intra-op threads, so ranks do not oversubscribe);
2. builds the same model (same seed), an optimizer whose learning rate is the per-worker
   rate times ``hvd.size()``, reached by a linear warm-up (Goyal et al. 2017, the Horovod
   Keras ImageNet example's schedule);
3. rank 0 restores the latest checkpoint if there is one; all variables (model and
   optimizer) and the global step are then broadcast from rank 0;
4. trains on its own shard of the data (``x[rank::size]``) with a custom training step:
   local gradients, then an allreduce (``hvd.DistributedGradientTape``; with ``--xla`` the
   gradient computation is XLA-compiled and the gradients go through
   ``hvd.grouped_allreduce``), then ``optimizer.apply_gradients``. Keras' own ``fit`` is
   not used: under Keras 3, Horovod's ``horovod.keras`` optimizer wrapper silently skips
   the allreduce, and Keras 3 ``fit`` under MultiWorkerMirroredStrategy is broken
   upstream (keras-team/keras#20585);
5. at each epoch end averages the BatchNorm moving statistics over ranks (they are
   computed from each rank's own batches), and rank 0 alone writes a checkpoint
   (``tf.train.CheckpointManager``); at the end rank 0 writes the model
   (``model.keras``, loadable with ``keras.saving.load_model``) and ``metrics.json``.

Every rank's weight checksum (SHA-256 over all weights) and img/sec are gathered with
mpi4py into the metrics, so a skipped allreduce shows up as differing checksums.

Modes: ``benchmark`` (synthetic images, ResNet-50 by default, img/sec with warm-up steps
excluded -- the figure ``tensorflow2_synthetic_benchmark.py`` of Horovod reports) and
``train`` (real images, see :mod:`kfp_gpu.training.resnet_data`, small ResNet by default).

Run: ``mpirun -np 2 kfp-gpu train-resnet --mode benchmark --steps 20``, or
``mpirun -np 2 python -m kfp_gpu.training.horovod_train ...``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from kfp_gpu import storage
from kfp_gpu.training import resnet_data, resnet_models

log = logging.getLogger(__name__)

MODES = ("train", "benchmark")
OPTIMIZERS = ("sgd", "adam")
MODEL_FILE = "model.keras"
METRICS_FILE = "metrics.json"


@dataclass
class TrainConfig:
    """Trainer settings (units in the names; every field has a CLI flag of the same name).

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
        mixed_precision: Keras ``mixed_float16`` policy + loss scaling.
        xla: XLA-compile the forward/backward pass.
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
    mixed_precision: bool = False
    xla: bool = False
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

    def resolved(self) -> TrainConfig:
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


def scaled_lr(step: int, base_lr: float, size: int, warmup_steps: int) -> float:
    """Learning rate at global ``step`` (0-based): linear from ``base_lr`` to ``base_lr*size``.

    The "linear scaling rule with gradual warm-up" of Goyal et al. 2017 (arXiv:1706.02677).
    """
    target = base_lr * size
    if warmup_steps <= 0 or step >= warmup_steps:
        return target
    return base_lr + (target - base_lr) * step / warmup_steps


def weights_checksum(weights: list[np.ndarray]) -> dict:
    """``{"sha256": hex of all weights' float32 bytes in order, "sum": float64 total}``."""
    h = hashlib.sha256()
    total = 0.0
    for w in weights:
        a = np.ascontiguousarray(np.asarray(w, dtype=np.float32))
        h.update(a.tobytes())
        total += float(np.sum(a, dtype=np.float64))
    return {"sha256": h.hexdigest(), "sum": total}


def summarize(per_rank: list[dict], batch_size: int) -> dict:
    """Combine gathered per-rank figures into the throughput metrics (pure).

    Args:
        per_rank: one dict per rank with ``img_per_sec``, ``checksum`` (see
            :func:`weights_checksum`).
        batch_size: images per step per rank.

    Returns:
        ``img_per_sec_per_gpu`` (mean over ranks), ``img_per_sec_per_gpu_ci95`` (1.96 std,
        as Horovod's synthetic benchmark prints), ``img_per_sec_total`` (sum; = samples/sec),
        ``ms_per_step`` (mean), ``weights_identical`` (all SHA-256 equal),
        ``weights_sum_spread`` (max - min of the weight sums).
    """
    ips = np.array([r["img_per_sec"] for r in per_rank], dtype=np.float64)
    sums = [r["checksum"]["sum"] for r in per_rank]
    mean = float(ips.mean()) if len(ips) else 0.0
    return {
        "world_size": len(per_rank),
        "img_per_sec_per_gpu": mean,
        "img_per_sec_per_gpu_ci95": float(1.96 * ips.std()) if len(ips) else 0.0,
        "img_per_sec_total": float(ips.sum()),
        "samples_per_sec": float(ips.sum()),
        "ms_per_step": 1000.0 * batch_size / mean if mean > 0 else 0.0,
        "weights_identical": len({r["checksum"]["sha256"] for r in per_rank}) == 1,
        "weights_sum_spread": float(max(sums) - min(sums)) if sums else 0.0,
    }


# ---------------------------------------------------------------- runtime (TF + Horovod)


def _setup_devices(hvd) -> str:
    """Pin this process to GPU ``local_rank``; CPU: share the cores.

    The pinned GPU gets the pod's GPU share as a memory cap when the request is a fraction
    (kfp_gpu.gpu.memory_cap), else memory growth.
    """
    import tensorflow as tf

    from kfp_gpu.gpu import memory_cap

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        mine = gpus[hvd.local_rank() % len(gpus)]
        tf.config.set_visible_devices(mine, "GPU")
        if not memory_cap.apply_gpu_share(devices=[mine])["applied"]:
            tf.config.experimental.set_memory_growth(mine, True)
        return mine.name
    threads = max(1, (os.cpu_count() or 1) // max(1, hvd.local_size()))
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(max(1, min(2, threads)))
    return f"CPU ({threads} threads)"


def _average_statistics(hvd, model) -> None:
    """Average non-trainable variables (BatchNorm moving mean/variance) over all ranks.

    Each rank updates them from its own batches; the average is what one large batch
    would give, and afterwards every rank holds the same complete model.
    """
    for v in model.non_trainable_variables:
        v.assign(hvd.allreduce(v.value, op=hvd.Average))


def _make_step(hvd, model, optimizer, xla: bool, allreduce: bool, mixed: bool):
    """The compiled training step ``(x float32 [B,H,W,C], y int32 [B]) -> (loss, accuracy)``."""
    import keras
    import tensorflow as tf

    tvars = model.trainable_variables
    sources = [v.value for v in tvars]  # Keras 3 variables: the tape watches the tf.Variable

    def forward(x, y):
        probs = model(x, training=True)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, probs))
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(probs, -1, output_type=tf.int32), y),
                                     tf.float32))
        return loss, acc

    if xla:
        @tf.function(jit_compile=True)
        def local_grads(x, y):
            with tf.GradientTape() as tape:
                loss, acc = forward(x, y)
                scaled = optimizer.scale_loss(loss) if mixed else loss
            return loss, acc, tape.gradient(scaled, sources)

        @tf.function
        def step(x, y):
            loss, acc, grads = local_grads(x, y)
            if allreduce:
                grads = hvd.grouped_allreduce(grads, op=hvd.Average)
            optimizer.apply_gradients(zip(grads, tvars))
            return loss, acc
    else:
        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss, acc = forward(x, y)
                scaled = optimizer.scale_loss(loss) if mixed else loss
            if allreduce:
                tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(scaled, sources)
            optimizer.apply_gradients(zip(grads, tvars))
            return loss, acc
    return step


def _batches(x: np.ndarray, y: np.ndarray, batch: int, seed: int, steps: int):
    """Shuffled ``(float32 [B,H,W,C] pixels 0..255, int32 [B])`` batches, ``steps`` of them."""
    import tensorflow as tf

    order = np.random.default_rng(seed).permutation(len(x))[: steps * batch]
    ds = tf.data.Dataset.from_tensor_slices((x[order], y[order])).batch(batch, drop_remainder=True)
    ds = ds.map(lambda a, b: (tf.cast(a, tf.float32), b),
                num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def _evaluate(model, x, y, comm, batch: int = 256) -> dict:
    """Test loss/accuracy over all ranks (each evaluates ``x[rank::size]``; sums reduced)."""
    import keras

    xs, ys = resnet_data.shard(x, y, comm.Get_rank(), comm.Get_size())
    loss_sum, correct = 0.0, 0
    for i in range(0, len(xs), batch):
        probs = np.asarray(model(xs[i:i + batch].astype(np.float32), training=False))
        yb = ys[i:i + batch]
        loss_sum += float(np.sum(keras.ops.convert_to_numpy(
            keras.losses.sparse_categorical_crossentropy(yb, probs))))
        correct += int(np.sum(np.argmax(probs, -1) == yb))
    n = comm.allreduce(len(xs))
    loss_sum, correct = comm.allreduce(loss_sum), comm.allreduce(correct)
    return {"test_loss": loss_sum / max(n, 1), "test_accuracy": correct / max(n, 1),
            "test_rows": n}


def _save_model(model, model_dir: str) -> None:
    if storage.is_gcs(model_dir):
        with tempfile.TemporaryDirectory(prefix="kfp-gpu-model-") as tmp:
            model.save(str(Path(tmp) / MODEL_FILE))
            storage.upload(tmp, model_dir)
        return
    with storage.atomic_dir(model_dir) as tmp:
        model.save(str(tmp / MODEL_FILE))


def _write_json(path: str, obj: dict) -> None:
    text = json.dumps(obj, indent=2, sort_keys=True)
    if storage.is_gcs(path):
        with tempfile.TemporaryDirectory(prefix="kfp-gpu-") as tmp:
            (Path(tmp) / "m.json").write_text(text, encoding="utf-8")
            storage.upload(str(Path(tmp) / "m.json"), path)
    else:
        storage.write_text(path, text)


def run(config: TrainConfig) -> dict | None:
    """Train or benchmark as one rank of an MPI job; see the module docstring.

    Returns:
        On rank 0, the metrics dict also written to ``metrics_path``; None on other ranks.

    Raises:
        ValueError: bad settings (before Horovod starts) or data of the wrong shape.
    """
    cfg = config.resolved()
    from mpi4py import MPI  # noqa: I001  (initialise MPI before Horovod: one COMM_WORLD)
    import horovod.tensorflow as hvd

    hvd.init()
    comm = MPI.COMM_WORLD
    rank, size = hvd.rank(), hvd.size()
    device = _setup_devices(hvd)
    import keras
    import tensorflow as tf

    if cfg.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")

    if cfg.mode == "benchmark":
        shape = (cfg.image_size, cfg.image_size, 3)
        classes = cfg.classes
        data = None
    else:
        data = resnet_data.load_source(cfg.data, cfg.test_data, cfg.synthetic_rows,
                                       seed=cfg.seed)
        shape, classes = data.x_train.shape[1:], data.classes
    model = resnet_models.build(cfg.model, tuple(shape), classes, cfg.blocks, cfg.width,
                                seed=cfg.seed)
    inner = (keras.optimizers.SGD(cfg.lr, momentum=0.9) if cfg.optimizer == "sgd"
             else keras.optimizers.Adam(cfg.lr))
    optimizer = keras.optimizers.LossScaleOptimizer(inner) if cfg.mixed_precision else inner
    optimizer.build(model.trainable_variables)
    global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")

    # Rank 0 restores; everyone then takes rank 0's state.
    manager = None
    restored = ""
    if cfg.checkpoint_dir and cfg.mode == "train":
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=global_step)
        manager = tf.train.CheckpointManager(ckpt, cfg.checkpoint_dir, max_to_keep=3)
        if rank == 0 and manager.latest_checkpoint:
            ckpt.restore(manager.latest_checkpoint).assert_existing_objects_matched()
            restored = manager.latest_checkpoint
    hvd.broadcast_variables([v.value for v in model.variables + optimizer.variables], 0)
    global_step.assign(hvd.broadcast(global_step.value(), 0))

    step_fn = _make_step(hvd, model, optimizer, cfg.xla, cfg.allreduce, cfg.mixed_precision)
    per_rank: dict = {"rank": rank, "host": socket.gethostname(), "device": device}
    losses: list[float] = []
    accs: list[float] = []

    if cfg.mode == "benchmark":
        rng = np.random.default_rng(cfg.seed + rank)
        x = tf.constant(255 * rng.random((cfg.batch_size, *shape), dtype=np.float32))
        y = tf.constant(rng.integers(0, classes, cfg.batch_size, dtype=np.int32))
        for i in range(cfg.warmup_steps):
            optimizer.learning_rate = scaled_lr(i, cfg.lr, size, cfg.lr_warmup_steps)
            step_fn(x, y)
        chunk = 10
        rates = []
        done = 0
        while done < cfg.steps:
            n = min(chunk, cfg.steps - done)
            t0 = time.perf_counter()
            for _ in range(n):
                loss, acc = step_fn(x, y)
            float(loss)  # wait for the device
            rates.append(cfg.batch_size * n / (time.perf_counter() - t0))
            losses.append(float(loss))
            accs.append(float(acc))
            done += n
        timed_images = cfg.batch_size * cfg.steps
        per_rank["img_per_sec"] = float(np.mean(rates))
        per_rank["steps_run"] = cfg.warmup_steps + cfg.steps
        if cfg.allreduce:
            _average_statistics(hvd, model)
        per_rank["first_batch_sha256"] = hashlib.sha256(x.numpy().tobytes()).hexdigest()
        epochs_done = 0
    else:
        xs, ys = resnet_data.shard(data.x_train, data.y_train, rank, size)
        # Same step count on every rank (an allreduce with a missing rank would hang).
        shard_steps = comm.allreduce(len(xs) // cfg.batch_size, op=MPI.MIN)
        steps_per_epoch = min(shard_steps, cfg.steps) if cfg.steps else shard_steps
        if steps_per_epoch < 1:
            raise ValueError(f"{len(data.x_train)} rows give no full batch of {cfg.batch_size} "
                             f"per rank on {size} ranks")
        start_epoch = int(global_step.numpy()) // steps_per_epoch
        per_rank["first_batch_sha256"] = hashlib.sha256(
            np.ascontiguousarray(xs[:cfg.batch_size]).tobytes()).hexdigest()
        timed_images, timed_s, seen = 0, 0.0, 0
        for epoch in range(start_epoch, cfg.epochs):
            for xb, yb in _batches(xs, ys, cfg.batch_size, cfg.seed * 1000 + epoch,
                                   steps_per_epoch):
                optimizer.learning_rate = scaled_lr(int(global_step.numpy()), cfg.lr, size,
                                                    cfg.lr_warmup_steps)
                t0 = time.perf_counter()
                loss, acc = step_fn(xb, yb)
                loss, acc = float(loss), float(acc)
                if seen >= min(cfg.warmup_steps, steps_per_epoch * cfg.epochs - 1):
                    timed_s += time.perf_counter() - t0
                    timed_images += cfg.batch_size
                seen += 1
                global_step.assign_add(1)
                losses.append(loss)
                accs.append(acc)
            if cfg.allreduce:
                _average_statistics(hvd, model)
            if rank == 0 and manager is not None:
                manager.save(checkpoint_number=int(global_step.numpy()))
            if rank == 0:
                log.info("epoch %d: loss %.4f accuracy %.4f", epoch + 1,
                         np.mean(losses[-steps_per_epoch:]), np.mean(accs[-steps_per_epoch:]))
        per_rank["img_per_sec"] = timed_images / timed_s if timed_s > 0 else 0.0
        per_rank["steps_run"] = seen
        epochs_done = cfg.epochs - start_epoch

    per_rank["checksum"] = weights_checksum([np.asarray(w) for w in model.get_weights()])
    per_rank["trainable_checksum"] = weights_checksum(
        [np.asarray(v.value) for v in model.trainable_variables])
    evaluation = {}
    if data is not None and len(data.x_test):
        evaluation = _evaluate(model, data.x_test, data.y_test, comm)
    gathered = comm.gather(per_rank, root=0)
    print(f"[rank {rank}/{size}] done: {per_rank['steps_run']} steps, "
          f"{per_rank['img_per_sec']:.1f} img/sec, weights {per_rank['checksum']['sha256'][:12]}",
          flush=True)
    if rank != 0:
        return None

    metrics = {
        "mode": cfg.mode,
        "model": model.name,
        "parameters": int(model.count_params()),
        "input_shape": list(shape),
        "classes": int(classes),
        "batch_size_per_gpu": cfg.batch_size,
        "global_batch_size": cfg.batch_size * size,
        "mixed_precision": cfg.mixed_precision,
        "xla": cfg.xla,
        "allreduce": cfg.allreduce,
        "timed_steps_per_rank": int(timed_images // cfg.batch_size),
        "warmup_steps": cfg.warmup_steps,
        "epochs_run": epochs_done,
        "global_step": int(global_step.numpy()),
        "resumed_from": restored,
        "final_loss": float(np.mean(losses[-10:])) if losses else None,
        "final_accuracy": float(np.mean(accs[-10:])) if accs else None,
        "lr_per_worker": cfg.lr,
        "lr_final": float(scaled_lr(int(global_step.numpy()), cfg.lr, size,
                                    cfg.lr_warmup_steps)),
        **summarize(gathered, cfg.batch_size),
        **evaluation,
        "ranks": gathered,
        "horovod": {"mpi_built": bool(hvd.mpi_built()), "nccl_built": bool(hvd.nccl_built())},
    }
    if cfg.mode == "train" and cfg.model_dir:
        _save_model(model, cfg.model_dir)
        metrics["model_dir"] = cfg.model_dir
    if cfg.metrics_path:
        _write_json(cfg.metrics_path, metrics)
    print("METRICS " + json.dumps({k: v for k, v in metrics.items() if k != "ranks"}),
          flush=True)
    return metrics


# ---------------------------------------------------------------- CLI


def train_resnet_command(
    mode: Annotated[str, typer.Option(help="train (real data) or benchmark (synthetic)")] = "train",
    model: Annotated[str, typer.Option(help="small | resnet50 (default: resnet50 for "
                                            "benchmark, small for train)")] = "",
    data: Annotated[str, typer.Option(help="IDX dir, 'fashion-mnist', .npz, kfp-gpu Dataset "
                                           "dir or 'synthetic'")] = resnet_data.FASHION_MNIST,
    test_data: Annotated[str, typer.Option(help="Dataset dir/npz holding the test split")] = "",
    image_size: Annotated[int, typer.Option(help="synthetic image side (benchmark)")] = 224,
    batch_size: Annotated[int, typer.Option(help="images per step per GPU/process")] = 32,
    epochs: Annotated[int, typer.Option(help="epochs (train)")] = 1,
    steps: Annotated[int, typer.Option(help="train: max steps/epoch (0=all); benchmark: "
                                            "timed steps (0=100)")] = 0,
    warmup_steps: Annotated[int, typer.Option(help="steps excluded from img/sec")] = 10,
    lr: Annotated[float, typer.Option(help="learning rate per worker (x world size)")] = 0.0125,
    lr_warmup_steps: Annotated[int, typer.Option(help="linear LR warm-up steps")] = 100,
    optimizer: Annotated[str, typer.Option(help="sgd (momentum 0.9) | adam")] = "sgd",
    mixed_precision: Annotated[bool, typer.Option(help="mixed_float16 + loss scaling")] = False,
    xla: Annotated[bool, typer.Option(help="XLA-compile forward/backward")] = False,
    allreduce: Annotated[bool, typer.Option(help="--no-allreduce only to demonstrate "
                                                 "drifting ranks")] = True,
    output_dir: Annotated[str, typer.Option(help="model/, metrics.json, checkpoints/ "
                                                 "(local or gs://)")] = "",
    model_dir: Annotated[str, typer.Option(help="override: model directory")] = "",
    metrics_path: Annotated[str, typer.Option(help="override: metrics JSON path")] = "",
    checkpoint_dir: Annotated[str, typer.Option(help="override: checkpoint directory")] = "",
    blocks: Annotated[int, typer.Option(help="small model: blocks per stage")] = 2,
    width: Annotated[int, typer.Option(help="small model: first-stage filters")] = 16,
    classes: Annotated[int, typer.Option(help="benchmark model classes")] = 1000,
    synthetic_rows: Annotated[int, typer.Option(help="rows of --data synthetic")] = 6000,
    seed: Annotated[int, typer.Option(help="init/shuffle seed")] = 0,
) -> None:
    """Horovod ResNet trainer; run it under mpirun (one process per GPU)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = TrainConfig(**{k: v for k, v in locals().items() if k in _FIELDS})
    try:
        cfg.resolved()
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    run(cfg)


_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def main() -> None:  # pragma: no cover - thin
    """``python -m kfp_gpu.training.horovod_train``: the same command without the kfp-gpu CLI."""
    typer.run(train_resnet_command)


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = [
    "TrainConfig",
    "run",
    "scaled_lr",
    "summarize",
    "train_resnet_command",
    "weights_checksum",
]
