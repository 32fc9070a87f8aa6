"""The input-validation errors components raise, and the one record a failed task leaves.

A component that refuses its input raises a member of the :class:`InputError` family
(a ``ValueError``): a missing column, an empty split, an undecodable file, a corrupt
archive, label values that are not binary, a folder that is not a model. Each carries the
input it was reading (``input``: a path or URI) where known.

A task process runs in another process (kfp.local's SubprocessRunner or DockerRunner, a pod
on a cluster), so the exception object never reaches ``kfp-gpu run``. The component body
wraps its work in :func:`reported`, which writes ONE line to stderr when an exception
escapes: :data:`RECORD_PREFIX` followed by a JSON object (``type``, ``input_error``,
``message``, ``input``), then lets the exception go on (the traceback stays in the task
log, the task fails as before). The CLI reads the record back with :func:`record_of`:
exit 2 when ``input_error`` is true, 1 otherwise, and the message as the component raised
it -- no parsing of the message text or the traceback.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator

#: The start of the record line a failed task leaves in its log (stderr).
RECORD_PREFIX = "kfp-gpu-task-error: "


class InputError(ValueError):
    """The input is unusable as given (exit 2 when it ends a task); ``input``: the path or
    URI being read (None when not known)."""

    def __init__(self, message: str, input: str | None = None):
        super().__init__(message)
        self.input = input


class MissingColumn(InputError):
    """A table lacks a column the component was told to read."""


class EmptyInput(InputError):
    """A file, a split or a column holds nothing to work on (an empty file, an empty test
    split, rows with empty text, a Dataset without examples)."""


class UndecodableFile(InputError):
    """Bytes that are not UTF-8 text, or a file that does not parse as its format."""


class CorruptArchive(InputError):
    """A compressed file that does not decompress (bad gzip header, CRC, truncated)."""


class NotBinaryLabels(InputError):
    """Label values outside the two declared classes, or a training split with one class."""


class NotAModel(InputError):
    """A model path that holds no model the component can load."""


FAMILY = (InputError, MissingColumn, EmptyInput, UndecodableFile, CorruptArchive,
          NotBinaryLabels, NotAModel)


def record(exc: BaseException) -> str:
    """The one-line record of ``exc``: :data:`RECORD_PREFIX` + JSON ``{"type", "input_error",
    "message", "input"}`` (``message``: ``str(exc)`` on one line)."""
    message = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return RECORD_PREFIX + json.dumps({
        "type": type(exc).__name__, "input_error": isinstance(exc, InputError),
        "message": message or type(exc).__name__, "input": getattr(exc, "input", None)})


def json_after(line: str, prefix: str) -> dict | None:
    """The JSON object that follows ``prefix`` in a log ``line``, or None when the prefix is
    absent or the rest is not one JSON object (a record cut or garbled). Shared by the
    task records: this module's and :mod:`kfp_gpu.task_outputs`."""
    at = line.find(prefix)
    if at < 0:
        return None
    try:
        rec = json.loads(line[at + len(prefix):])
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def record_of(line: str) -> dict | None:
    """The record in a task log line written by :func:`reported`, or None for any other
    line (a record cut or garbled reads as None)."""
    rec = json_after(line, RECORD_PREFIX)
    return rec if rec is not None and "message" in rec else None


@contextlib.contextmanager
def reported(input: str | None = None) -> Iterator[None]:
    """Write :func:`record` of an exception that escapes the block to stderr, then re-raise
    it unchanged. ``input``: the input to name when the exception names none."""
    try:
        yield
    except Exception as e:
        if isinstance(e, InputError) and e.input is None and input:
            e.input = input
        sys.stderr.write(record(e) + "\n")
        sys.stderr.flush()
        raise
