"""Where a CPU training step of the IMDB LSTM goes, and what each known lever gives.

The side-by-side benchmark (imdb_lstm_bench.py) runs each configuration in its own
process, minutes apart, so on a shared machine its ratios move with the load. This one
builds every variant in ONE process, traces each once, then times them in interleaved
rounds (round 1: A, B, B-fused, ..., round 2: A, B, ...), so load changes hit all
variants alike. Figures, one line each:

- step: wall ms per training step (median and best of the rounds) of
    A        the article's model (LSTM(128, dropout=0.2, recurrent_dropout=0.2)),
    B        train_text_classifier's model as it trains by default (Keras' LSTM loop),
    B-fused  B with the opt-in fused CPU LSTM kernel (cpu_lstm.py),
    B-unroll B with the LSTM unrolled over the 80 time steps at fit time only
             (``layer.unroll = True``; the saved config keeps unroll=False for cuDNN),
    B-xla    B compiled with XLA (``jit_compile=True``),
  with the seconds of the first 2 steps (tracing, graph passes; Keras traces
  twice) and B / A.
- lstm: the LSTM layer alone, forward + backward on one [32, 80, 128] batch (ms), Keras'
  loop vs the fused kernel: the share of B's step that is the recurrence.
- adam: one optimizer update of the 20,000 x 128 embedding from one batch's sparse
  gradient (tf.IndexedSlices, 2,560 rows): Keras 3's Adam (what training runs) vs
  TensorFlow's single fused kernel ``ResourceApplyAdam`` on the densified gradient, and
  the largest weight difference between the two after that one update (Keras 3 squares
  the IndexedSlices' values before duplicate rows are summed, so the two are different
  optimizers whenever a batch repeats a token; keras-team/keras#19992 is the speed side).

All variants run with the process' oneDNN setting (on: train.py's default), unlike
imdb_lstm_bench.py's row A, which runs under TensorFlow's own default.

Usage (the documented figures; about 4 minutes on 2 CPU cores):
  .venv/bin/python benchmarks/cpu_step_bench.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from imdb_lstm_bench import BATCH, machine, prepare  # no TensorFlow at import

# Imported before TensorFlow: it sets TensorFlow's oneDNN default (on).
from kfp_gpu.components.train_text_classifier import cpu_lstm, train

VARIANTS = ("A", "B", "B-fused", "B-unroll", "B-xla")


def build(variant: str, vocab: int, maxlen: int):
    """The compiled model of one variant (train_text_classifier's builder for all)."""
    if variant == "A":
        cfg = train.TrainConfig(dropout=0.2, recurrent_dropout=0.2, allow_generic_kernel=True)
    else:
        cfg = train.TrainConfig()
    model = train.build_model(cfg, vocab, maxlen)
    if variant == "B-xla":
        import keras

        model.compile(optimizer=keras.optimizers.Adam(cfg.learning_rate),
                      loss="binary_crossentropy", metrics=["accuracy"], jit_compile=True)
    if variant == "B-unroll":
        model.get_layer("lstm").unroll = True  # read when the train function is traced
    return model


def interleaved(fns: dict, calls: int, rounds: int, label: str) -> dict:
    """``{name: [ms per call, one per round]}``: each round times every fn in turn."""
    out = {name: [] for name in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            out[name].append(round((time.perf_counter() - t0) / calls * 1e3, 2))
        print(f"  {label} round {r + 1}/{rounds}: "
              + ", ".join(f"{k} {v[-1]}" for k, v in out.items()), file=sys.stderr, flush=True)
    return out


def time_steps(variants: list[str], ds, steps: int, rounds: int, vocab: int, maxlen: int):
    """``{variant: {"ms_per_step": [per round], "first_2_steps_s"}}``, rounds interleaved.

    Each variant's compiled Keras train function (what ``fit`` runs per step) is called
    directly on one long-lived iterator, so neither ``fit``'s per-call set-up nor
    tf.data's start-up is timed.
    """
    import keras

    calls, first = {}, {}
    for v in variants:
        keras.utils.set_random_seed(42)
        model = build(v, vocab, maxlen)
        model.make_train_function()
        fn, it = model.train_function, iter(ds)
        calls[v] = lambda fn=fn, it=it: float(fn(it)["loss"])  # waits for the step
        t0 = time.perf_counter()
        with cpu_lstm.cpu_fused_lstm(v == "B-fused"):  # the hook is read at trace time
            calls[v]()
            calls[v]()  # Keras' train function traces again on its second call
        first[v] = round(time.perf_counter() - t0, 2)
        print(f"  {v}: first 2 steps (tracing, graph passes) {first[v]} s", file=sys.stderr,
              flush=True)
    per_step = interleaved(calls, steps, rounds, "step")
    return {v: {"ms_per_step": t, "first_2_steps_s": first[v]} for v, t in per_step.items()}


def lstm_layer(n: int) -> dict:
    """ms for forward + backward of LSTM(128) on one [32, 80, 128] batch."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    x = tf.random.normal([BATCH, 80, 128])
    layer = keras.layers.LSTM(128)
    layer.build(x.shape)

    def make():
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x))
            return tape.gradient(loss, layer.trainable_variables)
        return step

    keras_loop = make()
    keras_loop()
    with cpu_lstm.cpu_fused_lstm(True):
        fused = make()
        fused()
    t = interleaved({"keras_loop": keras_loop, "fused_kernel": fused}, n, 5, "lstm")
    return {f"{k}_ms": statistics.median(v) for k, v in t.items()}


def adam_update(gradient, n: int) -> dict:
    """ms of one Adam update of the embedding from ``gradient`` (tf.IndexedSlices)."""
    import keras
    import numpy as np
    import tensorflow as tf

    shape = tuple(int(d) for d in gradient.dense_shape)
    start = np.random.default_rng(0).normal(0, 0.05, shape).astype("float32")
    var = keras.Variable(start)
    opt = keras.optimizers.Adam(1e-3)
    opt.build([var])
    keras_step = tf.function(lambda: opt.apply([gradient], [var]))
    fused_var, m, v = (tf.Variable(a) for a in (start, np.zeros(shape, "float32"),
                                                 np.zeros(shape, "float32")))
    beta_1, beta_2 = tf.constant(0.9), tf.constant(0.999)

    @tf.function
    def fused_step():
        tf.raw_ops.ResourceApplyAdam(
            var=fused_var.handle, m=m.handle, v=v.handle, beta1_power=beta_1,
            beta2_power=beta_2, lr=tf.constant(1e-3), beta1=beta_1, beta2=beta_2,
            epsilon=tf.constant(1e-7), grad=tf.convert_to_tensor(gradient))

    keras_step()  # one update each from the same start: compare, then time
    fused_step()
    diff = float(np.abs(var.numpy() - fused_var.numpy()).max())
    duplicates = int(len(gradient.indices) - len(np.unique(gradient.indices.numpy())))
    t = interleaved({"keras_adam": keras_step, "resource_apply_adam": fused_step}, n, 5, "adam")
    return {**{f"{k}_ms": statistics.median(v) for k, v in t.items()},
            "max_weight_difference_after_one_update": diff,
            "duplicate_rows_in_gradient": duplicates}


def embedding_gradient(ds, vocab: int, maxlen: int):
    """One real batch's embedding gradient of B's model (tf.IndexedSlices)."""
    import tensorflow as tf

    model = build("B", vocab, maxlen)
    x, y = next(iter(ds))
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
    return tape.gradient(loss, model.get_layer("embedding").trainable_variables)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("KFP_GPU_DATA_DIR", "../shared/data"))
    ap.add_argument("--steps", type=int, default=200, help="steps per variant per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default="docs/benchmarks/cpu_step.json")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; accepted: {', '.join(VARIANTS)}")

    import tensorflow as tf

    from kfp_gpu.training import datasets

    source = str(Path(args.data_dir).resolve() / "imdb" / "imdb_50k.csv.gz")
    with tempfile.TemporaryDirectory() as tmp:
        prepare(source, Path(tmp), BATCH * args.steps, post=False)
        path = str(Path(tmp) / "train")
        meta = datasets.read_meta(path)
        vocab, maxlen = int(meta["vocabulary_size"]), int(meta["feature_shape"][0])
        x, y = datasets.load_arrays(path)
        # the same batches each round, from memory: the step, not the input pipeline
        # (tf.data's share is 0.3 ms/step, docs/benchmarks.md)
        ds = tf.data.Dataset.from_tensor_slices((x, y.astype("float32"))).batch(
            BATCH).cache().repeat()
        steps = time_steps(variants, ds, args.steps, args.rounds, vocab, maxlen)
        adam = adam_update(embedding_gradient(ds, vocab, maxlen), 20)
    lstm = lstm_layer(10)

    for v, r in steps.items():
        r["median_ms"] = statistics.median(r["ms_per_step"])
        r["best_ms"] = min(r["ms_per_step"])
        print(f"step {v}: {r['median_ms']} ms/step median, {r['best_ms']} best of "
              f"{args.rounds} x {args.steps} steps; first 2 steps {r['first_2_steps_s']} s")
    ratio = (round(steps["B"]["median_ms"] / steps["A"]["median_ms"], 3)
             if {"A", "B"} <= steps.keys() else None)
    if ratio is not None:
        print(f"B / A ms/step: {ratio} (medians, interleaved in one process)")
    print(f"lstm fwd+bwd [32, 80, 128]: Keras loop {lstm['keras_loop_ms']} ms, fused kernel "
          f"{lstm['fused_kernel_ms']} ms")
    print(f"adam embedding update: Keras {adam['keras_adam_ms']} ms, ResourceApplyAdam "
          f"{adam['resource_apply_adam_ms']} ms; they differ by up to "
          f"{adam['max_weight_difference_after_one_update']:.2e} after one update "
          f"({adam['duplicate_rows_in_gradient']} repeated rows in the batch)")
    import keras
    import tensorflow as tf

    result = {"date": dt.date.today().isoformat(), "machine": machine(),
              "command": "python " + " ".join(sys.argv), "tensorflow": tf.__version__,
              "keras": keras.__version__, "onednn": train.onednn_enabled(),
              "steps": steps, "ratio_B_over_A": ratio, "lstm_layer": lstm, "adam": adam}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
