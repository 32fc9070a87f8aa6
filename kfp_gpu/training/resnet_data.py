"""Image data for the ResNet trainer: Fashion-MNIST IDX files, npz, Dataset artifacts, synthetic.

Pure numpy (no TensorFlow at import time, except :func:`load_source` reading a kfp-gpu
Dataset artifact, which imports it lazily through :mod:`kfp_gpu.training.datasets`).

Array layout everywhere: images ``uint8 [N, H, W, C]`` (channels last, C = 1 for
grey), labels ``int32 [N]`` with values ``0 .. classes-1``.

Sources (the ``source`` argument of :func:`load_source`):
- a directory holding the four Fashion-MNIST/MNIST IDX files
  (``train-images-idx3-ubyte[.gz]`` ...; the format of LeCun's MNIST page, which
  Fashion-MNIST (Xiao et al. 2017, github.com/zalandoresearch/fashion-mnist) reuses);
- ``fashion-mnist``: that directory in the data folder (:func:`kfp_gpu.inputs.datadir.resolve`:
  ``$KFP_GPU_DATA_DIR``, else ``../shared/data`` beside the checkout);
- an ``.npz`` file with ``x_train, y_train, x_test, y_test`` (the layout of
  ``keras.datasets.*.load_data`` caches);
- a kfp-gpu Dataset artifact directory (``dataset.json`` sidecar) -- train split only;
- ``synthetic``: random images, see :func:`synthetic`.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kfp_gpu.inputs import datadir

FASHION_MNIST = "fashion-mnist"
SYNTHETIC = "synthetic"
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
# IDX type codes (LeCun's MNIST page): 0x08 unsigned byte ... 0x0E double.
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
               0x0E: ">f8"}


@dataclass(frozen=True)
class ImageData:
    """Train/test split: ``x_* uint8 [N, H, W, C]``, ``y_* int32 [N]``; test may be empty."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int


def parse_idx(raw: bytes) -> np.ndarray:
    """Decode one IDX file (already gunzipped) into a numpy array.

    Format: 2 zero bytes, a type code, the number of dimensions ``d``, ``d`` big-endian
    uint32 sizes, then the data in C order.

    Raises:
        ValueError: bad magic, unknown type code, or a data size that does not match.
    """
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError("not an IDX file (magic must start with two zero bytes)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"unknown IDX type code 0x{code:02X}; accepted: "
                         + ", ".join(f"0x{c:02X}" for c in _IDX_DTYPES))
    header = 4 + 4 * ndim
    shape = tuple(int(s) for s in np.frombuffer(raw[4:header], dtype=">u4"))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(f"IDX data has {len(raw) - header} bytes, shape {shape} needs {expected}")
    return np.frombuffer(raw[header:], dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file, gzip-compressed (``.gz``, sniffed by magic) or not."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return parse_idx(raw)


def _find(directory: Path, stem: str) -> Path:
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx")):
        if (directory / name).exists():
            return directory / name
    raise FileNotFoundError(f"{directory} has no {stem}[.gz] (IDX file of MNIST/Fashion-MNIST)")


def load_idx_dir(directory: str | os.PathLike) -> ImageData:
    """Load the four MNIST-style IDX files of ``directory`` as :class:`ImageData`.

    Images come back ``uint8 [N, 28, 28, 1]``; ``classes`` = max label + 1.

    Raises:
        FileNotFoundError: a file is missing. ValueError: inconsistent files.
    """
    d = Path(directory)
    arrays = {k: read_idx(_find(d, stem)) for k, stem in IDX_FILES.items()}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(f"{d}: {split} images {x.shape} and labels {y.shape} do not match")
    return _as_image_data(arrays["x_train"], arrays["y_train"], arrays["x_test"],
                          arrays["y_test"])


def _as_image_data(x_train, y_train, x_test, y_test, classes: int | None = None) -> ImageData:
    def img(x):
        x = np.asarray(x)
        if x.ndim == 3:
            x = x[..., None]
        if x.ndim != 4:
            raise ValueError(f"images must be [N, H, W] or [N, H, W, C], got {x.shape}")
        if x.dtype != np.uint8:
            if x.size and (x.min() < 0 or x.max() > 255):
                raise ValueError("non-uint8 images must hold values in 0..255")
            x = x.astype(np.uint8)
        return x

    y_train = np.asarray(y_train).astype(np.int32).reshape(-1)
    y_test = np.asarray(y_test).astype(np.int32).reshape(-1)
    if classes is None:
        classes = int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
    return ImageData(img(x_train), y_train, img(x_test), y_test, classes)


def synthetic(rows: int, image_size: int = 28, channels: int = 1, classes: int = 10,
              seed: int = 0, test_rows: int | None = None) -> ImageData:
    """Learnable synthetic images: class ``k`` is a bright horizontal band at row band ``k``.

    Random noise (uint8 0..127) plus the band (+128) makes the task learnable, so a
    pipeline run on synthetic data still reports a meaningful accuracy.

    Raises:
        ValueError: ``rows < 1``, ``image_size < classes`` or ``classes < 2``.
    """
    if rows < 1 or classes < 2 or image_size < classes:
        raise ValueError("synthetic needs rows >= 1, classes >= 2 and image_size >= classes")
    rng = np.random.default_rng(seed)
    test_rows = max(1, rows // 6) if test_rows is None else test_rows

    def make(n):
        y = rng.integers(0, classes, size=n, dtype=np.int32)
        x = rng.integers(0, 128, size=(n, image_size, image_size, channels), dtype=np.uint8)
        band = image_size // classes
        for k in range(classes):
            x[y == k, k * band:(k + 1) * band] += 128
        return x, y

    xtr, ytr = make(rows)
    xte, yte = make(test_rows)
    return ImageData(xtr, ytr, xte, yte, classes)


def check_source(source: str) -> None:
    """Refuse a local ``source`` that does not exist, before any rank starts TensorFlow.

    ``synthetic`` and ``gs://``/``s3://`` URIs pass (the latter are read later, through
    :mod:`kfp_gpu.inputs.storage`); ``fashion-mnist`` must be in the data folder.

    Raises:
        FileNotFoundError: the path, or ``fashion-mnist`` in the data folder, is missing;
        the message names it (and, for ``fashion-mnist``, how the folder was chosen).
    """
    if not source or source == SYNTHETIC or source.startswith(("gs://", "s3://")):
        return
    if source == FASHION_MNIST:
        datadir.find(FASHION_MNIST)
    elif not Path(source).exists():
        raise FileNotFoundError(f"{source} not found: --data takes an IDX directory, "
                                "'fashion-mnist', an .npz file, a kfp-gpu Dataset directory "
                                "or 'synthetic'")


def load_source(source: str, test_source: str = "", synthetic_rows: int = 6000,
                image_size: int = 28, seed: int = 0) -> ImageData:
    """Load images from ``source`` (see the module docstring for the accepted forms).

    Args:
        source: IDX directory, ``fashion-mnist``, ``.npz`` file, Dataset artifact directory
            or ``synthetic``. ``gs://`` npz files are read through kfp_gpu.inputs.storage.
        test_source: optional Dataset artifact directory (or npz) for the test split,
            used when ``source`` is a Dataset artifact (which holds one split).
        synthetic_rows, image_size, seed: for ``synthetic`` only.

    Raises:
        ValueError: ``source`` is empty or of no accepted form.
        FileNotFoundError: ``source`` does not exist.
    """
    if not source:
        raise ValueError("no data source; accepted: an IDX directory, 'fashion-mnist', "
                         "an .npz file, a kfp-gpu Dataset directory or 'synthetic'")
    if source == SYNTHETIC:
        return synthetic(synthetic_rows, image_size=image_size, seed=seed)
    if source == FASHION_MNIST:
        return load_idx_dir(datadir.find(FASHION_MNIST))
    if source.endswith(".npz"):
        from kfp_gpu.inputs import storage

        with storage.local_copy(source) as p, np.load(p) as z:
            missing = {"x_train", "y_train"} - set(z.files)
            if missing:
                raise ValueError(f"{source} lacks {sorted(missing)}; needs x_train, y_train "
                                 "(and optionally x_test, y_test)")
            xte = z["x_test"] if "x_test" in z.files else z["x_train"][:0]
            yte = z["y_test"] if "y_test" in z.files else z["y_train"][:0]
            return _as_image_data(z["x_train"], z["y_train"], xte, yte)
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"data source not found: {source}")
    from kfp_gpu.training import datasets

    if (path / datasets.SIDECAR).exists():
        meta = datasets.read_meta(path)
        xtr, ytr = datasets.load_arrays(path)
        if test_source:
            test = load_source(test_source)
            # A Dataset artifact holds one split: its rows are the test split here.
            xte, yte = ((test.x_test, test.y_test) if len(test.x_test)
                        else (test.x_train, test.y_train))
        else:
            xte, yte = xtr[:0], ytr[:0]
        return _as_image_data(xtr, ytr, xte, yte, classes=meta.get("num_classes"))
    if path.is_dir():
        return load_idx_dir(path)
    raise ValueError(f"cannot read {source!r}; accepted: an IDX directory, 'fashion-mnist', "
                     "an .npz file, a kfp-gpu Dataset directory or 'synthetic'")


def shard(x: np.ndarray, y: np.ndarray, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank ``rank``'s disjoint share of ``(x, y)``: every ``size``-th row from ``rank``.

    Raises:
        ValueError: ``not 0 <= rank < size``.
    """
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} outside world size {size}")
    return x[rank::size], y[rank::size]
