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

Run: ``mpirun -np 2 kfp-gpu train-resnet --mode benchmark --steps 20`` (the command line
is :mod:`kfp_gpu.cli.train_resnet`). Settings: :mod:`kfp_gpu.training.horovod_config`;
TensorFlow/Horovod pieces: :mod:`kfp_gpu.training.horovod_runtime`; metrics:
:mod:`kfp_gpu.training.horovod_metrics`. This module runs them: :func:`setup`, the
checkpoint functions, :func:`benchmark_loop` / :func:`train_loop`, :func:`finish`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kfp_gpu.training import horovod_runtime as rt
from kfp_gpu.training import resnet_data, resnet_models
from kfp_gpu.training.horovod_config import HorovodConfig, precision_plan, scaled_lr
from kfp_gpu.training.horovod_metrics import summarize, weights_checksum

log = logging.getLogger(__name__)


@dataclass
class Session:
    """One rank's live training state (built by :func:`setup`)."""

    hvd: Any
    comm: Any
    device: str
    model: Any
    optimizer: Any
    global_step: Any
    data: Any = None
    manager: Any = None
    restored: str = ""
    step_fn: Any = None
    precision: Any = None  # horovod_config.PrecisionPlan

    @property
    def shape(self) -> tuple:
        """One image's shape ``(H, W, C)``, as the model takes it."""
        return tuple(self.model.input_shape[1:])

    @property
    def classes(self) -> int:
        """Output classes of the model."""
        return int(self.model.output_shape[-1])


@dataclass
class LoopResult:
    """What a loop produced: losses/accuracies per step, images timed, epochs run, the
    (0-based) epoch it started at (> 0 after a resume)."""

    losses: list[float] = field(default_factory=list)
    accs: list[float] = field(default_factory=list)
    timed_images: int = 0
    epochs_done: int = 0
    start_epoch: int = 0


def setup(cfg: HorovodConfig) -> Session:
    """Start Horovod, place the rank, build data, model and optimizer (no checkpoint yet)."""
    from mpi4py import MPI  # noqa: I001  (initialise MPI before Horovod: one COMM_WORLD)
    import horovod.tensorflow as hvd

    hvd.init()
    device = rt.setup_devices(hvd)
    import keras
    import tensorflow as tf

    precision = precision_plan(cfg.mixed_precision, cfg.xla, rt.gpu_capability())
    log.info("precision: %s, XLA %s (%s)", precision.policy, "on" if precision.xla else "off",
             precision.reason)
    keras.mixed_precision.set_global_policy(precision.policy)
    if cfg.mode == "benchmark":
        data, shape, classes = None, (cfg.image_size, cfg.image_size, 3), cfg.classes
    else:
        data = resnet_data.load_source(cfg.data, cfg.test_data, cfg.synthetic_rows,
                                       seed=cfg.seed)
        shape, classes = data.x_train.shape[1:], data.classes
    model = resnet_models.build(cfg.model, tuple(shape), classes, cfg.blocks, cfg.width,
                                seed=cfg.seed)
    inner = (keras.optimizers.SGD(cfg.lr, momentum=0.9) if cfg.optimizer == "sgd"
             else keras.optimizers.Adam(cfg.lr))
    optimizer = keras.optimizers.LossScaleOptimizer(inner) if precision.loss_scaling else inner
    optimizer.build(model.trainable_variables)
    global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    return Session(hvd=hvd, comm=MPI.COMM_WORLD, device=device, model=model,
                   optimizer=optimizer, global_step=global_step, data=data,
                   precision=precision)


# ---------------------------------------------------------------- checkpoints
def restore_checkpoint(s: Session, cfg: HorovodConfig) -> None:
    """Rank 0 restores the latest checkpoint (train mode); every rank then takes rank 0's
    variables and global step (broadcast)."""
    import tensorflow as tf

    hvd = s.hvd
    if cfg.checkpoint_dir and cfg.mode == "train":
        ckpt = tf.train.Checkpoint(model=s.model, optimizer=s.optimizer, step=s.global_step)
        s.manager = tf.train.CheckpointManager(ckpt, cfg.checkpoint_dir, max_to_keep=3)
        if hvd.rank() == 0 and s.manager.latest_checkpoint:
            ckpt.restore(s.manager.latest_checkpoint).assert_existing_objects_matched()
            s.restored = s.manager.latest_checkpoint
    hvd.broadcast_variables([v.value for v in s.model.variables + s.optimizer.variables], 0)
    s.global_step.assign(hvd.broadcast(s.global_step.value(), 0))


def save_checkpoint(s: Session) -> None:
    """Rank 0 alone writes a checkpoint numbered by the global step."""
    if s.hvd.rank() == 0 and s.manager is not None:
        s.manager.save(checkpoint_number=int(s.global_step.numpy()))


# ---------------------------------------------------------------- loops
def benchmark_loop(s: Session, cfg: HorovodConfig, per_rank: dict) -> LoopResult:
    """Synthetic images: warm-up steps, then ``cfg.steps`` timed in chunks of 10."""
    import tensorflow as tf

    out = LoopResult()
    rank, size = s.hvd.rank(), s.hvd.size()
    rng = np.random.default_rng(cfg.seed + rank)
    x = tf.constant(255 * rng.random((cfg.batch_size, *s.shape), dtype=np.float32))
    y = tf.constant(rng.integers(0, s.classes, cfg.batch_size, dtype=np.int32))
    for i in range(cfg.warmup_steps):
        s.optimizer.learning_rate = scaled_lr(i, cfg.lr, size, cfg.lr_warmup_steps)
        s.step_fn(x, y)
    rates, done = [], 0
    while done < cfg.steps:
        n = min(10, cfg.steps - done)
        t0 = time.perf_counter()
        for _ in range(n):
            loss, acc = s.step_fn(x, y)
        float(loss)  # wait for the device
        rates.append(cfg.batch_size * n / (time.perf_counter() - t0))
        out.losses.append(float(loss))
        out.accs.append(float(acc))
        done += n
    out.timed_images = cfg.batch_size * cfg.steps
    per_rank["img_per_sec"] = float(np.mean(rates))
    per_rank["steps_run"] = cfg.warmup_steps + cfg.steps
    if cfg.allreduce:
        rt.average_statistics(s.hvd, s.model)
    per_rank["first_batch_sha256"] = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    return out


def _steps_per_epoch(s: Session, cfg: HorovodConfig, rows: int) -> int:
    """The same step count on every rank (an allreduce with a missing rank would hang)."""
    from mpi4py import MPI

    shard_steps = s.comm.allreduce(rows // cfg.batch_size, op=MPI.MIN)
    steps = min(shard_steps, cfg.steps) if cfg.steps else shard_steps
    if steps < 1:
        raise ValueError(f"{len(s.data.x_train)} rows give no full batch of {cfg.batch_size} "
                         f"per rank on {s.hvd.size()} ranks")
    return steps


def train_loop(s: Session, cfg: HorovodConfig, per_rank: dict) -> LoopResult:
    """Real data: this rank's shard, ``cfg.epochs`` epochs from the restored global step,
    BatchNorm statistics averaged and a checkpoint written at each epoch end."""
    out = LoopResult()
    rank, size = s.hvd.rank(), s.hvd.size()
    xs, ys = resnet_data.shard(s.data.x_train, s.data.y_train, rank, size)
    steps_per_epoch = _steps_per_epoch(s, cfg, len(xs))
    start_epoch = int(s.global_step.numpy()) // steps_per_epoch
    out.start_epoch = start_epoch
    if rank == 0 and s.restored:
        # checkpoints are written at epoch ends: the run goes on with the next epoch, whose
        # batches (seeded by the epoch), learning rate (by the global step) and optimizer
        # state (in the checkpoint) are the ones the interrupted run would have used
        log.info("resumed from %s: global step %d, starting at epoch %d of %d", s.restored,
                 int(s.global_step.numpy()), start_epoch + 1, cfg.epochs)
    per_rank["first_batch_sha256"] = hashlib.sha256(
        np.ascontiguousarray(xs[:cfg.batch_size]).tobytes()).hexdigest()
    timed_s, seen = 0.0, 0
    for epoch in range(start_epoch, cfg.epochs):
        for xb, yb in rt.batches(xs, ys, cfg.batch_size, cfg.seed * 1000 + epoch,
                                 steps_per_epoch):
            s.optimizer.learning_rate = scaled_lr(int(s.global_step.numpy()), cfg.lr, size,
                                                  cfg.lr_warmup_steps)
            t0 = time.perf_counter()
            loss, acc = s.step_fn(xb, yb)
            loss, acc = float(loss), float(acc)
            if seen >= min(cfg.warmup_steps, steps_per_epoch * cfg.epochs - 1):
                timed_s += time.perf_counter() - t0
                out.timed_images += cfg.batch_size
            seen += 1
            s.global_step.assign_add(1)
            out.losses.append(loss)
            out.accs.append(acc)
        if cfg.allreduce:
            rt.average_statistics(s.hvd, s.model)
        save_checkpoint(s)
        if rank == 0:
            log.info("epoch %d: loss %.4f accuracy %.4f", epoch + 1,
                     np.mean(out.losses[-steps_per_epoch:]), np.mean(out.accs[-steps_per_epoch:]))
    per_rank["img_per_sec"] = out.timed_images / timed_s if timed_s > 0 else 0.0
    per_rank["steps_run"] = seen
    out.epochs_done = cfg.epochs - start_epoch
    return out


# ---------------------------------------------------------------- results
def _metrics(s: Session, cfg: HorovodConfig, loop: LoopResult, gathered: list,
             evaluation: dict) -> dict:
    """Rank 0's metrics dict (see the module docstring)."""
    size, step = s.hvd.size(), int(s.global_step.numpy())
    return {
        "mode": cfg.mode, "model": s.model.name, "parameters": int(s.model.count_params()),
        "input_shape": list(s.shape), "classes": int(s.classes),
        "batch_size_per_gpu": cfg.batch_size, "global_batch_size": cfg.batch_size * size,
        "mixed_precision": s.precision.policy != "float32", "precision": s.precision.policy,
        "loss_scaling": s.precision.loss_scaling, "xla": s.precision.xla,
        "allreduce": cfg.allreduce,
        "timed_steps_per_rank": int(loop.timed_images // cfg.batch_size),
        "warmup_steps": cfg.warmup_steps, "epochs_run": loop.epochs_done,
        "start_epoch": loop.start_epoch, "global_step": step, "resumed_from": s.restored,
        "final_loss": float(np.mean(loop.losses[-10:])) if loop.losses else None,
        "final_accuracy": float(np.mean(loop.accs[-10:])) if loop.accs else None,
        "lr_per_worker": cfg.lr,
        "lr_final": float(scaled_lr(step, cfg.lr, size, cfg.lr_warmup_steps)),
        **summarize(gathered, cfg.batch_size),
        **evaluation,
        "ranks": gathered,
        "horovod": {"mpi_built": bool(s.hvd.mpi_built()),
                    "nccl_built": bool(s.hvd.nccl_built())},
    }


def finish(s: Session, cfg: HorovodConfig, loop: LoopResult, per_rank: dict) -> dict | None:
    """Checksums, evaluation and gathering on every rank; rank 0 writes the model and the
    metrics and prints the ``METRICS {json}`` line. Returns the metrics on rank 0."""
    rank, size = s.hvd.rank(), s.hvd.size()
    per_rank["checksum"] = weights_checksum([np.asarray(w) for w in s.model.get_weights()])
    per_rank["trainable_checksum"] = weights_checksum(
        [np.asarray(v.value) for v in s.model.trainable_variables])
    evaluation = {}
    if s.data is not None and len(s.data.x_test):
        evaluation = rt.evaluate(s.model, s.data.x_test, s.data.y_test, s.comm)
    gathered = s.comm.gather(per_rank, root=0)
    # One write per line (end=""): ranks started by the image's sshd run with
    # PYTHONUNBUFFERED, where print's text and its "\n" are two writes and the ranks' lines
    # interleave in the Launcher's log (the METRICS line below is parsed from it).
    print(f"[rank {rank}/{size}] done: {per_rank['steps_run']} steps, "
          f"{per_rank['img_per_sec']:.1f} img/sec, weights {per_rank['checksum']['sha256'][:12]}"
          "\n", end="", flush=True)
    if rank != 0:
        return None
    metrics = _metrics(s, cfg, loop, gathered, evaluation)
    if cfg.mode == "train" and cfg.model_dir:
        rt.save_model(s.model, cfg.model_dir)
        metrics["model_dir"] = cfg.model_dir
    if cfg.metrics_path:
        rt.write_json(cfg.metrics_path, metrics)
    print("METRICS " + json.dumps({k: v for k, v in metrics.items() if k != "ranks"}) + "\n",
          end="", flush=True)
    return metrics


def run(config: HorovodConfig) -> dict | None:
    """Train or benchmark as one rank of an MPI job; see the module docstring.

    Returns:
        On rank 0, the metrics dict also written to ``metrics_path``; None on other ranks.

    Raises:
        ValueError: bad settings (before Horovod starts) or data of the wrong shape.
    """
    cfg = config.resolved()
    s = setup(cfg)
    restore_checkpoint(s, cfg)
    s.step_fn = rt.make_step(s.hvd, s.model, s.optimizer, s.precision.xla, cfg.allreduce,
                             s.precision.loss_scaling)
    per_rank: dict = {"rank": s.hvd.rank(), "host": socket.gethostname(), "device": s.device}
    loop = (benchmark_loop if cfg.mode == "benchmark" else train_loop)(s, cfg, per_rank)
    return finish(s, cfg, loop, per_rank)
