"""Dataset artifacts: (features, label) examples as two numpy ``.npy`` arrays.

Writers put ``data/features.npy`` (``[N, ...]``) and ``data/labels.npy`` (int32 ``[N]``)
in the artifact directory (numpy's own format: header with dtype and shape, then the raw
array; read back without parsing, no TensorFlow needed to write or read), plus
a ``dataset.json`` sidecar with the row count, shapes and dtypes so other tools (and the
KFP UI, through artifact metadata) can describe it. :func:`load` wraps the arrays in a
``tf.data.Dataset`` for the trainers. Directories written by earlier versions in
``tf.data.Dataset.save`` format (sidecar ``format``) are still read, through TensorFlow.

Element layout: a tuple ``(features, label)``; for text, ``features`` is int32
``[maxlen]`` token ids and ``label`` int32 scalar; for images, ``features`` is uint8
``[H, W, C]`` and ``label`` int32 scalar.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from kfp_gpu.inputs import storage

SIDECAR = "dataset.json"
DATA_SUBDIR = "data"
FORMAT = "npy"
TF_SNAPSHOT = "tf.data.Dataset.save"
FEATURES, LABELS = "features.npy", "labels.npy"


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
    features = np.asarray(features)
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
        data = Path(tmp) / DATA_SUBDIR
        data.mkdir()
        np.save(data / FEATURES, np.ascontiguousarray(features), allow_pickle=False)
        np.save(data / LABELS, labels, allow_pickle=False)
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

    if read_meta(path).get("format") == TF_SNAPSHOT:
        return tf.data.Dataset.load(str(Path(path) / DATA_SUBDIR))
    return tf.data.Dataset.from_tensor_slices(load_arrays(path))


def load_arrays(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """All examples of ``path`` as numpy ``(features [N, ...], labels int32 [N])``.

    No TensorFlow for this format; TensorFlow for
    directories in the older ``tf.data.Dataset.save`` format.

    Raises:
        FileNotFoundError: ``path`` is not a Dataset written by :func:`save`.
    """
    meta = read_meta(path)
    if meta.get("format") != TF_SNAPSHOT:
        data = Path(path) / DATA_SUBDIR
        return (np.load(data / FEATURES, allow_pickle=False),
                np.load(data / LABELS, allow_pickle=False).astype(np.int32, copy=False))
    ds = load(path).batch(max(1, min(meta["rows"], 65536)))
    xs, ys = [], []
    for x, y in ds.as_numpy_iterator():
        xs.append(x)
        ys.append(y)
    if not xs:
        return (np.zeros([0, *meta["feature_shape"]], dtype=meta["feature_dtype"]),
                np.zeros([0], dtype=np.int32))
    return np.concatenate(xs), np.concatenate(ys)
