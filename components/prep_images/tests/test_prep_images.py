"""prep_images on the real Fashion-MNIST files and on synthetic images."""

import numpy as np
import pytest

from kfp_gpu.components.prep_images import prep
from kfp_gpu.training import datasets


def test_fashion_mnist_subset(tmp_path, shared_data):
    meta = prep.run(str(shared_data / "fashion-mnist"), str(tmp_path / "tr"),
                    str(tmp_path / "te"), max_rows_per_split=500, seed=1)
    assert meta["train"]["rows"] == 500 and meta["test"]["rows"] == 500
    assert meta["test"]["classes"][0] == "T-shirt/top" and meta["test"]["num_classes"] == 10
    x, y = datasets.load_arrays(tmp_path / "te")
    assert x.shape == (500, 28, 28, 1) and x.dtype == np.uint8
    assert sum(meta["test"]["class_counts"]) == 500 and set(y.tolist()) == set(range(10))
    x2, _ = datasets.load_arrays(tmp_path / "tr")
    assert x2.std() > 10  # real pictures, not blanks


def test_synthetic_is_learnable_by_its_band(tmp_path):
    prep.run("synthetic", str(tmp_path / "tr"), str(tmp_path / "te"), synthetic_rows=120,
             image_size=20, seed=3)
    x, y = datasets.load_arrays(tmp_path / "tr")
    band = 20 // 10
    guess = np.argmax([x[:, k * band:(k + 1) * band].mean(axis=(1, 2, 3))
                       for k in range(10)], axis=0)
    assert (guess == y).mean() == 1.0 and len(y) == 120


def test_bad_source_writes_nothing(tmp_path):
    with pytest.raises((ValueError, FileNotFoundError)):
        prep.run(str(tmp_path / "nope.csv"), str(tmp_path / "tr"), str(tmp_path / "te"))
    assert not (tmp_path / "tr").exists()
    with pytest.raises(ValueError):
        prep.subsample(np.zeros(3), np.zeros(3), -1, 0)
