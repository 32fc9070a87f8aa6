"""prep_images logic: Fashion-MNIST (IDX), an npz file, or synthetic images -> Datasets.

Reading is :func:`kfp_gpu.training.resnet_data.load_source` (IDX parsed with numpy from the
``.gz`` files); writing is :func:`kfp_gpu.training.datasets.save`. Each output Dataset holds
``(uint8 [H, W, C], int32 label)`` examples; its sidecar (``dataset.json``) adds
``num_classes``, ``classes`` (class names, read by evaluate_classifier) and ``source``.
"""

from __future__ import annotations

import numpy as np

from kfp_gpu.training import datasets, resnet_data


def subsample(x: np.ndarray, y: np.ndarray, max_rows: int, seed: int):
    """A seeded random subset of at most ``max_rows`` rows (0: all), in a fixed order."""
    if max_rows < 0:
        raise ValueError(f"max_rows_per_split must be >= 0, got {max_rows}")
    if not max_rows or len(x) <= max_rows:
        return x, y
    idx = np.sort(np.random.default_rng(seed).choice(len(x), max_rows, replace=False))
    return x[idx], y[idx]


def class_names(source: str, classes: int) -> list[str]:
    """Fashion-MNIST's ten names for the Fashion-MNIST source, else ``"0" .. "C-1"``."""
    if classes == len(resnet_data.FASHION_MNIST_CLASSES) and "fashion" in source.lower():
        return list(resnet_data.FASHION_MNIST_CLASSES)
    return [str(i) for i in range(classes)]


def run(source: str, train_path: str, test_path: str, max_rows_per_split: int = 0,
        synthetic_rows: int = 6000, image_size: int = 28, seed: int = 0) -> dict:
    """Read ``source`` and write the train and test Dataset artifacts.

    Args:
        source: ``fashion-mnist`` (``$KFP_GPU_DATA_DIR/fashion-mnist``), an IDX directory,
            an ``.npz`` (local or ``gs://``) with x_train/y_train/x_test/y_test, or
            ``synthetic`` (learnable random images, see resnet_data.synthetic).
        train_path / test_path: output directories.
        max_rows_per_split: seeded subset per split (0: all).
        synthetic_rows, image_size: for ``synthetic`` (test rows = train rows / 6).
        seed: subsampling / synthetic seed.

    Returns:
        ``{"train": sidecar, "test": sidecar}``.

    Raises:
        ValueError: unknown source form, bad sizes, or an empty test split.
        FileNotFoundError: missing input files.
    """
    data = resnet_data.load_source(source, synthetic_rows=synthetic_rows,
                                   image_size=image_size, seed=seed)
    if not len(data.x_test):
        raise ValueError(f"{source} has no test split (x_test/y_test)")
    names = class_names(source, data.classes)
    extra = {"num_classes": data.classes, "classes": names, "source": source}
    out = {}
    for split, x, y, path in (("train", data.x_train, data.y_train, train_path),
                              ("test", data.x_test, data.y_test, test_path)):
        x, y = subsample(x, y, max_rows_per_split, seed)
        out[split] = datasets.save(x, y, path, extra={**extra, "split": split,
                                                      "class_counts": np.bincount(
                                                          y, minlength=data.classes).tolist()})
    return out
