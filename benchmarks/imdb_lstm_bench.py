"""IMDB LSTM benchmark: the seed article's Keras script vs train_text_classifier, side by side.

One run, same machine, same prepared data (the real IMDB reviews, prep_text output); each
configuration trains in its own fresh Python process (so each gets the TensorFlow
settings it would have on its own):
  A.  reference: the article's model as plain Keras (LSTM(128, dropout=0.2,
      recurrent_dropout=0.2): recurrent dropout keeps Keras off the cuDNN kernel), fit on
      numpy arrays with batch 32, under TensorFlow's defaults (as its users run it);
  A1. A with oneDNN forced on (TF_ENABLE_ONEDNN_OPTS=1), to separate that setting's share;
  B.  train_text_classifier's configuration (cuDNN-eligible LSTM(128)) through its own
      train(): tf.data cache/shuffle/batch/prefetch, oneDNN on, Keras' LSTM (its generic
      loop on a CPU, cuDNN on a GPU);
  B1. B with the opt-in fused CPU LSTM kernel (KFP_GPU_FUSED_LSTM=1, cpu_lstm.py);
  C.  B's model on data padded the TextVectorization way (first maxlen tokens kept, zeros
      after), to show what the padding choice costs;
then the kfp.local pipeline's wall time against calling the same three functions
directly (overhead ratio), on a subset. Prints one line per figure.

Usage (the documented figures, full 25k/25k, 2 epochs; about 15 min on 2 CPU cores):
  .venv/bin/python benchmarks/imdb_lstm_bench.py --data-dir ../shared/data \
      --out docs/benchmarks/imdb_lstm.json --chart docs/benchmarks/imdb_lstm.png
Quick look (5,000 train reviews, 1 epoch, rows A and B only, about 2 min):
  .venv/bin/python benchmarks/imdb_lstm_bench.py --quick
Runs on a GPU unchanged (TensorFlow picks it up): on a GPU, A is the generic kernel
and B the cuDNN kernel.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# kfp_gpu first: protobuf 6 dropped MessageFactory.GetPrototype, which TensorFlow 2.18 calls
# at import (five AttributeError tracebacks); kfp_gpu._compat restores it (README, pins).
import kfp_gpu  # noqa: F401

EPOCHS, BATCH, MAXLEN, WORDS = 2, 32, 80, 20000


def machine() -> str:
    try:
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        dev = (tf.config.experimental.get_device_details(gpus[0]).get("device_name")
               if gpus else None)
    except Exception:  # noqa: BLE001
        dev = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores {cpu}" + (f", GPU {dev}" if dev else ", no GPU")


def reference_article(x_train, y_train, x_test, y_test, vocab: int,
                      epochs: int = EPOCHS) -> dict:
    """The article's script: Sequential Embedding -> LSTM(dropout .2, rec. dropout .2)."""
    import keras

    keras.utils.set_random_seed(42)
    model = keras.Sequential([
        keras.Input((x_train.shape[1],), dtype="int32"),
        keras.layers.Embedding(vocab, 128),
        keras.layers.LSTM(128, dropout=0.2, recurrent_dropout=0.2),
        keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    times = []

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.t0)

    model.fit(x_train, y_train.astype("float32"), batch_size=BATCH, epochs=epochs,
              callbacks=[Timer()], verbose=0)
    _, acc = model.evaluate(x_test, y_test.astype("float32"), batch_size=256, verbose=0)
    return {"epoch_seconds": times, "accuracy": float(acc)}


def ours(train_path: str, x_test, y_test, work: Path, tag: str, epochs: int = EPOCHS) -> dict:
    # train first: importing it sets TensorFlow's oneDNN default before TensorFlow loads.
    from kfp_gpu.components.train_text_classifier import train as t

    m = t.train(t.TrainConfig(epochs=epochs, batch_size=BATCH), train_path=train_path,
                model_dir=str(work / f"model-{tag}"), checkpoint_dir=str(work / f"ckpt-{tag}"),
                tensorboard_dir=str(work / f"tb-{tag}"))
    import keras

    model = keras.saving.load_model(work / f"model-{tag}" / t.MODEL_FILE)
    _, acc = model.evaluate(x_test, y_test.astype("float32"), batch_size=256, verbose=0)
    return {"epoch_seconds": m["epoch_seconds"], "accuracy": float(acc),
            "lstm_kernel": m["lstm_kernel"], "onednn": m["onednn"]}


def post_padded(out: str, source: str, rows: int) -> None:
    """Re-vectorise with TextVectorization's own padding (first MAXLEN tokens, zeros after)."""
    import numpy as np

    from kfp_gpu.components.prep_text import prep, tokens
    from kfp_gpu.training import datasets

    df = prep.read_table(source)
    train, test = prep.to_splits(df, text_column="review", label_column="sentiment",
                                 positive_label="positive", negative_label="negative",
                                 split_column="split", test_fraction=0.5, seed=42)
    train, test = prep.subsample(train, rows, 42), prep.subsample(test, rows, 43)
    n = len(train.labels)
    vocab, ids, _ = tokens.encode(np.concatenate([train.texts, test.texts]), fit_rows=n,
                                  num_words=WORDS, maxlen=MAXLEN, keep="first")
    for split, x, dest in ((train, ids[:n], out + "/train"), (test, ids[n:], out + "/test")):
        datasets.save(x, split.labels, dest, {"vocabulary_size": len(vocab), "padding": "post"})


def progress(what: str) -> None:
    """One line before each long step (each takes minutes on a CPU)."""
    print(f"[{time.strftime('%H:%M:%S')}] {what} ...", flush=True)


#: Rows of the table: key -> (label, extra environment of its process).
CONFIGS = {
    "A": ("A. article: LSTM(dropout=0.2, recurrent_dropout=0.2), TF defaults",
          {"TF_ENABLE_ONEDNN_OPTS": None}),
    "A1": ("A1. article, oneDNN forced on", {"TF_ENABLE_ONEDNN_OPTS": "1"}),
    "B": ("B. train_text_classifier: cuDNN-eligible LSTM, oneDNN, Keras' loop", {}),
    "B1": ("B1. as B, the opt-in fused CPU LSTM kernel", {"KFP_GPU_FUSED_LSTM": "1"}),
    "C": ("C. as B, TextVectorization post-padding (first 80 tokens)", {}),
}


def run_config(key: str, work: Path, epochs: int) -> dict:
    """Train configuration ``key`` on the data under ``work`` (in this process)."""
    if key not in ("A", "A1"):  # as the component does: train's defaults before TensorFlow
        from kfp_gpu.components.train_text_classifier import train  # noqa: F401
    from kfp_gpu.training import datasets

    if key in ("A", "A1"):
        x_train, y_train = datasets.load_arrays(work / "train")
        x_test, y_test = datasets.load_arrays(work / "test")
        vocab = int(datasets.read_meta(work / "train")["vocabulary_size"])
        return reference_article(x_train, y_train, x_test, y_test, vocab, epochs)
    data = work / "post" if key == "C" else work
    x_test, y_test = datasets.load_arrays(data / "test")
    return ours(str(data / "train"), x_test, y_test, work, key.lower(), epochs)


def run_config_process(key: str, work: Path, epochs: int) -> dict:
    """:func:`run_config` in a fresh Python process with the configuration's environment."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    for name, value in CONFIGS[key][1].items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    out = subprocess.run([sys.executable, __file__, "--one", key, "--work", str(work),
                          "--epochs", str(epochs)], check=True, capture_output=True,
                         text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def row(name: str, r: dict, rows: int) -> dict:
    secs = r["epoch_seconds"]
    mean = sum(secs) / len(secs)
    return {"configuration": name, "epoch_seconds": [round(s, 1) for s in secs],
            "seconds_per_epoch": round(mean, 1), "samples_per_sec": round(rows / mean, 1),
            "test_accuracy": round(r["accuracy"], 4),
            **{k: r[k] for k in ("lstm_kernel", "onednn") if k in r}}


def pipeline_overhead(source: str, rows: int, work: Path) -> dict:
    """kfp.local pipeline wall time vs the same functions called in one process."""
    code = f"""
import time, json
t0 = time.perf_counter()
from kfp_gpu.components.prep_text import prep
from kfp_gpu.components.train_text_classifier import train as t
from kfp_gpu.components.shared import evaluate as ev
w = {str(work / 'direct')!r}
prep.run(source={source!r}, train_path=w + '/train', test_path=w + '/test',
         vocabulary_path=w + '/vocab', max_rows_per_split={rows})
t.train(t.TrainConfig(epochs=1), train_path=w + '/train', model_dir=w + '/model',
        checkpoint_dir=w + '/ckpt', tensorboard_dir=w + '/tb')
y, s = ev.predict(w + '/model', w + '/test')
ev.compute_metrics(y, s)
print(json.dumps({{"seconds": time.perf_counter() - t0}}))
"""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    direct = json.loads(out.strip().splitlines()[-1])["seconds"]
    direct_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("kfp-gpu")), "run", "imdb-lstm",
                    "--local", "-p", f"source={source}", "-p", f"max_rows_per_split={rows}",
                    "-p", "epochs=1", "--pipeline-root", str(work / "kfp")], check=True,
                   capture_output=True)
    kfp_wall = time.perf_counter() - t0
    return {"rows_per_split": rows, "epochs": 1, "direct_seconds": round(direct_wall, 1),
            "direct_seconds_in_process": round(direct, 1),
            "kfp_local_seconds": round(kfp_wall, 1),
            "overhead_ratio": round(kfp_wall / direct_wall, 2)}


def chart(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    names = [r["configuration"].replace(": ", ":\n") for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = ["#999" if r["configuration"].startswith("A") else "#1f77b4" for r in rows]
    a.barh(names, [r["seconds_per_epoch"] for r in rows], color=colors)
    a.set_xlabel("seconds / epoch (lower is better)")
    a.invert_yaxis()
    b.barh(names, [r["test_accuracy"] for r in rows], color=colors)
    b.set_xlim(0.5, 0.9)
    b.set_xlabel(f"test accuracy ({result['test_rows']} reviews)")
    b.invert_yaxis()
    b.set_yticklabels([])
    fig.suptitle(f"IMDB LSTM, {result['train_rows']} train reviews, batch 32, "
                 f"{result['epochs']} epochs: {result['machine']} ({result['date']})",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("KFP_GPU_DATA_DIR", "../shared/data"))
    ap.add_argument("--rows", type=int, default=0, help="rows per split (0: all 25,000)")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--configs", default="A,A1,B,B1,C", help="rows of the table, in order")
    ap.add_argument("--overhead-rows", type=int, default=2000, help="0: skip the kfp.local row")
    ap.add_argument("--quick", action="store_true",
                    help="5,000 reviews per split, 1 epoch, rows A and B, no kfp.local row")
    ap.add_argument("--out", default="docs/benchmarks/imdb_lstm.json")
    ap.add_argument("--chart", default="docs/benchmarks/imdb_lstm.png")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one configuration
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.rows, args.epochs, args.overhead_rows = 5000, 1, 0
        if args.configs == ap.get_default("configs"):
            args.configs = "A,B"
        if args.out == ap.get_default("out"):
            args.out, args.chart = "/tmp/imdb_lstm_quick.json", "/tmp/imdb_lstm_quick.png"
    return args


def prepare(source: str, work: Path, rows: int, post: bool) -> dict:
    from kfp_gpu.components.prep_text import prep

    stats = prep.run(source=source, train_path=str(work / "train"),
                     test_path=str(work / "test"), vocabulary_path=str(work / "vocab"),
                     max_rows_per_split=rows, num_words=WORDS, maxlen=MAXLEN)
    if post:
        post_padded(str(work / "post"), source, rows)
    return stats


def main() -> None:
    args = parse_args()
    if args.one:
        print(json.dumps(run_config(args.one, Path(args.work), args.epochs)))
        return
    source = str(Path(args.data_dir).resolve() / "imdb" / "imdb_50k.csv.gz")
    keys = [k.strip() for k in args.configs.split(",") if k.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stats = prepare(source, work, args.rows, "C" in keys)
        n = stats["train"]["rows"]
        rows = []
        for key in keys:
            rows.append(row(CONFIGS[key][0], run_config_process(key, work, args.epochs), n))
            r = rows[-1]
            print(f"{r['configuration']}: {r['seconds_per_epoch']} s/epoch "
                  f"({', '.join(map(str, r['epoch_seconds']))}), {r['samples_per_sec']} "
                  f"samples/s, test accuracy {r['test_accuracy']}", flush=True)
        overhead = (pipeline_overhead(source, args.overhead_rows, work)
                    if args.overhead_rows else None)
    report(args, rows, keys, n, stats["test"]["rows"], overhead)


def report(args, rows: list[dict], keys: list[str], n: int, test_rows: int,
           overhead: dict | None) -> None:
    import keras
    import tensorflow as tf

    by_key = dict(zip(keys, rows))
    ratio = (round(by_key["B"]["seconds_per_epoch"] / by_key["A"]["seconds_per_epoch"], 3)
             if {"A", "B"} <= by_key.keys() else None)
    result = {"date": dt.date.today().isoformat(), "machine": machine(),
              "command": "python " + " ".join(sys.argv),
              "tensorflow": tf.__version__, "keras": keras.__version__,
              "train_rows": n, "test_rows": test_rows, "epochs": args.epochs, "rows": rows,
              "ratio_B_over_A": ratio, "pipeline_overhead": overhead}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    chart(result, args.chart)
    if ratio is not None:
        print(f"B / A s/epoch: {ratio} (target <= 0.25), {result['machine']}, {n} train "
              f"reviews, {args.epochs} epoch(s)")
    if overhead:
        print(f"kfp.local overhead: {overhead['kfp_local_seconds']} s as a pipeline vs "
              f"{overhead['direct_seconds']} s direct = {overhead['overhead_ratio']}x")
    print(f"wrote {args.out} and {args.chart}")


if __name__ == "__main__":
    main()
