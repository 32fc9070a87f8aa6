"""train_text_classifier logic: Embedding -> LSTM -> Dense(sigmoid) on token-id Datasets.

The LSTM is kept on the cuDNN kernel. Keras picks cuDNN for ``keras.layers.LSTM``
only when activation="tanh", recurrent_activation="sigmoid", recurrent_dropout=0,
unroll=False and use_bias=True (the conditions in Keras' TensorFlow backend,
keras/src/backend/tensorflow/rnn.py ``cudnn_ok``); any other value silently falls back
to the generic kernel, about 10x slower on a GPU (the seed article's 164 s vs 18 s per
epoch on a K80). :func:`check_cudnn_eligible` refuses such settings before training.
Input dropout (``dropout=``) keeps eligibility.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kfp_gpu import datasets, storage

log = logging.getLogger(__name__)

MODEL_FILE = "model.keras"
#: Settings the cuDNN LSTM kernel requires, with the reason shown when one is violated.
CUDNN_REQUIREMENTS = {
    "activation": ("tanh", "the cuDNN kernel implements tanh only"),
    "recurrent_activation": ("sigmoid", "the cuDNN kernel implements sigmoid gates only"),
    "recurrent_dropout": (0.0, ("dropout on the recurrent state is not in the cuDNN kernel; "
                                "use dropout= (input dropout) instead, which keeps cuDNN")),
    "unroll": (False, "an unrolled LSTM is built from generic ops"),
    "use_bias": (True, "the cuDNN kernel always has biases"),
}


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of the IMDB LSTM classifier (defaults: the seed article's).

    Attributes:
        epochs: passes over the training set (int >= 1).
        batch_size: examples per step (int >= 1), 32 as in the article.
        embedding_dim: Embedding output width.
        lstm_units: LSTM state size.
        dropout: LSTM input dropout in [0, 1) (keeps cuDNN eligibility).
        recurrent_dropout, activation, recurrent_activation, unroll, use_bias: LSTM
            arguments; values other than CUDNN_REQUIREMENTS are refused unless
            ``allow_generic_kernel``.
        learning_rate: Adam learning rate.
        seed: seed for weights, shuffling and dropout.
        mixed_precision: ``mixed_float16`` compute (for GPUs with tensor cores).
        allow_generic_kernel: accept a cuDNN-ineligible LSTM (benchmarks only), with a
            warning and ``cudnn_eligible = 0`` in the metrics.
    """

    epochs: int = 2
    batch_size: int = 32
    embedding_dim: int = 128
    lstm_units: int = 128
    dropout: float = 0.0
    recurrent_dropout: float = 0.0
    activation: str = "tanh"
    recurrent_activation: str = "sigmoid"
    unroll: bool = False
    use_bias: bool = True
    learning_rate: float = 1e-3
    seed: int = 42
    mixed_precision: bool = False
    allow_generic_kernel: bool = False

    def validate(self) -> None:
        """Raise ValueError naming the bad value and the accepted range."""
        for name in ("epochs", "batch_size", "embedding_dim", "lstm_units"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0.0 <= self.recurrent_dropout < 1.0:
            raise ValueError(f"recurrent_dropout must be in [0, 1), got {self.recurrent_dropout}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not self.allow_generic_kernel:
            check_cudnn_eligible(self)


def cudnn_violations(cfg: TrainConfig) -> list[str]:
    """Human-readable reasons ``cfg`` would run the generic LSTM kernel ([] if none)."""
    out = []
    for name, (required, why) in CUDNN_REQUIREMENTS.items():
        value = getattr(cfg, name)
        if value != required:
            out.append(f"{name}={value!r} (cuDNN needs {required!r}: {why})")
    return out


def check_cudnn_eligible(cfg: TrainConfig) -> None:
    """Refuse LSTM settings that make Keras fall back from cuDNN to the generic kernel.

    Raises:
        ValueError: listing each offending setting, the value cuDNN needs and why.
    """
    bad = cudnn_violations(cfg)
    if bad:
        raise ValueError(
            "LSTM settings would silently leave the cuDNN kernel (about 10x slower on a GPU): "
            + "; ".join(bad)
            + ". Fix them, or set allow_generic_kernel=True to accept the generic kernel.")


def build_model(cfg: TrainConfig, vocab_size: int, maxlen: int):
    """Embedding(vocab_size, embedding_dim) -> LSTM(lstm_units) -> Dense(1, sigmoid).

    Input: int32 ``[batch, maxlen]`` token ids; output: float32 ``[batch, 1]``
    probability of the positive class. Compiled with Adam and binary cross-entropy.
    """
    import keras
    import tensorflow as tf

    on_gpu = bool(tf.config.list_logical_devices("GPU"))
    eligible = not cudnn_violations(cfg)
    inputs = keras.Input(shape=(maxlen,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, cfg.embedding_dim, name="embedding")(inputs)
    x = keras.layers.LSTM(
        cfg.lstm_units, dropout=cfg.dropout, recurrent_dropout=cfg.recurrent_dropout,
        activation=cfg.activation, recurrent_activation=cfg.recurrent_activation,
        unroll=cfg.unroll, use_bias=cfg.use_bias, seed=cfg.seed,
        # On a GPU an eligible layer is pinned to cuDNN, so Keras raises rather than
        # falling back silently; "auto" elsewhere (CPU has no cuDNN).
        use_cudnn=True if (on_gpu and eligible) else "auto", name="lstm")(x)
    outputs = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name="probability")(x)
    model = keras.Model(inputs, outputs, name="imdb_lstm")
    model.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate),
                  loss="binary_crossentropy", metrics=["accuracy"])
    return model


def input_pipeline(ds, batch_size: int, *, shuffle: bool, seed: int, rows: int):
    """tf.data: cache -> (shuffle) -> batch -> prefetch; labels cast to float32 [batch]."""
    import tensorflow as tf

    ds = ds.map(lambda x, y: (x, tf.cast(y, tf.float32)), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(max(1, rows), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


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
                log.info("epoch %d step %d/%d loss %.4f", self._epoch + 1, batch + 1,
                         self.steps_per_epoch, (logs or {}).get("loss", float("nan")))

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
    continues after the last completed epoch (also with more ``epochs``), while a run with
    other data or settings starts afresh instead of picking up foreign weights. The backup
    is kept after success, so a retried task that already finished trains 0 more epochs
    (its throughput, loss and accuracy are then None). ``checkpoint_dir`` may be a local
    path (a PVC survives pod restarts) or a ``gs://`` URI (written through TensorFlow's GCS
    filesystem).

    Writes ``model_dir/model.keras`` atomically (loadable with keras.saving.load_model).

    Returns:
        metrics dict: ``epoch_seconds`` (list, s), ``seconds_per_epoch`` (mean, s),
        ``ms_per_step``, ``samples_per_sec``, ``loss``, ``accuracy`` (last epoch),
        ``epochs_run`` (this attempt), ``resumed_from_epoch``, ``device``,
        ``cudnn_eligible`` (bool), ``train_rows``, ``mixed_precision``.

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
    model = build_model(cfg, vocab_size, maxlen)
    timer = _epoch_timer()(steps)
    backup_dir = checkpoint_path(checkpoint_dir, cfg, meta)
    if not storage.is_gcs(backup_dir):
        Path(backup_dir).mkdir(parents=True, exist_ok=True)
    backup = keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=False)
    callbacks = [backup, timer, keras.callbacks.TensorBoard(tensorboard_dir)]
    device = device_description()
    log.info("training on %s: %d rows, %d steps/epoch, %d epochs, cuDNN-eligible=%s, "
             "checkpoints in %s", device, rows, steps, cfg.epochs, not violations, backup_dir)
    try:
        model.fit(ds, epochs=cfg.epochs, callbacks=callbacks, verbose=0)
        with storage.atomic_dir(model_dir) as tmp:
            model.save(os.path.join(tmp, MODEL_FILE))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    resumed_from = cfg.epochs - len(timer.epochs)
    if resumed_from:
        log.warning("resumed from the checkpoint after epoch %d (%s)", resumed_from, backup_dir)
    secs = [e["seconds"] for e in timer.epochs]
    last = timer.epochs[-1] if timer.epochs else {}
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
        "cudnn_eligible": not violations,
        "train_rows": rows,
        "steps_per_epoch": steps,
        "mixed_precision": cfg.mixed_precision,
        "config": asdict(cfg),
    }


def checkpoint_path(checkpoint_dir: str, cfg: TrainConfig, dataset_meta: dict) -> str:
    """``checkpoint_dir/<12 hex>``: one folder per (settings but ``epochs``, Dataset).

    So only a restart of the same training resumes; ``gs://`` URIs are joined with ``/``.
    """
    settings = {k: v for k, v in asdict(cfg).items() if k != "epochs"}
    blob = json.dumps({"config": settings, "data": dataset_meta}, sort_keys=True)
    return checkpoint_dir.rstrip("/") + "/" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def write_report(path: str, metrics: dict) -> None:
    """The metrics dict as JSON, atomically."""
    storage.write_text(path, json.dumps(metrics, indent=2))
