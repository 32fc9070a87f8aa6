"""The one place where the CLI turns an exception into an exit status and one line.

Exit statuses of every ``kfp-gpu`` command (the table README "Exit codes" and
``kfp-gpu --help`` show is :data:`STATUSES`: the classes kubectl, docker and pip keep
apart, one rule for an exception raised in this process and for a task's record alike),
with what each covers:

====  ================================================================================
0     ok
1     the job ran and failed (a task, an MPIJob, a KFP run), or an internal error (a bug:
      any exception not classed below; the one line says ``internal error`` and ``-v``)
2     usage or input error: a bad option or parameter, a missing, unreadable or corrupt
      file or store object, a malformed store URI, a destination that cannot be written;
      a task that refused its input
3     the environment: the cluster, the engine or a store is unreachable (KFP API,
      Kubernetes API, Docker engine, an S3/GCS endpoint), the disk is full, memory or file
      handles ran out
130   interrupted by SIGINT (Ctrl-C); 143 by SIGTERM
====  ================================================================================

:func:`classify` maps an exception to ``(status, message)``; :class:`Group` (the typer app's
click group) applies it to whatever a command raises, prints ``error: <message>`` on one
line (stderr, red) and exits with the status -- the Python traceback only with
``kfp-gpu -v`` (or a command's own ``-v``). :func:`task_status` is the same rule for the
record a failed task leaves (:mod:`kfp_gpu.inputs.errors`); :func:`refusal` lets a command
that catches ``ValueError`` itself keep only the input errors.
"""

from __future__ import annotations

import errno
import linecache
import sys
import traceback

import typer
from typer._click.exceptions import (
    ClickException,  # typer 0.29 vendors click
    NoArgsIsHelpError,
)
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperCommand, TyperGroup

from kfp_gpu.inputs import errors as input_errors

OK, FAILED, USAGE, UNREACHABLE, SIGINT, SIGTERM = 0, 1, 2, 3, 130, 143
#: The exit-code table, ``(statuses, meaning)`` per row: README "Exit codes" shows it (its
#: first two columns; tests/docs/test_docs_restated.py compares them) and ``kfp-gpu --help``
#: says it (:func:`statuses_text`).
STATUSES: tuple[tuple[tuple[int, ...], str], ...] = (
    ((OK,), "ok"),
    ((FAILED,), "the job ran and failed, or an internal error"),
    ((USAGE,), "usage or input error"),
    ((UNREACHABLE,), "the environment: cluster or engine unreachable, disk full"),
    ((SIGINT, SIGTERM), "interrupted by SIGINT (Ctrl-C) / SIGTERM"),
)
#: Status 3 is the environment's: an unreachable service, a full disk, no memory.
ENVIRONMENT = UNREACHABLE
#: ``OSError`` numbers that are the machine's condition, not the user's input (exit 3).
_ENVIRONMENT_ERRNOS = input_errors.ENVIRONMENT_ERRNOS
#: Top-level packages whose ``raise ValueError(...)`` is a refusal of input by convention:
#: the library's rules raise it with the message meant for the user.
_OURS = {"kfp_gpu", "components", "pipelines"}


class CliError(Exception):
    """An error with its exit status; the message is what the user sees."""

    exit_code = USAGE


class UsageError(CliError):
    """Bad input: option, parameter, file (exit 2)."""

    exit_code = USAGE


class Unreachable(CliError):
    """The cluster or the engine does not answer (exit 3)."""

    exit_code = UNREACHABLE


class JobFailed(CliError):
    """The work ran and failed (exit 1)."""

    exit_code = FAILED


#: Whether a traceback goes with the one line (``kfp-gpu -v``; a command's own ``-v``).
_state = {"verbose": False}


def statuses_text() -> str:
    """:data:`STATUSES` as one sentence for help text: ``0 ok; 1 the job ran and failed,
    ...; 130 / 143 interrupted by ...``."""
    return "; ".join(f"{' / '.join(map(str, codes))} {meaning}" for codes, meaning in STATUSES)


def set_verbose(on: bool = True) -> None:
    """Show tracebacks of errors from now on (the global ``-v`` and each command's)."""
    if on:
        _state["verbose"] = True


def trace() -> None:
    """With ``-v``: print the traceback of the exception being handled (for commands that
    catch their own errors and exit with a status)."""
    if _state["verbose"] and sys.exc_info()[0] is not None:
        traceback.print_exc(file=sys.stderr)


def one_line(text: str) -> str:
    """``text`` on one line: its lines stripped and joined with ``' '``."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


_names = input_errors.names

#: Connection failures of the HTTP stacks under kfp, kubernetes, docker, s3fs (botocore)
#: and google-cloud-storage, by class, so none of them is imported to classify
#: (:data:`kfp_gpu.inputs.errors.CONNECTION_ERRORS`, the rule a task's record follows too).
_UNREACHABLE = input_errors.CONNECTION_ERRORS


def _yaml_message(exc: BaseException) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = ""
    if mark is not None:
        name = "" if str(mark.name).startswith("<") else f"{mark.name}, "
        where = f"{name}line {mark.line + 1}, column {mark.column + 1}: "
    what = getattr(exc, "problem", None) or one_line(str(exc))
    return f"invalid YAML: {where}{what}"


def _os_message(exc: OSError) -> str:
    what = exc.strerror or one_line(str(exc)) or type(exc).__name__
    if exc.filename is not None:
        return f"{what}: {exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
    return what


def _environment_message(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename is not None else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left" if exc.errno == errno.ENOSPC else "disk quota exceeded"
        return (f"the disk is full ({what}){where}; free space there or write elsewhere")
    return f"out of system resources ({exc.strerror or type(exc).__name__}){where}"


def is_input_error(exc: BaseException) -> bool:
    """Whether a ``ValueError`` is a refusal of the user's input (exit 2) rather than a bug
    (exit 1): a member of :class:`kfp_gpu.inputs.errors.InputError`'s family, a JSON or
    Unicode decoding error, or a ``ValueError`` raised by a ``raise`` statement of this
    project's own code (kfp_gpu, components, pipelines: the library's rules refuse a value
    that way, with the message for the user). A ``ValueError`` from any other code (a
    third-party library, the standard library's Python code, an unpacking or ``int()``
    inside our code) is internal. One constructed but never raised (no traceback) counts
    as a refusal."""
    import json

    from kfp_gpu.inputs.errors import InputError

    if isinstance(exc, InputError | json.JSONDecodeError | UnicodeDecodeError):
        return True
    if not isinstance(exc, ValueError):
        return False
    tb = exc.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0]
    line = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).lstrip()
    return module in _OURS and line.startswith("raise ")


#: Whether a connection failure is in an exception's cause/context chain: the Docker SDK
#: wraps the requests/urllib3 error it got from the engine's socket (docker 7.1
#: ``docker/api/client.py`` ``_retrieve_server_version``).
_caused_by_connection = input_errors.caused_by_connection


def _no_engine() -> str:
    import os

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    return (f"no Docker engine answers at {host} (DOCKER_HOST); start one "
            "(scripts/dockerd.sh start) or point DOCKER_HOST at a running engine")


_VERBOSE_HINT = " (run with -v for the traceback)"


def classify(exc: BaseException) -> tuple[int, str]:
    """``(exit status, one-line message)`` for an exception a command let through: the one
    rule, input -> 2, environment -> 3, job or internal -> 1.

    :class:`CliError` -> its own status; a Docker SDK error caused by a connection failure
    -> 3, "no Docker engine answers at $DOCKER_HOST"; connection failures
    (:func:`kfp_gpu.inputs.errors.is_connection_failure`: requests/urllib3, botocore's
    ``EndpointConnectionError`` from an S3 endpoint that does not answer, a
    google-cloud-storage ``RetryError`` that gave up on one; a Kubernetes ``ApiException``
    with status 0) -> 3; an ``OSError`` of the machine (disk
    full ``ENOSPC``/``EDQUOT``, ``ENOMEM``, ``EMFILE``/``ENFILE``) -> 3, "the disk is
    full"; YAML errors, an input ``ValueError`` (:func:`is_input_error`: InputError, JSON,
    Unicode decoding, a refusal our code raised), any other ``OSError`` (missing file, no
    permission, not a directory, a read-only destination, a bad gzip file), ``EOFError``
    (truncated compressed file), a kubeconfig ``ConfigException`` -> 2; a Kubernetes or
    KFP API refusal -> 1 with its status; anything else, a ``ValueError`` that is not an
    input error included -> 1, ``internal error`` with the ``-v`` hint.
    """
    names = _names(exc)
    if isinstance(exc, CliError):
        return exc.exit_code, one_line(str(exc))
    if "docker.DockerException" in names and _caused_by_connection(exc):
        return UNREACHABLE, _no_engine()
    if input_errors.is_connection_failure(exc):
        return UNREACHABLE, f"cannot connect: {one_line(str(exc))}"
    if "kubernetes.ApiException" in names or "kfp_server_api.ApiException" in names:
        status = getattr(exc, "status", 0)
        if not status:
            return UNREACHABLE, f"cannot connect: {one_line(getattr(exc, 'reason', exc))}"
        return FAILED, f"the API refused: HTTP {status} {one_line(getattr(exc, 'reason', ''))}"
    if "yaml.YAMLError" in names:
        return USAGE, _yaml_message(exc)
    if "kubernetes.ConfigException" in names:
        return USAGE, f"invalid kubeconfig: {one_line(str(exc))}"
    if isinstance(exc, UnicodeDecodeError):
        return USAGE, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, ValueError) and is_input_error(exc):
        return USAGE, one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, OSError) and exc.errno in _ENVIRONMENT_ERRNOS:
        return ENVIRONMENT, _environment_message(exc)
    if isinstance(exc, OSError):
        return USAGE, _os_message(exc)
    if isinstance(exc, EOFError):
        return USAGE, f"truncated input: {one_line(str(exc)) or 'end of file too early'}"
    if type(exc).__name__ == "error" and type(exc).__module__ == "zlib":
        return USAGE, f"corrupt compressed data: {one_line(str(exc))}"
    text = one_line(str(exc))
    return FAILED, (f"internal error: {type(exc).__name__}" + (f": {text}" if text else "")
                    + _VERBOSE_HINT)


def task_status(input_error: bool, environment: bool = False) -> int:
    """The status of a task that failed and left its record (``kfp_gpu.inputs.errors.record``
    and ``record_of``; ``kfp-gpu run --local``, ``kfp-gpu submit``): 2 when the task
    refused its input (the record's ``input_error``: an
    :class:`~kfp_gpu.inputs.errors.InputError`, a missing local file or store object), 3
    when its environment failed it (``environment``: a store endpoint that does not answer,
    a full disk), else 1, the job failed -- the rule :func:`classify` applies to the same
    exception raised in this process (:func:`kfp_gpu.inputs.errors.is_input`,
    :func:`~kfp_gpu.inputs.errors.is_environment`)."""
    if environment:
        return UNREACHABLE
    return USAGE if input_error else FAILED


def refusal(exc: Exception) -> str:
    """``str(exc)`` when :func:`classify` calls ``exc`` an input error (exit 2), for a
    command that catches ``ValueError`` (or ``FileNotFoundError``) itself to print one line
    and exit 2; any other exception (an internal ``ValueError``, a full disk) is raised
    again, so that :class:`Group` reports it by the one rule.

    Raises:
        Exception: ``exc`` itself, when it is not an input error.
    """
    if classify(exc)[0] != USAGE:
        raise exc
    return str(exc)


def report(exc: BaseException) -> int:
    """Print ``exc`` as the user sees it (the traceback first with ``-v``); its status."""
    code, message = classify(exc)
    if _state["verbose"]:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        message = message.replace(_VERBOSE_HINT, "")
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return code


def usage_line(exc: ClickException) -> str:
    """A click usage error as one line, with where to look for help."""
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"error: {one_line(exc.format_message())}{hint}"


class _Reporting:
    """``main`` for a click command or group: every exit goes through :func:`classify`.

    Click runs in non-standalone mode and this does what standalone mode would, but a usage
    error is one line and any other exception is :func:`report`\\ ed: no traceback reaches
    the terminal unless ``-v``.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        _state["verbose"] = False
        from kfp_gpu.cli import helptext

        helptext.tidy(self)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = code if isinstance(code, int) else OK
        except typer.Exit as e:
            code = e.exit_code
        except typer.Abort:
            typer.secho("error: aborted", fg=typer.colors.RED, err=True)
            code = FAILED
        except NoArgsIsHelpError as e:  # the help was the answer (printed by get_help)
            if e.format_message().strip():
                e.show()
            code = e.exit_code
        except ClickException as e:
            typer.secho(usage_line(e) if isinstance(e, ClickUsageError)
                        else f"error: {one_line(e.format_message())}", fg=typer.colors.RED,
                        err=True)
            code = e.exit_code
        except Exception as e:  # noqa: BLE001 - the one place every error is reported
            code = report(e)
        _state["verbose"] = False  # an in-process caller after this one starts without -v
        if not standalone_mode:
            return code
        sys.exit(code)


class Group(_Reporting, TyperGroup):
    """The ``kfp-gpu`` app's click group (``typer.Typer(cls=Group)``)."""


class Command(_Reporting, TyperCommand):
    """A one-command app's click command (``app.command(cls=Command)``), e.g.
    ``python -m kfp_gpu.cli.train_resnet``."""
