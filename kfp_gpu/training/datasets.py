"""Dataset artifacts: (features, label) examples in tf.data's own on-disk format.

Writers use ``tf.data.Dataset.save`` (the snapshot format: sharded, element spec
recorded, read back by ``tf.data.Dataset.load`` without a parsing step), plus a
``dataset.json`` sidecar with the row count, shapes and dtypes so non-TensorFlow
tools (and the KFP UI, through artifact metadata) can describe it.

Element layout: a tuple ``(features, label)``; for text, ``features`` is int32
``[maxlen]`` token ids and ``label`` int32 scalar; for images, ``features`` is uint8
``[H, W, C]`` and ``label`` int32 scalar.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from kfp_gpu import storage

SIDECAR = "dataset.json"
DATA_SUBDIR = "data"
FORMAT = "tf.data.Dataset.save"


def save(features: np.ndarray, labels: np.ndarray, path: str | os.PathLike,
         extra: dict | None = None) -> dict:
    """Write ``(features[i], labels[i])`` examples to directory ``path`` atomically.

    Args:
        features: array ``[N, ...]`` (int32 token ids, uint8 pixels, float32 ...).
        labels: int array ``[N]``; stored as int32.
        path: output directory (replaced as a whole if it exists).
        extra: more JSON-serialisable facts for the sidecar (e.g. ``maxlen``).

    Returns:
        The sidecar dict (``rows``, ``feature_shape``, ``feature_dtype``, ``format`` ...).

    Raises:
        ValueError: if ``features`` and ``labels`` have different lengths.
    """
    import tensorflow as tf

    labels = np.asarray(labels).astype(np.int32)
    if len(features) != len(labels):
        raise ValueError(f"features has {len(features)} rows but labels has {len(labels)}")
    meta = {
        "format": FORMAT,
        "rows": len(labels),
        "feature_shape": list(features.shape[1:]),
        "feature_dtype": str(features.dtype),
        "label_dtype": "int32",
        **(extra or {}),
    }
    with storage.atomic_dir(path) as tmp:
        ds = tf.data.Dataset.from_tensor_slices((features, labels))
        ds.save(str(Path(tmp) / DATA_SUBDIR))
        (Path(tmp) / SIDECAR).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta


def read_meta(path: str | os.PathLike) -> dict:
    """The sidecar of a Dataset artifact directory.

    Raises:
        FileNotFoundError: if ``path`` is not a Dataset written by :func:`save`.
    """
    f = Path(path) / SIDECAR
    if not f.exists():
        raise FileNotFoundError(f"{path} is not a kfp-gpu Dataset (no {SIDECAR})")
    return json.loads(f.read_text(encoding="utf-8"))


def load(path: str | os.PathLike):
    """A ``tf.data.Dataset`` of unbatched ``(features, label)`` examples from ``path``."""
    import tensorflow as tf

    read_meta(path)
    return tf.data.Dataset.load(str(Path(path) / DATA_SUBDIR))


def load_arrays(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """All examples of ``path`` as numpy ``(features [N, ...], labels int32 [N])``."""
    meta = read_meta(path)
    ds = load(path).batch(max(1, min(meta["rows"], 65536)))
    xs, ys = [], []
    for x, y in ds.as_numpy_iterator():
        xs.append(x)
        ys.append(y)
    if not xs:
        return (np.zeros([0, *meta["feature_shape"]], dtype=meta["feature_dtype"]),
                np.zeros([0], dtype=np.int32))
    return np.concatenate(xs), np.concatenate(ys)
