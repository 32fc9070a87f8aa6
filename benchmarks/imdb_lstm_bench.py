"""IMDB LSTM benchmark: the seed article's Keras script vs train_text_classifier, side by side.

One run, same machine, same prepared data (the real IMDB reviews, prep_text output):
  A. reference: the article's model as plain Keras (LSTM(128, dropout=0.2,
     recurrent_dropout=0.2): recurrent dropout keeps Keras off the cuDNN kernel), fit on
     numpy arrays with batch 32;
  B. train_text_classifier's configuration (cuDNN-eligible LSTM(128)), through its own
     train() (tf.data cache/shuffle/batch/prefetch);
  C. B's model on data padded the TextVectorization way (first maxlen tokens kept, zeros
     after), to show what the padding choice costs;
then the kfp.local pipeline's wall time against calling the same three functions
directly (overhead ratio), on a subset.

Usage:
  .venv/bin/python benchmarks/imdb_lstm_bench.py --data-dir ../shared/data \
      --out docs/benchmarks/imdb_lstm.json --chart docs/benchmarks/imdb_lstm.png
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


def reference_article(x_train, y_train, x_test, y_test, vocab: int) -> dict:
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

    model.fit(x_train, y_train.astype("float32"), batch_size=BATCH, epochs=EPOCHS,
              callbacks=[Timer()], verbose=0)
    _, acc = model.evaluate(x_test, y_test.astype("float32"), batch_size=256, verbose=0)
    return {"epoch_seconds": times, "accuracy": float(acc)}


def ours(train_path: str, x_test, y_test, work: Path, tag: str) -> dict:
    import keras

    from kfp_gpu.components.train_text_classifier import train as t

    m = t.train(t.TrainConfig(epochs=EPOCHS, batch_size=BATCH), train_path=train_path,
                model_dir=str(work / f"model-{tag}"), checkpoint_dir=str(work / f"ckpt-{tag}"),
                tensorboard_dir=str(work / f"tb-{tag}"))
    model = keras.saving.load_model(work / f"model-{tag}" / t.MODEL_FILE)
    _, acc = model.evaluate(x_test, y_test.astype("float32"), batch_size=256, verbose=0)
    return {"epoch_seconds": m["epoch_seconds"], "accuracy": float(acc)}


def post_padded(out: str, source: str, rows: int) -> None:
    """Re-vectorise with TextVectorization's own padding (first MAXLEN tokens, zeros after)."""
    import numpy as np

    from kfp_gpu import datasets
    from kfp_gpu.components.prep_text import prep, tokens

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


def row(name: str, r: dict, rows: int) -> dict:
    secs = r["epoch_seconds"]
    mean = sum(secs) / len(secs)
    return {"configuration": name, "epoch_seconds": [round(s, 1) for s in secs],
            "seconds_per_epoch": round(mean, 1), "samples_per_sec": round(rows / mean, 1),
            "test_accuracy": round(r["accuracy"], 4)}


def pipeline_overhead(source: str, rows: int, work: Path) -> dict:
    """kfp.local pipeline wall time vs the same functions called in one process."""
    code = f"""
import time, json
t0 = time.perf_counter()
from kfp_gpu.components.prep_text import prep
from kfp_gpu.components.train_text_classifier import train as t
from kfp_gpu.components.evaluate_classifier import evaluate as ev
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
    a.barh(names, [r["seconds_per_epoch"] for r in rows], color=["#999", "#1f77b4", "#7fb0d8"])
    a.set_xlabel("seconds / epoch (lower is better)")
    a.invert_yaxis()
    b.barh(names, [r["test_accuracy"] for r in rows], color=["#999", "#1f77b4", "#7fb0d8"])
    b.set_xlim(0.5, 0.9)
    b.set_xlabel("test accuracy (25k reviews)")
    b.invert_yaxis()
    b.set_yticklabels([])
    fig.suptitle(f"IMDB LSTM, {result['train_rows']} train reviews, batch 32, "
                 f"{EPOCHS} epochs: {result['machine']} ({result['date']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("KFP_GPU_DATA_DIR", "../shared/data"))
    ap.add_argument("--rows", type=int, default=0, help="rows per split (0: all 25,000)")
    ap.add_argument("--overhead-rows", type=int, default=2000)
    ap.add_argument("--out", default="docs/benchmarks/imdb_lstm.json")
    ap.add_argument("--chart", default="docs/benchmarks/imdb_lstm.png")
    args = ap.parse_args()
    source = str(Path(args.data_dir).resolve() / "imdb" / "imdb_50k.csv.gz")
    from kfp_gpu import datasets
    from kfp_gpu.components.prep_text import prep

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stats = prep.run(source=source, train_path=str(work / "train"),
                         test_path=str(work / "test"), vocabulary_path=str(work / "vocab"),
                         max_rows_per_split=args.rows, num_words=WORDS, maxlen=MAXLEN)
        x_train, y_train = datasets.load_arrays(work / "train")
        x_test, y_test = datasets.load_arrays(work / "test")
        vocab = stats["vocabulary_size"]
        n = len(y_train)
        progress(f"A. the article's model, {EPOCHS} epochs on {n} reviews")
        rows = [row("A. article: LSTM(dropout=0.2, recurrent_dropout=0.2), pre-padding",
                    reference_article(x_train, y_train, x_test, y_test, vocab), n)]
        progress("B. train_text_classifier's configuration")
        rows.append(row("B. train_text_classifier: cuDNN-eligible LSTM, pre-padding",
                        ours(str(work / "train"), x_test, y_test, work, "b"), n))
        progress("C. as B on post-padded data")
        post_padded(str(work / "post"), source, args.rows)
        xp, yp = datasets.load_arrays(work / "post" / "test")
        rows.append(row("C. as B, TextVectorization post-padding (first 80 tokens)",
                        ours(str(work / "post" / "train"), xp, yp, work, "c"), n))
        progress(f"kfp.local overhead: the pipeline vs direct calls on {args.overhead_rows} "
                 "reviews per split")
        overhead = pipeline_overhead(source, args.overhead_rows, work)
    import keras
    import tensorflow as tf

    result = {"date": dt.date.today().isoformat(), "machine": machine(),
              "command": "python " + " ".join(sys.argv),
              "tensorflow": tf.__version__, "keras": keras.__version__,
              "train_rows": n, "test_rows": len(y_test), "rows": rows,
              "speedup_B_over_A": round(rows[0]["seconds_per_epoch"]
                                        / rows[1]["seconds_per_epoch"], 2),
              "pipeline_overhead": overhead}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    chart(result, args.chart)
    print("| configuration | s/epoch (each) | samples/sec | test accuracy |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['configuration']} | {r['seconds_per_epoch']} ({', '.join(map(str, r['epoch_seconds']))}) "
              f"| {r['samples_per_sec']} | {r['test_accuracy']} |")
    print(json.dumps(result, indent=2))
    a, b = rows[0], rows[1]
    print(f"imdb_lstm: ours {b['seconds_per_epoch']} s/epoch vs the article's "
          f"{a['seconds_per_epoch']} s/epoch ({b['seconds_per_epoch'] / a['seconds_per_epoch']:.2f}x"
          f"), test accuracy {b['test_accuracy']} vs {a['test_accuracy']}; kfp.local overhead "
          f"{overhead['overhead_ratio']}x ({n} train reviews, {result['machine']})")


if __name__ == "__main__":
    main()
