"""The IMDB text classifier's model: Embedding -> LSTM -> Dense(sigmoid), kept on cuDNN.

Imports Keras only (lazily, in :func:`build_model`), never TensorFlow, so the same model
builds under any Keras 3 backend (``KERAS_BACKEND=tensorflow`` in the images,
``KERAS_BACKEND=torch`` in the GPU benchmark, benchmarks/gpu_bench.py).

Keras picks the cuDNN LSTM kernel only when activation="tanh",
recurrent_activation="sigmoid", recurrent_dropout=0, unroll=False and use_bias=True
(keras/src/backend/tensorflow/rnn.py ``cudnn_ok``; keras/src/backend/torch/rnn.py
``cudnn_ok`` checks the same settings, but that backend also falls back silently when the
cuDNN call itself raises, so only a profile proves cuDNN there: docs/benchmarks.md, GPU);
any other value silently falls back to the generic kernel, about 10x slower on a GPU (the seed article's 164 s vs 18 s per epoch on a K80).
:func:`check_cudnn_eligible` refuses such settings before training. Input dropout
(``dropout=``) keeps eligibility.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Settings the cuDNN LSTM kernel requires, with the reason shown when one is violated.
CUDNN_REQUIREMENTS = {
    "activation": ("tanh", "the cuDNN kernel implements tanh only"),
    "recurrent_activation": ("sigmoid", "the cuDNN kernel implements sigmoid gates only"),
    "recurrent_dropout": (0.0, ("dropout on the recurrent state is not in the cuDNN kernel; "
                                "use dropout= (input dropout) instead, which keeps cuDNN")),
    "unroll": (False, "an unrolled LSTM is built from generic ops"),
    "use_bias": (True, "the cuDNN kernel always has biases"),
}

#: Learning-rate schedules of the Adam optimizer (``TrainConfig.lr_schedule``):
#: ``cosine`` decays ``learning_rate`` to 0 over all the training's steps
#: (keras.optimizers.schedules.CosineDecay, keras/src/optimizers/schedules/
#: learning_rate_schedule.py); ``constant`` keeps it. Cosine is the default because the
#: model peaks after one epoch and overfits in the second at a constant rate: after two
#: epochs on an H200 (Keras JAX backend, seeds 42/1/2) 0.8468-0.8493 test accuracy with
#: cosine against 0.815-0.8386 constant (docs/benchmarks.md, GPU).
LR_SCHEDULES = ("cosine", "constant")


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
        learning_rate: Adam learning rate (the start of the cosine schedule).
        lr_schedule: one of LR_SCHEDULES: ``cosine`` (decay to 0 over ``epochs``) or
            ``constant``.
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
    lr_schedule: str = "cosine"
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
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, "
                             f"got {self.lr_schedule!r}")
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


def adam_learning_rate(cfg: TrainConfig, steps_per_epoch: int | None):
    """Adam's ``learning_rate`` argument: the float ``cfg.learning_rate`` (``constant``) or a
    ``keras.optimizers.schedules.CosineDecay`` from it to 0 over ``cfg.epochs *
    steps_per_epoch`` optimizer steps (``cosine``; the step count is the optimizer's, so a
    training restored by BackupAndRestore continues on the same curve).

    Raises:
        ValueError: ``cosine`` without a ``steps_per_epoch`` >= 1.
    """
    if cfg.lr_schedule == "constant":
        return cfg.learning_rate
    if not steps_per_epoch or steps_per_epoch < 1:
        raise ValueError(f"lr_schedule={cfg.lr_schedule!r} needs steps_per_epoch >= 1 "
                         f"(the decay's length), got {steps_per_epoch!r}")
    import keras

    return keras.optimizers.schedules.CosineDecay(cfg.learning_rate,
                                                  cfg.epochs * steps_per_epoch)


def build_model(cfg: TrainConfig, vocab_size: int, maxlen: int,
                steps_per_epoch: int | None = None):
    """Embedding(vocab_size, embedding_dim) -> LSTM(lstm_units) -> Dense(1, sigmoid).

    Input: int32 ``[batch, maxlen]`` token ids; output: float32 ``[batch, 1]``
    probability of the positive class. Compiled with Adam (rate: :func:`adam_learning_rate`,
    which needs ``steps_per_epoch``, optimizer steps per epoch, for ``cosine``) and binary
    cross-entropy.

    Raises:
        ValueError: ``lr_schedule="cosine"`` without ``steps_per_epoch``.
    """
    import keras

    rate = adam_learning_rate(cfg, steps_per_epoch)
    on_gpu = gpu_visible()
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
    model.compile(optimizer=keras.optimizers.Adam(rate),
                  loss="binary_crossentropy", metrics=["accuracy"],
                  jit_compile=jit_compile_for(keras.config.backend()))
    return model


def jit_compile_for(backend: str) -> bool:
    """``jit_compile`` for ``model.compile`` under a Keras backend (``keras.config.backend()``).

    * ``jax``: True. The whole train step is one XLA program, and the LSTM inside it still
      runs cuDNN on a GPU (keras/src/backend/jax/rnn.py ``lstm`` calls
      ``jax.experimental.rnn.lstm``): 2.2 s/epoch on an H200 against 5.2 s under the torch
      backend in the same run (docs/benchmarks.md, GPU).
    * ``tensorflow``: False. On a GPU the cuDNN LSTM is not XLA-compatible (Keras turns XLA
      off for it, keras/src/layers/rnn/lstm.py ``LSTM.supports_jit``); on a CPU XLA made
      the step slower (docs/benchmarks.md, IMDB LSTM on CPU).
    * ``torch``: False. Under torch.compile Keras' torch backend leaves cuDNN for the
      generic loop (keras/src/backend/torch/rnn.py ``lstm``: cuDNN only when
      ``torch.compiler.is_compiling()`` is false).
    """
    return backend == "jax"


def gpu_visible() -> bool:
    """True when the active Keras backend (TensorFlow, PyTorch or JAX) sees a GPU."""
    import keras

    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return bool(tf.config.list_logical_devices("GPU"))
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    if backend == "jax":
        import jax

        return jax.default_backend() == "gpu"
    return False
