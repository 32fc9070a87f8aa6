"""Sharded evaluation logic (fractional-eval): contiguous shards, per-shard predictions,
and their exact recombination.

Shard ``i`` of ``K`` over ``N`` rows is the contiguous range
``[i * N // K, (i + 1) * N // K)``; concatenating the shards' predictions in shard order
gives back the whole set in its original order, so
``evaluate.compute_metrics`` on the concatenation is the metric of one pass over the set
(the same labels in the same order; the scores are the model's per-row outputs).

Predictions file (one per shard, ``predictions.npz`` in the shard's Dataset directory):
``y_true`` int32 ``[n]``, ``y_score`` float32 ``[n]`` or ``[n, C]``, ``start``, ``stop``,
``rows`` (N of the whole set) int64 scalars.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from kfp_gpu.inputs import storage
from kfp_gpu.training import datasets

PREDICTIONS_FILE = "predictions.npz"
SHARD_META_FILE = "shard.json"


def shard_bounds(rows: int, num_shards: int, index: int) -> tuple[int, int]:
    """``(start, stop)`` rows of shard ``index`` (0-based) of ``num_shards``.

    Raises:
        ValueError: rows < 1, num_shards not in 1..rows, index not in 0..num_shards-1.
    """
    if rows < 1:
        raise ValueError(f"the test set is empty (rows={rows})")
    if not 1 <= num_shards <= rows:
        raise ValueError(f"num_shards must be an integer in 1..{rows} (rows), got {num_shards}")
    if not 0 <= index < num_shards:
        raise ValueError(f"shard index must be in 0..{num_shards - 1}, got {index}")
    return index * rows // num_shards, (index + 1) * rows // num_shards


def plan(rows: int, num_shards: int) -> list[int]:
    """Shard indices ``[0, .., K-1]`` after checking ``K`` against ``rows`` (see above)."""
    shard_bounds(rows, num_shards, 0)
    return list(range(num_shards))


def predict_range(model_path: str, dataset_path: str, start: int, stop: int,
                  batch_size: int = 256):
    """Labels and scores of rows ``[start, stop)`` of a Dataset (evaluate.predict's
    conventions: ``y_true`` int32 ``[n]``, ``y_score`` float32 ``[n]`` or ``[n, C]``)."""
    import tensorflow as tf

    from kfp_gpu.components.shared import evaluate as ev

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    model = ev.load_model(model_path)
    ds = datasets.load(dataset_path).skip(start).take(stop - start)
    y_true = np.fromiter((int(y) for _, y in ds.as_numpy_iterator()), dtype=np.int32)
    scores = model.predict(ds.map(lambda x, y: x).batch(batch_size).prefetch(tf.data.AUTOTUNE),
                           verbose=0).astype(np.float32)
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    if len(y_true) != stop - start:
        raise ValueError(f"rows [{start}, {stop}) asked but {len(y_true)} read")
    return y_true, scores


def evaluate_shard(model_path: str, dataset_path: str, out_dir: str, index: int,
                   num_shards: int, batch_size: int = 256) -> dict:
    """Predict one shard and write ``predictions.npz`` + ``shard.json`` to ``out_dir``
    atomically. Returns the shard facts (index, start, stop, rows, seconds,
    samples_per_sec)."""
    rows = int(datasets.read_meta(dataset_path)["rows"])
    start, stop = shard_bounds(rows, num_shards, index)
    t0 = time.perf_counter()
    y_true, y_score = predict_range(model_path, dataset_path, start, stop, batch_size)
    seconds = time.perf_counter() - t0
    facts = {"index": index, "num_shards": num_shards, "start": start, "stop": stop,
             "rows": rows, "seconds": round(seconds, 3),
             "samples_per_sec": round((stop - start) / seconds, 1) if seconds > 0 else 0.0}
    with storage.atomic_dir(out_dir) as tmp:
        np.savez(Path(tmp) / PREDICTIONS_FILE, y_true=y_true, y_score=y_score,
                 start=np.int64(start), stop=np.int64(stop), rows=np.int64(rows))
        (Path(tmp) / SHARD_META_FILE).write_text(json.dumps(facts, indent=2), encoding="utf-8")
    return facts


def load_predictions(shard_dir: str) -> dict:
    """One shard's predictions file as a dict of arrays/ints."""
    with np.load(Path(shard_dir) / PREDICTIONS_FILE) as z:
        return {"y_true": z["y_true"], "y_score": z["y_score"], "start": int(z["start"]),
                "stop": int(z["stop"]), "rows": int(z["rows"])}


def combine(parts: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate shard predictions in row order after checking they tile ``[0, rows)``.

    Raises:
        ValueError: no parts, shards of different sets, a gap, an overlap, or a length
            that does not match the shard's range.
    """
    if not parts:
        raise ValueError("no shard predictions to combine")
    parts = sorted(parts, key=lambda p: p["start"])
    rows = {p["rows"] for p in parts}
    if len(rows) != 1:
        raise ValueError(f"shards come from sets of different sizes: {sorted(rows)}")
    expected = 0
    for p in parts:
        if p["start"] != expected:
            kind = "gap" if p["start"] > expected else "overlap"
            raise ValueError(f"shard {kind} at row {expected}: next shard starts at "
                             f"{p['start']}")
        if len(p["y_true"]) != p["stop"] - p["start"] or len(p["y_score"]) != len(p["y_true"]):
            raise ValueError(f"shard [{p['start']}, {p['stop']}) holds {len(p['y_true'])} "
                             f"labels and {len(p['y_score'])} scores")
        expected = p["stop"]
    if expected != rows.pop():
        raise ValueError(f"shards cover rows [0, {expected}) of {parts[0]['rows']}")
    return (np.concatenate([p["y_true"] for p in parts]),
            np.concatenate([p["y_score"] for p in parts]))
