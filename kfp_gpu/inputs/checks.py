"""Cheap checks of input files, made before any task starts (``kfp-gpu run --local``).

What costs a header or one pass over the bytes, not a parse of the whole table: a CSV's
header row, a JSON Lines file's first object, a Parquet file's schema (its footer), a gzip
stream's integrity (decompressed once, CRC and length checked by Python's ``gzip``), UTF-8
text (an incremental decoder over the stream), a model folder's ``model.keras``. Each
raises the member of :mod:`kfp_gpu.inputs.errors` the component itself would raise later,
with the same words, so a run fails in one line before a task process starts.
gs:// URIs are not read here (the task reads them).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import zlib
from collections.abc import Mapping
from pathlib import Path

from kfp_gpu.inputs import errors as ie

CHUNK = 1 << 20
#: Keras' native format is a zip archive (keras/src/saving/saving_lib.py save_model).
ZIP_MAGIC = b"PK\x03\x04"


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == b"\x1f\x8b" or path.name.lower().endswith(".gz")


def _first_line(path: Path, uri: str) -> str:
    """The first line of a (maybe gzip) UTF-8 text file after one pass over all of it.

    Raises:
        CorruptArchive: the gzip stream is damaged or truncated.
        UndecodableFile: bytes that are not UTF-8 (offset in the decompressed stream).
        EmptyInput: the file holds no text.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    first, offset = None, 0
    opener = gzip.open if _is_gzip(path) else open
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(CHUNK):
                try:
                    text = decoder.decode(chunk)
                except UnicodeDecodeError as e:
                    raise ie.UndecodableFile(
                        f"{uri}: undecodable bytes at offset {offset + e.start} "
                        f"({chunk[e.start:e.start + 4]!r}): the file must be UTF-8", uri) from None
                if first is None:
                    first = text
                elif "\n" not in first:
                    first += text
                offset += len(chunk)
            decoder.decode(b"", final=True)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise ie.CorruptArchive(f"{uri}: not a complete gzip file ({e})", uri) from None
    except UnicodeDecodeError:
        raise ie.UndecodableFile(f"{uri}: the file ends inside a UTF-8 character: the file "
                                 "must be UTF-8", uri) from None
    line = (first or "").lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    if not line.strip():
        raise ie.EmptyInput(f"{uri}: the file is empty (no header row)", uri)
    return line


def table_columns(uri: str, fmt: str) -> list[str]:
    """The column names of a local CSV (header row), JSON Lines (first object's keys) or
    Parquet (schema) file; text files are also checked whole for gzip and UTF-8.

    Raises:
        CorruptArchive, UndecodableFile, EmptyInput: see :func:`_first_line`;
        UndecodableFile also for a Parquet file whose footer does not parse.
    """
    path = Path(uri).expanduser()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError
            raise ie.UndecodableFile(f"{uri}: cannot parse as parquet: {e}", uri) from None
    line = _first_line(path, uri)
    if fmt == "jsonl":
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ie.UndecodableFile(f"{uri}: cannot parse as jsonl: {e}", uri) from None
        if not isinstance(obj, dict):
            raise ie.UndecodableFile(f"{uri}: cannot parse as jsonl: the first line is not "
                                     "a JSON object", uri)
        return list(obj)
    return next(csv.reader(io.StringIO(line)))


def check_table(uri: str, fmt: str, columns: Mapping[str, str]) -> None:
    """Refuse a local table file without the columns ``columns`` names (``{"text_column":
    "review", ...}``), or one that is empty, not UTF-8 or a damaged gzip file.

    Raises:
        MissingColumn: ``"text_column 'review' not found; the columns are [...]"`` (the
            words of prep_text's own check). CorruptArchive, UndecodableFile, EmptyInput.
    """
    if "://" in uri or not Path(uri).expanduser().is_file():
        return
    cols = table_columns(uri, fmt)
    for what, col in columns.items():
        if col not in cols:
            raise ie.MissingColumn(f"{uri}: {what} {col!r} not found; the columns are {cols}",
                                   uri)


def check_model(uri: str, model_file: str = "model.keras") -> None:
    """Refuse a local model path that holds no Keras model: a folder without
    ``model_file``, or a file that is not a zip archive (the ``.keras`` format).

    Raises:
        NotAModel: naming the path and what was expected.
    """
    if "://" in uri:
        return
    p = Path(uri).expanduser()
    f = p / model_file if p.is_dir() else p
    if not f.is_file():
        raise ie.NotAModel(f"no Keras model at {uri} (expected {model_file})", uri)
    with f.open("rb") as fh:
        if fh.read(4) != ZIP_MAGIC:
            raise ie.NotAModel(f"{f} is not a Keras model file (not a .keras zip archive)",
                               uri)
