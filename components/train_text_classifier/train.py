"""train_text_classifier logic: Embedding -> LSTM -> Dense(sigmoid) on token-id Datasets.

The LSTM is kept on the cuDNN kernel. Keras picks cuDNN for ``keras.layers.LSTM``
only when activation="tanh", recurrent_activation="sigmoid", recurrent_dropout=0,
unroll=False and use_bias=True (the conditions in Keras' TensorFlow backend,
keras/src/backend/tensorflow/rnn.py ``cudnn_ok``); any other value silently falls back
to the generic kernel, about 10x slower on a GPU (the seed article's 164 s vs 18 s per
epoch on a K80). :func:`check_cudnn_eligible` refuses such settings before training.
Input dropout (``dropout=``) keeps eligibility.

On a CPU (no GPU visible) two settings make the same model train about twice as fast,
measured in docs/benchmarks.md (IMDB LSTM, CPU):
- oneDNN kernels (``TF_ENABLE_ONEDNN_OPTS=1``, set as a default when this module is
  imported, before TensorFlow is): TensorFlow's wheels turn them on by default only on
  CPUs with AVX-512 VNNI/BF16 or AMX (tensorflow/core/util/port.cc ``IsMklEnabled``), so
  an AVX2 CPU such as an AMD EPYC otherwise runs its matmuls on Eigen code built for AVX
  (no FMA), about 2x slower than on an AVX-512 Xeon.
- Keras' own LSTM loop: the fused CPU LSTM kernel (cpu_lstm.py) is opt-in
  (``KFP_GPU_FUSED_LSTM=1``, installed for ``model.fit`` only when no GPU is visible). On a
  quiet machine it measured within 5% of Keras' loop with oneDNN on (docs/benchmarks.md,
  2026-11-23: 22.6 vs 22.2 s/epoch), so the library's code path is the default.
XLA (``jit_compile=True``) was measured slower on CPU and is not used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path

# Must precede the first TensorFlow import of the process to take effect (see above).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from kfp_gpu.components.train_text_classifier import cpu_lstm
from kfp_gpu.inputs import storage
from kfp_gpu.training import datasets
from kfp_gpu.training.text_data import input_pipeline
from kfp_gpu.training.text_model import (  # noqa: F401  (re-exported)
    CUDNN_REQUIREMENTS,
    TrainConfig,
    build_model,
    check_cudnn_eligible,
    cudnn_violations,
)

log = logging.getLogger(__name__)

MODEL_FILE = "model.keras"
#: Environment variable: "0" keeps Keras' generic LSTM loop on CPU (for comparisons).
FUSED_LSTM_ENV = "KFP_GPU_FUSED_LSTM"


def onednn_enabled() -> bool:
    """True when TensorFlow's oneDNN CPU kernels are on in this process."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def device_description() -> str:
    """``GPU:0 (<name>)`` for the first visible GPU, else ``CPU``."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "CPU"
    details = tf.config.experimental.get_device_details(gpus[0])
    return f"GPU:0 ({details.get('device_name', 'unknown')}) x{len(gpus)}"


def _epoch_timer():
    import keras

    class EpochTimer(keras.callbacks.Callback):
        """Wall seconds and steps of each epoch run in this attempt, with progress logs."""

        def __init__(self, steps_per_epoch: int, log_every: int = 200):
            super().__init__()
            self.steps_per_epoch, self.log_every = steps_per_epoch, log_every
            self.epochs: list[dict] = []

        def on_epoch_begin(self, epoch, logs=None):
            self._t0, self._epoch = time.perf_counter(), epoch

        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % self.log_every == 0:
                done = batch + 1
                eta = (time.perf_counter() - self._t0) / done * (self.steps_per_epoch - done)
                log.info("epoch %d step %d/%d loss %.4f, ETA %.0f s", self._epoch + 1, done,
                         self.steps_per_epoch, (logs or {}).get("loss", float("nan")), eta)

        def on_epoch_end(self, epoch, logs=None):
            sec = time.perf_counter() - self._t0
            self.epochs.append({"epoch": epoch + 1, "seconds": sec,
                                **{k: float(v) for k, v in (logs or {}).items()}})
            log.info("epoch %d done in %.1f s: %s", epoch + 1, sec,
                     {k: round(float(v), 4) for k, v in (logs or {}).items()})

    return EpochTimer


def train(cfg: TrainConfig, *, train_path: str, model_dir: str, checkpoint_dir: str,
          tensorboard_dir: str) -> dict:
    """Train on the Dataset at ``train_path``; write the model, checkpoints, logs.

    Resumable: Keras ``BackupAndRestore`` saves the full training state (weights,
    optimizer, epoch) after each epoch under ``checkpoint_dir/<fingerprint>``, where the
    fingerprint hashes the configuration (all but ``epochs``) and the training Dataset's
    description; a restarted task with the same ``checkpoint_dir``, data and settings
    continues after the last completed epoch (under ``lr_schedule="constant"`` also with more
    ``epochs``; under ``cosine`` the epochs set the decay's length, so they are part of the
    fingerprint), while a run with other data or settings starts afresh instead of picking
    up foreign weights. The backup
    is kept after success, so a retried task that already finished trains 0 more epochs
    (its throughput, loss and accuracy are then None). ``checkpoint_dir`` may be a local
    path (a PVC survives pod restarts) or a ``gs://`` URI (written through TensorFlow's GCS
    filesystem).

    Writes ``model_dir/model.keras`` atomically (loadable with keras.saving.load_model).

    Returns:
        metrics dict: ``epoch_seconds`` (list, s), ``seconds_per_epoch`` (mean, s),
        ``ms_per_step``, ``samples_per_sec``, ``loss``, ``accuracy`` (last epoch),
        ``epochs_run`` (this attempt), ``resumed_from_epoch``, ``device``,
        ``cudnn_eligible`` (bool), ``lstm_kernel`` (``cudnn``, ``fused-cpu`` or
        ``generic``), ``onednn`` (bool), ``train_rows``, ``mixed_precision``.

    Raises:
        ValueError: invalid config (see TrainConfig.validate), empty dataset.
        FileNotFoundError: ``train_path`` is not a Dataset.
    """
    cfg.validate()
    meta = datasets.read_meta(train_path)
    rows, maxlen = int(meta["rows"]), int(meta["feature_shape"][0])
    vocab_size = int(meta.get("vocabulary_size", 0))
    if rows == 0:
        raise ValueError(f"training Dataset {train_path} is empty")
    import keras

    keras.utils.set_random_seed(cfg.seed)
    if cfg.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")
    violations = cudnn_violations(cfg)
    if violations:
        log.warning("generic LSTM kernel accepted (allow_generic_kernel): %s", violations)
    if not vocab_size:  # datasets written by other tools: infer from the ids
        vocab_size = int(datasets.load_arrays(train_path)[0].max()) + 1
    ds = input_pipeline(datasets.load(train_path), cfg.batch_size, shuffle=True,
                        seed=cfg.seed, rows=rows)
    steps = -(-rows // cfg.batch_size)
    model = build_model(cfg, vocab_size, maxlen, steps)
    timer = _epoch_timer()(steps)
    backup_dir = checkpoint_path(checkpoint_dir, cfg, meta)
    if not storage.is_gcs(backup_dir):
        Path(backup_dir).mkdir(parents=True, exist_ok=True)
    backup = keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=False)
    callbacks = [backup, timer, keras.callbacks.TensorBoard(tensorboard_dir)]
    device = device_description()
    fused_wanted = (os.environ.get(FUSED_LSTM_ENV, "0") == "1" and not violations
                    and not cfg.mixed_precision)
    kernel = lstm_kernel(device, fused_wanted, violations)
    log.info("training on %s: %d rows, %d steps/epoch, %d epochs, cuDNN-eligible=%s, "
             "LSTM kernel %s, oneDNN %s, checkpoints in %s", device, rows, steps, cfg.epochs,
             not violations, kernel, onednn_enabled(), backup_dir)
    try:
        with cpu_lstm.cpu_fused_lstm(fused_wanted) as fused:
            # shuffle=False: the tf.data pipeline shuffles (Keras ignores it for a Dataset
            # and warns).
            model.fit(ds, epochs=cfg.epochs, callbacks=callbacks, verbose=0, shuffle=False)
        with storage.atomic_dir(model_dir) as tmp:
            model.save(os.path.join(tmp, MODEL_FILE))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    resumed_from = cfg.epochs - len(timer.epochs)
    if resumed_from:
        log.warning("resumed from the checkpoint after epoch %d (%s)", resumed_from, backup_dir)
    return _summary(cfg, timer.epochs, rows=rows, steps=steps, device=device,
                    resumed_from=resumed_from, cudnn_eligible=not violations,
                    kernel=kernel if fused or kernel != "fused-cpu" else "generic")


def _summary(cfg: TrainConfig, epochs: list[dict], *, rows: int, steps: int, device: str,
             resumed_from: int, cudnn_eligible: bool, kernel: str) -> dict:
    """The metrics dict :func:`train` returns, from the per-epoch timer records."""
    secs = [e["seconds"] for e in epochs]
    last = epochs[-1] if epochs else {}
    mean = sum(secs) / len(secs) if secs else None
    return {
        "epoch_seconds": [round(s, 3) for s in secs],
        "seconds_per_epoch": round(mean, 3) if secs else None,
        "ms_per_step": round(1000 * mean / steps, 3) if secs else None,
        "samples_per_sec": round(rows / mean, 1) if secs else None,
        "loss": last.get("loss"),
        "accuracy": last.get("accuracy"),
        "epochs_run": len(secs),
        "resumed_from_epoch": resumed_from,
        "device": device,
        "cudnn_eligible": cudnn_eligible,
        "lstm_kernel": kernel,
        "onednn": onednn_enabled(),
        "train_rows": rows,
        "steps_per_epoch": steps,
        "mixed_precision": cfg.mixed_precision,
        "config": asdict(cfg),
    }


def lstm_kernel(device: str, fused_wanted: bool, violations: list[str]) -> str:
    """Which LSTM implementation Keras runs: ``cudnn``, ``fused-cpu`` or ``generic``."""
    if violations:
        return "generic"
    if device != "CPU":
        return "cudnn"
    return "fused-cpu" if fused_wanted else "generic"


def checkpoint_path(checkpoint_dir: str, cfg: TrainConfig, dataset_meta: dict) -> str:
    """``checkpoint_dir/<12 hex>``: one folder per (settings, Dataset).

    So only a restart of the same training resumes. ``epochs`` is left out of the settings
    under the constant learning rate (more epochs continue the same training) and kept
    under ``cosine``, whose decay length it sets. ``gs://`` URIs are joined with ``/``.
    """
    settings = {k: v for k, v in asdict(cfg).items()
                if k != "epochs" or cfg.lr_schedule != "constant"}
    blob = json.dumps({"config": settings, "data": dataset_meta}, sort_keys=True)
    return checkpoint_dir.rstrip("/") + "/" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def write_report(path: str, metrics: dict) -> None:
    """The metrics dict as JSON, atomically."""
    storage.write_text(path, json.dumps(metrics, indent=2))
