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
import math
import time
from pathlib import Path

import numpy as np

from kfp_gpu.inputs import errors, storage
from kfp_gpu.training import datasets

PREDICTIONS_FILE = "predictions.npz"
SHARD_META_FILE = "shard.json"
#: Relative slack for a GPU fraction written with 6 significant digits (``%g``, as
#: :func:`gpu_for` and the compiled ``gpu-fraction`` annotation write it: 1/6 ->
#: ``0.166667``, a little more than 1/6), at most 5e-6 off.
FRACTION_SLACK = 1e-5


def gpu_for(num_shards: int) -> str:
    """The GPU request of each shard when ``num_shards`` shards share one GPU:
    ``fraction:1/K`` as text (4 -> ``fraction:0.25``, 3 -> ``fraction:0.333333``); one
    shard is a whole GPU, ``gpu:1`` (KAI refuses gpu-fraction >= 1).

    Raises:
        ValueError: ``num_shards`` < 1.
    """
    if num_shards < 1:
        raise ValueError(f"shards must be an integer >= 1, got {num_shards}")
    return "gpu:1" if num_shards == 1 else f"fraction:{1 / num_shards:g}"


def shards_per_gpu(fraction: float) -> int:
    """How many shards of GPU fraction ``fraction`` (0 < F < 1) fit on one GPU:
    ``floor(1/F)``, with :data:`FRACTION_SLACK` for a fraction written to 6 digits
    (0.25 -> 4, 0.166667 -> 6, 0.3 -> 3).

    Raises:
        ValueError: ``fraction`` not in (0, 1).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"a GPU fraction is in (0, 1), got {fraction}")
    return math.floor(1.0 / fraction * (1.0 + FRACTION_SLACK))


def check_fits(num_shards: int, fraction: float) -> None:
    """Refuse ``num_shards`` shards that would not fit on one GPU at the per-shard GPU
    fraction the pipeline was compiled with (fractional-eval puts its K shards on one GPU:
    the fraction is a pod annotation fixed at compile time, the shard count a run
    parameter). ``fraction`` 0: the shards' request is not a fraction (``gpu:1``, MIG,
    ...), any count is accepted.

    Raises:
        kfp_gpu.inputs.errors.InputError: ``num_shards * fraction`` > 1 GPU; one line naming
            the counts accepted and the compile option for ``num_shards``.
    """
    if fraction <= 0:
        return
    most = shards_per_gpu(fraction)
    if num_shards > most:
        raise errors.InputError(
            f"num_shards={num_shards} does not fit the GPU fraction this pipeline was "
            f"compiled with: {num_shards} shards x gpu-fraction {fraction:g} = "
            f"{num_shards * fraction:g} GPUs, and its shards share one GPU; accepted is "
            f"num_shards <= {most}, or compile for {num_shards} shards (kfp-gpu compile -o "
            f"DIR --only fractional-eval --gpu {gpu_for(num_shards)})")


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


def plan(rows: int, num_shards: int, gpu_fraction: float = 0.0) -> list[int]:
    """Shard indices ``[0, .., K-1]`` after checking ``K`` against ``rows`` (see above) and
    against the shards' compiled GPU fraction (:func:`check_fits`; 0: not a fraction).

    Raises:
        ValueError: see :func:`shard_bounds`; InputError: see :func:`check_fits`.
    """
    check_fits(num_shards, gpu_fraction)
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
