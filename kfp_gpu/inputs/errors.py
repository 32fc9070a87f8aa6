"""The input-validation errors components raise, and the one record a failed task leaves.

A component that refuses its input raises a member of the :class:`InputError` family
(a ``ValueError``): a missing column, an empty split, an undecodable file, a corrupt
archive, label values that are not binary, a folder that is not a model, a store URI of
the wrong form. Each carries the input it was reading (``input``: a path or URI) where
known.

A task process runs in another process (kfp.local's SubprocessRunner or DockerRunner, a pod
on a cluster), so the exception object never reaches ``kfp-gpu run``. The component body
wraps its work in :func:`reported`, which writes ONE line to stderr when an exception
escapes: :data:`RECORD_PREFIX` followed by a JSON object (``type``, ``input_error``,
``environment``, ``message``, ``input``), then lets the exception go on (the traceback
stays in the task log, the task fails as before). The CLI reads the record back with
:func:`record_of`: exit 2 when ``input_error`` is true, 3 when ``environment`` is, 1
otherwise, and the message as the component raised it -- no parsing of the message text
or the traceback.

Which class an exception is in (:func:`is_input`, :func:`is_environment`) is decided by
its type, the same way in a task and in the ``kfp-gpu`` process
(:func:`kfp_gpu.cli.errors.classify`): a missing or unreadable file or object
(``FileNotFoundError``, ``PermissionError``: s3fs turns S3's ``NoSuchKey``/``NoSuchBucket``
and ``AccessDenied`` into these, s3fs ``errors.py`` ``ERROR_CODE_TO_EXCEPTION``) is the
input's; a store, cluster or engine that does not answer (:data:`CONNECTION_ERRORS`: a
refused or timed-out connection as botocore, requests or urllib3 raise it) and a full disk
are the environment's.
"""

from __future__ import annotations

import contextlib
import errno
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


class MalformedUri(InputError):
    """A ``gs://``/``s3://`` URI that names no bucket or no object, or one of a scheme the
    parameter does not read (:func:`kfp_gpu.inputs.uris.check_uri`)."""


FAMILY = (InputError, MissingColumn, EmptyInput, UndecodableFile, CorruptArchive,
          NotBinaryLabels, NotAModel, MalformedUri)

#: ``OSError`` numbers that are the machine's condition, not the user's input: a full disk
#: or quota, no memory, no file handles left.
ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EMFILE,
                                errno.ENFILE})

#: Connection failures by class, ``<top package>.<class name>`` of any class in the
#: exception's MRO (so that no client library is imported to classify): the builtins';
#: requests.exceptions ``ConnectionError``/``Timeout`` and urllib3.exceptions (under the
#: kfp, kubernetes, docker and google-cloud-storage clients); botocore.exceptions
#: ``ConnectionError`` (its ``EndpointConnectionError``, ``ConnectTimeoutError``,
#: ``ProxyConnectionError``, ``SSLError``), ``ReadTimeoutError`` and
#: ``ConnectionClosedError`` -- what aiobotocore ``httpsession.py`` raises under s3fs for a
#: refused, unresolvable, timed-out or dropped connection to the S3 endpoint.
CONNECTION_ERRORS = frozenset({
    "builtins.ConnectionError", "builtins.TimeoutError",
    "requests.ConnectionError", "requests.Timeout",
    "urllib3.MaxRetryError", "urllib3.NewConnectionError", "urllib3.ProtocolError",
    "botocore.ConnectionError", "botocore.ReadTimeoutError", "botocore.ConnectionClosedError",
})
#: Errors that wrap the connection failure they gave up on (its ``__cause__``):
#: google.api_core.exceptions ``RetryError`` (google-cloud-storage's retry deadline,
#: api_core ``retry/retry_unary.py``), the Docker SDK's ``DockerException``
#: (docker ``api/client.py`` ``_retrieve_server_version``).
_WRAPPERS = frozenset({"google.RetryError", "docker.DockerException"})


def names(exc: BaseException) -> set[str]:
    """``<top package>.<class name>`` of every class in ``type(exc)``'s MRO, e.g.
    ``{"botocore.EndpointConnectionError", "botocore.ConnectionError", ...}``."""
    return {f"{c.__module__.split('.')[0]}.{c.__name__}" for c in type(exc).__mro__}


def caused_by_connection(exc: BaseException) -> bool:
    """Whether a connection failure (:data:`CONNECTION_ERRORS`) is in ``exc``'s
    cause/context chain (not ``exc`` itself)."""
    seen, cause = set(), exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        if names(cause) & CONNECTION_ERRORS:
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def is_connection_failure(exc: BaseException) -> bool:
    """A store, cluster or engine that does not answer: ``exc`` is one of
    :data:`CONNECTION_ERRORS`, or a retry wrapper (:data:`_WRAPPERS`) that gave up on one."""
    found = names(exc)
    return bool(found & CONNECTION_ERRORS) or bool(found & _WRAPPERS
                                                    and caused_by_connection(exc))


def is_environment(exc: BaseException) -> bool:
    """The environment's fault (exit 3): :func:`is_connection_failure`, or an ``OSError``
    of :data:`ENVIRONMENT_ERRNOS` (a full disk, no memory, no file handles)."""
    return is_connection_failure(exc) or (isinstance(exc, OSError)
                                          and exc.errno in ENVIRONMENT_ERRNOS)


def is_input(exc: BaseException) -> bool:
    """The input's fault (exit 2) as a task records it: a member of :data:`FAMILY`, a JSON
    or Unicode decoding error, a missing, unreadable or unwritable file or object (an
    ``OSError`` that is not :func:`is_environment`: ``FileNotFoundError`` for a missing
    local path, ``s3://`` key or bucket and ``gs://`` object alike), a truncated or corrupt
    compressed file (``EOFError``, ``zlib.error``). Any other ``ValueError`` is the job's
    (``kfp-gpu`` itself also calls a refusal its own code raised an input error:
    :func:`kfp_gpu.cli.errors.is_input_error`)."""
    if isinstance(exc, InputError | json.JSONDecodeError | UnicodeDecodeError | EOFError):
        return True
    if isinstance(exc, OSError):
        return not is_environment(exc)
    return type(exc).__name__ == "error" and type(exc).__module__ == "zlib"


def record(exc: BaseException, input: str | None = None) -> str:
    """The one-line record of ``exc``: :data:`RECORD_PREFIX` + JSON ``{"type",
    "input_error", "environment", "message", "input"}`` (``input_error``: :func:`is_input`;
    ``environment``: :func:`is_environment`; ``message``: ``str(exc)`` on one line;
    ``input``: the exception's own, else ``input`` when the failure is the input's or the
    environment's)."""
    message = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    input_error, environment = is_input(exc), is_environment(exc)
    named = getattr(exc, "input", None)
    if not isinstance(named, str):
        named = input if input_error or environment else None
    return RECORD_PREFIX + json.dumps({
        "type": type(exc).__name__, "input_error": input_error, "environment": environment,
        "message": message or type(exc).__name__, "input": named})


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
        sys.stderr.write(record(e, input) + "\n")
        sys.stderr.flush()
        raise
