"""kfp_gpu.datasets: the .npy Dataset format, its tf.data view, and older tf.data snapshots."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kfp_gpu.training import datasets


def test_npy_roundtrip_and_tf_data_view(tmp_path):
    x = np.arange(24, dtype=np.int32).reshape(6, 4)
    y = np.array([0, 1, 0, 1, 1, 0])
    meta = datasets.save(x, y, tmp_path / "d", {"maxlen": 4})
    assert meta["format"] == "npy" and meta["rows"] == 6 and meta["feature_shape"] == [4]
    assert sorted(p.name for p in (tmp_path / "d" / "data").iterdir()) == [
        "features.npy", "labels.npy"]
    xs, ys = datasets.load_arrays(tmp_path / "d")
    assert np.array_equal(xs, x) and ys.dtype == np.int32 and ys.tolist() == y.tolist()
    elems = list(datasets.load(tmp_path / "d").as_numpy_iterator())
    assert len(elems) == 6 and np.array_equal(elems[2][0], x[2]) and elems[2][1] == 0
    with pytest.raises(ValueError, match="6 rows but labels has 5"):
        datasets.save(x, y[:5], tmp_path / "bad")


def test_older_tf_snapshot_directories_still_read(tmp_path):
    import tensorflow as tf

    x = np.ones((3, 2), dtype=np.int32)
    y = np.array([1, 0, 1], dtype=np.int32)
    tf.data.Dataset.from_tensor_slices((x, y)).save(str(tmp_path / "old" / "data"))
    (tmp_path / "old" / "dataset.json").write_text(json.dumps(
        {"format": "tf.data.Dataset.save", "rows": 3, "feature_shape": [2],
         "feature_dtype": "int32"}))
    xs, ys = datasets.load_arrays(tmp_path / "old")
    assert np.array_equal(xs, x) and ys.tolist() == [1, 0, 1]
