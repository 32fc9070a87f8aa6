"""prep_text logic: labelled text -> tokenised, padded train/test Datasets.

Pure helpers (reading, validation, splitting, vectorising) are separate from
:func:`run`, which writes the artifacts. Tokenisation (:mod:`.tokens`, numpy and Arrow
kernels over all reviews at once, no TensorFlow) gives exactly the ids of Keras
``TextVectorization`` fitted on the training split only, padded/truncated with
``keras.utils.pad_sequences`` defaults (``padding="pre"``, ``truncating="pre"``): the
LAST ``maxlen`` tokens are kept with zeros in front, which is what the Keras IMDB
example does and what a cuDNN LSTM without masking needs to see the end of a review
(keeping the first tokens instead cost 0.14 test accuracy, see docs/benchmarks.md).
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kfp_gpu.components.prep_text import tokens
from kfp_gpu.inputs import errors as ie
from kfp_gpu.inputs import storage
from kfp_gpu.training import datasets

log = logging.getLogger(__name__)

KERAS_IMDB = "keras:imdb"
FORMATS = ("csv", "jsonl", "parquet")
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Split:
    """One split: ``texts`` (str, [N]) and ``labels`` (int32 0/1, [N])."""

    texts: np.ndarray
    labels: np.ndarray


def sniff_format(uri: str) -> str:
    """``csv`` / ``jsonl`` / ``parquet`` from the file name (``.gz`` allowed for text).

    Raises:
        ValueError: naming the accepted suffixes.
    """
    name = uri.lower().removesuffix(".gz")
    for suffix, fmt in ((".csv", "csv"), (".jsonl", "jsonl"), (".json", "jsonl"),
                        (".parquet", "parquet"), (".pq", "parquet")):
        if name.endswith(suffix):
            return fmt
    raise ValueError(f"cannot tell the format of {uri!r}; accepted suffixes: .csv, .csv.gz, "
                     ".jsonl, .jsonl.gz, .json, .parquet (or pass data_format=csv|jsonl|parquet)")


def read_table(uri: str, data_format: str = "auto"):
    """Read a CSV (gzip too), JSON Lines or Parquet table from a local path, ``gs://`` or
    ``s3://`` (:func:`kfp_gpu.inputs.storage.local_copy`).

    Returns:
        pandas.DataFrame with the file's columns as read (text columns as str).

    Raises:
        FileNotFoundError: the path or object does not exist.
        ValueError: unknown format. The :mod:`kfp_gpu.inputs.errors` family (a ValueError):
            UndecodableFile (not UTF-8, unparseable), CorruptArchive (bad or truncated
            gzip), EmptyInput (an empty file); each names ``uri`` as its ``input``.
    """
    import pandas as pd

    fmt = sniff_format(uri) if data_format == "auto" else data_format
    if fmt not in FORMATS:
        raise ValueError(f"unknown data_format {data_format!r}; accepted: auto, "
                         + ", ".join(FORMATS))
    with storage.local_copy(uri) as path:
        try:
            if fmt == "csv":
                return pd.read_csv(path, encoding="utf-8", dtype=str, keep_default_na=False,
                                   compression="infer")
            if fmt == "jsonl":
                return pd.read_json(path, lines=True, encoding="utf-8", dtype=False,
                                    compression="infer")
            return pd.read_parquet(path)
        except UnicodeDecodeError as e:
            raise ie.UndecodableFile(f"{uri}: undecodable bytes at offset {e.start} "
                                     f"({e.object[e.start:e.start + 4]!r}): the file must be "
                                     "UTF-8", uri) from None
        except pd.errors.EmptyDataError:
            raise ie.EmptyInput(f"{uri}: the file is empty (no header row)", uri) from None
        except (EOFError, zlib.error) as e:
            raise ie.CorruptArchive(f"{uri}: not a complete gzip file ({e})", uri) from None
        except (pd.errors.ParserError, ValueError, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            if isinstance(e, gzip.BadGzipFile):
                raise ie.CorruptArchive(f"{uri}: not a complete gzip file ({e})", uri) from None
            raise ie.UndecodableFile(f"{uri}: cannot parse as {fmt}: {e}", uri) from e


#: What a pod without internet can read instead of ``keras:imdb`` (the compile options that
#: give it access: kfp_gpu.dsl.task_settings; docs/cluster.md "Data and credentials").
OFFLINE_HINT = ("give source= a table the pod can read: an s3:// URI (compile with "
                "`kfp-gpu compile --secret-env SECRET` for the AWS_* keys of a Secret), a "
                "gs:// URI (`--secret-volume SECRET:DIR:KEY` for a service-account key), "
                "or a path on a PVC (`--pvc CLAIM:/mnt/data`, then "
                "source=/mnt/data/imdb_50k.csv.gz)")


def load_keras_imdb():
    """The Keras IMDB reviews (keras.datasets.imdb, downloaded on first use) as text.

    Keras ships the reviews as word indices; they are turned back into words with
    ``imdb.get_word_index()`` (indices offset by 3: 0 pad, 1 start, 2 OOV) so that the
    same tokenisation serves every source (this source alone imports Keras, hence
    TensorFlow).

    Returns:
        DataFrame with columns ``review`` (str), ``sentiment`` (``positive``/``negative``),
        ``split`` (``train``/``test``); 25,000 rows each.

    Raises:
        ValueError: if the download fails (no internet, as in most cluster pods): the
            message is :data:`OFFLINE_HINT`, what a pod can read instead.
    """
    import pandas as pd
    from keras.datasets import imdb

    try:
        (xtr, ytr), (xte, yte) = imdb.load_data()
        index = imdb.get_word_index()
    except Exception as e:
        raise ValueError(f"could not download the Keras IMDB dataset ({e}); {OFFLINE_HINT}") from e
    words = {i + 3: w for w, i in index.items()}
    rows = []
    for split, xs, ys in (("train", xtr, ytr), ("test", xte, yte)):
        for seq, y in zip(xs, ys):
            text = " ".join(words.get(i, "") for i in seq if i >= 3)
            rows.append((text, "positive" if y == 1 else "negative", split))
    return pd.DataFrame(rows, columns=["review", "sentiment", "split"])


def to_splits(df, *, text_column: str, label_column: str, positive_label: str,
              negative_label: str, split_column: str, test_fraction: float,
              seed: int) -> tuple[Split, Split]:
    """Validate a table and turn it into train/test splits with 0/1 labels.

    If ``split_column`` names a column of ``df``, its values must be ``train``/``test``;
    if it is empty or absent, a seeded ``test_fraction`` of the rows is held out.

    Raises:
        ValueError (the :mod:`kfp_gpu.inputs.errors` family: MissingColumn, EmptyInput,
            NotBinaryLabels, InputError): missing column (naming the columns present),
            empty text (row numbers),
            a label outside ``{negative_label, positive_label}`` (naming the values seen),
            a split value other than train/test, a bad ``test_fraction``, or fewer than
            2 classes in the training split.
    """
    cols = list(df.columns)
    for what, col in (("text_column", text_column), ("label_column", label_column)):
        if col not in cols:
            raise ie.MissingColumn(f"{what} {col!r} not found; the columns are {cols}")
    if positive_label == negative_label:
        raise ValueError("positive_label and negative_label must differ")
    texts = df[text_column].astype(str).where(df[text_column].notna(), "")
    empty = np.flatnonzero(texts.str.strip().eq("").to_numpy())
    if len(empty):
        raise ie.EmptyInput(f"{len(empty)} rows have empty text in column {text_column!r} "
                         f"(first rows: {empty[:5].tolist()})")
    raw = df[label_column].astype(str).str.strip()
    accepted = {negative_label: 0, positive_label: 1}
    bad = sorted(set(raw.unique()) - set(accepted))
    if bad:
        raise ie.NotBinaryLabels(f"label column {label_column!r} has values outside the declared classes "
                         f"{sorted(accepted)}: {bad[:10]} (set positive_label/negative_label)")
    labels = raw.map(accepted).to_numpy(dtype=np.int32)
    texts = texts.to_numpy(dtype=object)

    if split_column and split_column in cols:
        split = df[split_column].astype(str).str.strip().str.lower().to_numpy()
        odd = sorted(set(split) - set(SPLITS))
        if odd:
            raise ie.InputError(f"split column {split_column!r} has values {odd[:10]}; "
                             f"accepted: {list(SPLITS)}")
        is_test = split == "test"
    else:
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
        rng = np.random.default_rng(seed)
        is_test = np.zeros(len(df), dtype=bool)
        is_test[rng.permutation(len(df))[: round(test_fraction * len(df))]] = True
    train = Split(texts[~is_test], labels[~is_test])
    test = Split(texts[is_test], labels[is_test])
    if len(np.unique(train.labels)) < 2:
        raise ie.NotBinaryLabels(f"the training split has fewer than 2 classes "
                         f"({len(train.labels)} rows, labels {np.unique(train.labels).tolist()})")
    if len(test.labels) == 0:
        raise ie.EmptyInput("the test split is empty")
    return train, test


def subsample(split: Split, max_rows: int, seed: int) -> Split:
    """A seeded random subset of at most ``max_rows`` rows (``max_rows <= 0``: all)."""
    if max_rows <= 0 or len(split.labels) <= max_rows:
        return split
    idx = np.sort(np.random.default_rng(seed).permutation(len(split.labels))[:max_rows])
    return Split(split.texts[idx], split.labels[idx])


def describe(split: Split, lengths: np.ndarray, maxlen: int) -> dict:
    """Rows, class balance and truncation figures of one split."""
    n = len(split.labels)
    return {
        "rows": n,
        "positive_share": round(float(split.labels.mean()), 4) if n else 0.0,
        "truncated_share": round(float((lengths > maxlen).mean()), 4) if n else 0.0,
        "mean_tokens": round(float(lengths.mean()), 1) if n else 0.0,
    }


def run(*, source: str, train_path: str, test_path: str, vocabulary_path: str,
        data_format: str = "auto", text_column: str = "review",
        label_column: str = "sentiment", positive_label: str = "positive",
        negative_label: str = "negative", split_column: str = "split",
        test_fraction: float = 0.5, max_rows_per_split: int = 0, num_words: int = 20000,
        maxlen: int = 80, seed: int = 42) -> dict:
    """Read, validate, split, tokenise and write the artifacts; returns the statistics.

    Writes ``train_path`` and ``test_path`` (Dataset directories, see kfp_gpu.training.datasets)
    and ``vocabulary_path`` (UTF-8, one token per line, line i = token id i).

    Raises:
        FileNotFoundError, ValueError: see :func:`read_table` and :func:`to_splits`.
    """
    if maxlen < 1:
        raise ValueError(f"maxlen must be >= 1, got {maxlen}")
    if num_words < 3:
        raise ValueError(f"num_words must be >= 3, got {num_words}")
    df = load_keras_imdb() if source == KERAS_IMDB else read_table(source, data_format)
    log.info("read %d rows from %s", len(df), source)
    train, test = to_splits(df, text_column=text_column, label_column=label_column,
                            positive_label=positive_label, negative_label=negative_label,
                            split_column=split_column, test_fraction=test_fraction, seed=seed)
    train = subsample(train, max_rows_per_split, seed)
    test = subsample(test, max_rows_per_split, seed + 1)
    n = len(train.labels)
    vocab, ids, lengths = tokens.encode(np.concatenate([train.texts, test.texts]),
                                        fit_rows=n, num_words=num_words, maxlen=maxlen)
    x_train, len_train, x_test, len_test = ids[:n], lengths[:n], ids[n:], lengths[n:]
    common = {"maxlen": maxlen, "vocabulary_size": len(vocab), "padding": "pre",
              "truncating": "pre", "classes": [negative_label, positive_label]}
    stats = {
        "source": source,
        "vocabulary_size": len(vocab),
        "maxlen": maxlen,
        "train": describe(train, len_train, maxlen),
        "test": describe(test, len_test, maxlen),
    }
    datasets.save(x_train, train.labels, train_path, {**common, **stats["train"]})
    datasets.save(x_test, test.labels, test_path, {**common, **stats["test"]})
    storage.write_text(vocabulary_path, "\n".join(vocab) + "\n")
    log.info("prep_text: %s", json.dumps(stats))
    return stats


def read_vocabulary(path: str | Path) -> list[str]:
    """The vocabulary written by :func:`run` (token id i = line i)."""
    return Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n")
