"""The TensorFlow/Horovod side of the trainer: device placement, the allreduce training step,
BatchNorm statistics, input batches, distributed evaluation, and rank 0's outputs.

TensorFlow, Keras and Horovod are imported inside the functions: they are heavy optional
dependencies (the ``train`` extra) that only ranks load.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from kfp_gpu.inputs import storage
from kfp_gpu.training import resnet_data
from kfp_gpu.training.horovod_config import MODEL_FILE


def setup_devices(hvd) -> str:
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


def gpu_capability() -> tuple[int, int] | None:
    """Compute capability ``(major, minor)`` of the GPU this rank sees; None on CPU (or
    when TensorFlow does not report it)."""
    import tensorflow as tf

    gpus = tf.config.get_visible_devices("GPU")
    if not gpus:
        return None
    cap = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
    return tuple(cap) if cap else None


def average_statistics(hvd, model) -> None:
    """Average non-trainable variables (BatchNorm moving mean/variance) over all ranks.

    Each rank updates them from its own batches; the average is what one large batch
    would give, and afterwards every rank holds the same complete model.
    """
    for v in model.non_trainable_variables:
        v.assign(hvd.allreduce(v.value, op=hvd.Average))


def make_step(hvd, model, optimizer, xla: bool, allreduce: bool, loss_scaling: bool):
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
                scaled = optimizer.scale_loss(loss) if loss_scaling else loss
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
                scaled = optimizer.scale_loss(loss) if loss_scaling else loss
            if allreduce:
                tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(scaled, sources)
            optimizer.apply_gradients(zip(grads, tvars))
            return loss, acc
    return step


def batches(x: np.ndarray, y: np.ndarray, batch: int, seed: int, steps: int):
    """Shuffled ``(float32 [B,H,W,C] pixels 0..255, int32 [B])`` batches, ``steps`` of them."""
    import tensorflow as tf

    order = np.random.default_rng(seed).permutation(len(x))[: steps * batch]
    ds = tf.data.Dataset.from_tensor_slices((x[order], y[order])).batch(batch, drop_remainder=True)
    ds = ds.map(lambda a, b: (tf.cast(a, tf.float32), b),
                num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def evaluate(model, x, y, comm, batch: int = 256) -> dict:
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


def save_model(model, model_dir: str) -> None:
    if storage.is_remote(model_dir):
        with tempfile.TemporaryDirectory(prefix="kfp-gpu-model-") as tmp:
            model.save(str(Path(tmp) / MODEL_FILE))
            storage.upload(tmp, model_dir)
        return
    with storage.atomic_dir(model_dir) as tmp:
        model.save(str(tmp / MODEL_FILE))


def write_json(path: str, obj: dict) -> None:
    text = json.dumps(obj, indent=2, sort_keys=True)
    if storage.is_remote(path):
        with tempfile.TemporaryDirectory(prefix="kfp-gpu-") as tmp:
            (Path(tmp) / "m.json").write_text(text, encoding="utf-8")
            storage.upload(str(Path(tmp) / "m.json"), path)
    else:
        storage.write_text(path, text)
