"""Run a catalog pipeline on this machine with ``kfp.local`` (SubprocessRunner, no venv)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kfp_gpu.catalog import arguments, discover, params
from kfp_gpu.dsl.parameters import spec_of
from kfp_gpu.inputs import datadir
from kfp_gpu.local import docker as local_docker
from kfp_gpu.local import interrupt
from kfp_gpu.local import log as run_log

if TYPE_CHECKING:
    from kfp_gpu.gpu import GpuRequest

DATA_DIR_ENV = datadir.ENV
RUNNERS = ("subprocess", "docker")
#: The last line of a Python traceback (``ValueError: message``): the error's own line of
#: a task that failed without leaving a record (a component outside ``reported``).
_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): (.+)$")


class TaskFailed(RuntimeError):
    """A task of a local run failed.

    Attributes: ``task`` (its name), ``message`` (the exception message the component
    raised, one line), ``input`` (the path or URI it was reading, None if unknown), ``log``
    (the task's full log file), ``input_error`` (the failure is the input's:
    :func:`kfp_gpu.inputs.errors.is_input`; the CLI exits 2 for it), ``environment`` (the
    environment's: :func:`kfp_gpu.inputs.errors.is_environment`, a store endpoint that does
    not answer; exit 3), neither: exit 1.
    """

    def __init__(self, task: str, message: str, input: str | None, log: Path,
                 input_error: bool, environment: bool = False):
        super().__init__(f"task {task} failed: {message}")
        self.task, self.message, self.input, self.log = task, message, input, log
        self.input_error, self.environment = input_error, environment

    def lines(self) -> list[str]:
        """At most three lines: ``task T failed: <message>``, ``  input: <path>`` (when
        known), ``  full log: <file>``."""
        out = [str(self)]
        if self.input:
            out.append(f"  input: {self.input}")
        return [*out, f"  full log: {self.log}"]


def default_data_params(name: str, data_dir: str | None) -> dict[str, str]:
    """Parameters pointing a pipeline at the real data in the data folder
    (:func:`kfp_gpu.inputs.datadir.resolve`: ``data_dir``, $KFP_GPU_DATA_DIR, ``../shared/data``).

    Raises:
        FileNotFoundError: a folder given by ``data_dir`` or $KFP_GPU_DATA_DIR lacks the
        pipeline's data. Where the default folder lacks it, the pipeline keeps its own
        default source (``{}``).
    """
    root = datadir.resolve(data_dir)
    local_data = discover.entry(name).local_data
    if root is None or local_data is None:
        return {}
    param, rel = local_data
    if not (root / rel).exists() and not (data_dir or os.environ.get(DATA_DIR_ENV)):
        return {}
    return {param: str(datadir.find(rel, data_dir))}


def _task_runner(runner: str, root: str, data_dir: str | None, run_id: str):
    """``(kfp.local runner, clean-up on interrupt or None)``; under docker the data folder
    (:func:`kfp_gpu.inputs.datadir.resolve`) is bound into the task containers when it exists."""
    from kfp import local

    if runner != "docker":
        return local.SubprocessRunner(use_venv=False), None
    local_docker.check_engine()
    local_docker.prepare_root(root)
    data = datadir.resolve(data_dir)
    task_runner = local_docker.runner(str(data) if data and data.is_dir() else None, run_id)
    return task_runner, lambda: local_docker.remove_containers(run_id)


def run(name: str, raw_params: dict[str, str], *, gpu: GpuRequest | str | None = None,
        pipeline_root: str = "local_outputs", data_dir: str | None = None,
        verbose: bool = False, runner: str = "subprocess", check_inputs: bool = True) -> dict:
    """Run pipeline ``name`` under kfp.local; returns a summary of its outputs. ``gpu``:
    the GPU request (a :class:`kfp_gpu.gpu.GpuRequest`, as ``run --gpu`` parsed it, or its
    text), None = the pipeline's own. ``raw_params``: the ``-p`` text values, typed and
    checked here once (:func:`kfp_gpu.catalog.arguments.checked`, with the data folder's
    default input merged in first); ``check_inputs``: also check that local input paths
    and store objects exist before any task starts (False leaves that to the tasks).

    The terminal shows one line per task start/end and the components' progress lines;
    every line of every task is kept in ``<pipeline_root>/logs/<name>-<UTC time>/<task>.log``
    (:mod:`kfp_gpu.local.log`). ``verbose`` shows every line on the terminal too.

    ``runner="docker"`` runs every task in its image (:mod:`kfp_gpu.local.docker`).

    Returns:
        ``{"pipeline", "seconds", "pipeline_root", "log_dir", "tasks": {task: [status,
        seconds]}, "outputs": {name: value | {"uri", "metadata"}}}``.

    A temp folder per run is the tasks' ``$TMPDIR`` and kfp.local's workspace, removed
    afterwards (:func:`_run_tmpdir`). SIGINT/SIGTERM stop every task process (and, under
    docker, remove the run's containers), remove the unfinished tasks' outputs and raise
    :class:`kfp_gpu.local.interrupt.Interrupted` naming what was kept.

    Raises:
        ValueError: unknown pipeline, runner or parameter; a pipeline root that cannot be
        written. kfp_gpu.inputs.errors.InputError: a local input file fails its cheap
        check (the entry's ``local_checks``), or the arguments fail the pipeline's check
        against its compiled spec (the entry's ``spec_check``, e.g. fractional-eval's num_shards against its GPU
        fraction), before any task starts. TaskFailed (a RuntimeError): a
        task failed. RuntimeError: under docker, an output is missing.
        local_docker.EngineUnreachable: ``runner="docker"`` and no Docker engine answers.
        interrupt.Interrupted: SIGINT/SIGTERM (``exit_code`` 130/143, ``kept``).
    """
    from kfp import local

    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; accepted: {list(RUNNERS)}")
    pipeline = discover.entry(name).pipeline(gpu)
    merged = {**default_data_params(name, data_dir), **raw_params}
    # typed and checked once: declared ranges, local paths and store objects
    kwargs = arguments.checked(name, merged, local=check_inputs)
    params.check_against_spec(name, spec_of(pipeline), kwargs)
    params.check_local_files(name, kwargs)  # a CSV header, a gzip stream: before tasks
    root = str(Path(pipeline_root).resolve())
    check_writable_dir(root, "--pipeline-root")
    run_id = f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}"
    task_runner, on_interrupt = _task_runner(runner, root, data_dir, run_id)
    log_dir = Path(root) / "logs" / f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    before = set(os.listdir(root)) if os.path.isdir(root) else set()
    stream = None
    t0 = time.perf_counter()
    with _run_tmpdir() as tmp, interrupt.guard(on_interrupt):
        try:
            # kfp.local.init's workspace would be a tempfile.mkdtemp() left behind
            # (kfp/local/config.py init): give it one inside the run's temp folder.
            workspace = Path(tmp) / "workspace"
            workspace.mkdir()
            local.init(runner=task_runner, pipeline_root=root, raise_on_error=True,
                       workspace_root=str(workspace))
            with run_log.captured(log_dir, verbose=verbose) as stream:
                task = pipeline(**kwargs)
        except interrupt.Interrupted as e:
            if on_interrupt is not None:  # a container created after the handler's look
                on_interrupt()
            e.kept = _settle(root, before, stream.results if stream else {}, log_dir)
            raise
        except RuntimeError as e:
            raise _failure(e, stream, log_dir) from e
    seconds = time.perf_counter() - t0
    outputs = {}
    for key, value in (task.outputs or {}).items():
        if hasattr(value, "uri"):
            outputs[key] = {"uri": value.uri, "type": getattr(value, "schema_title", ""),
                            "metadata": dict(value.metadata or {})}
        else:
            outputs[key] = value
    missing = local_docker.missing_outputs(outputs) if runner == "docker" else []
    if missing:
        raise RuntimeError(f"outputs {missing} missing after a SUCCESS status (task logs: "
                           f"{log_dir})")
    _link_html_reports(outputs, log_dir)
    return {"pipeline": name, "seconds": round(seconds, 1), "pipeline_root": root,
            "log_dir": str(log_dir), "parameters": kwargs, "outputs": outputs,
            "tasks": {t: [status, round(sec, 1)] for t, (status, sec) in stream.results.items()}}


def _failure(exc: RuntimeError, stream, log_dir: Path) -> RuntimeError:
    """:class:`TaskFailed` for the first failed task of ``stream`` (its record, else the
    last exception line of its log), or ``exc`` with the log folder when no task failed."""
    failed = [t for t, (status, _) in (stream.results if stream else {}).items()
              if status != "SUCCESS"]
    if not failed:
        return RuntimeError(f"{exc} (task logs: {log_dir})")
    task = failed[0]
    record = stream.failures.get(task)
    if record is None:
        found = [m for m in map(_EXC_LINE.match, stream.tail(task, 200)) if m]
        message = (f"{found[-1].group(1).rsplit('.', 1)[-1]}: {found[-1].group(2)}" if found
                   else "the task process failed (no exception line in its log)")
        record = {"message": message, "input": None, "input_error": False}
    return TaskFailed(task, record["message"], record.get("input"), stream.log_path(task),
                      bool(record.get("input_error")), bool(record.get("environment")))


@contextlib.contextmanager
def _run_tmpdir():
    """A temp folder for this run, ``$TMPDIR`` of the task processes, removed afterwards
    (also after an interrupt).

    Every lightweight component's command starts with ``program_path=$(mktemp -d)`` and
    writes ``ephemeral_component.py`` there, never removing it (kfp 2.17
    ``kfp/dsl/component_factory.py`` ``_get_command_and_args_for_lightweight_component``);
    ``mktemp`` honours ``$TMPDIR`` (coreutils mktemp(1)). The task processes inherit this
    process's environment (``run_local_subprocess`` passes ``env=None`` without task env
    vars), so ``$TMPDIR`` is set here for the run and restored after it. Under
    ``--runner docker`` those folders are inside the (removed) containers.
    """
    tmp = tempfile.mkdtemp(prefix="kfp-gpu-run-")  # also fixes this process's tempdir
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tmp
    try:
        yield tmp
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
        shutil.rmtree(tmp, ignore_errors=True)


def _settle(root: str, before: set[str], results: dict, log_dir: Path) -> list[str]:
    """After an interrupt: remove the output folders of the tasks that did not finish
    (nothing half-written stays), return what was kept (finished tasks' folders, the logs).

    kfp.local writes a task's outputs under ``<root>/<pipeline>-<time>/<task>/``
    (kfp 2.17 ``kfp/local/executor_input_utils.py`` ``construct_local_task_root``); the
    run's folder is the one that appeared in ``root`` during this run.
    """
    kept = []
    for entry in sorted(set(os.listdir(root)) - before - {"logs"}):
        run_dir = Path(root) / entry
        if not run_dir.is_dir():
            continue
        for task_dir in sorted(p for p in run_dir.iterdir() if p.is_dir()):
            if results.get(task_dir.name, ("",))[0] == "SUCCESS":
                kept.append(f"{task_dir.name} ({task_dir})")
            else:
                shutil.rmtree(task_dir, ignore_errors=True)
        if not any(run_dir.iterdir()):
            run_dir.rmdir()
    if log_dir.is_dir():
        kept.append(f"task logs ({log_dir})")
    return kept


def check_writable_dir(path: str | Path, what: str) -> None:
    """Refuse a destination folder this user cannot create or write into, before any work.

    Raises:
        ValueError: ``path`` exists and is not a writable folder, or its nearest existing
            parent is not a writable folder (names ``what``, the option).
    """
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise ValueError(f"{what} {p}: exists and is not a folder; name a folder")
        if not os.access(p, os.W_OK | os.X_OK):
            raise ValueError(f"{what} {p}: folder not writable by this user; name another")
        return
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {p}: cannot be created ({parent} is not a writable "
                         "folder); name another")


def check_writable_file(path: str | Path, what: str) -> None:
    """Refuse a destination file that could not be written, before any work:
    a folder, a path under a non-folder (``/dev/null/x.json``), a missing or
    read-only parent folder, a read-only file.

    Raises:
        ValueError: naming ``what`` (the option), the path and what to do.
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {p}: is a folder; name a file, e.g. {p / 'summary.json'}")
    parent = p.parent
    if not parent.is_dir():
        raise ValueError(f"{what} {p}: {parent} is not an existing folder; create it or name "
                         "another file")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists()
                                                  and not os.access(p, os.W_OK)):
        raise ValueError(f"{what} {p}: not writable by this user; name another file")


def write_summary(path: str | Path, summary: dict) -> None:
    """Write ``summary`` as JSON to ``path`` atomically (a temp file beside it, renamed)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2, default=str)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _link_html_reports(outputs: dict, log_dir: Path) -> None:
    """Copy every HTML artifact output to ``<log_dir>/<name>.html`` and record it as ``html``.

    Generic on purpose (any output whose file starts like an HTML page): KFP names
    artifact files without an extension, and browsers need one.
    """
    for key, value in outputs.items():
        uri = Path(value.get("uri", "")) if isinstance(value, dict) else None
        if uri is None or not uri.is_file():
            continue
        with uri.open("rb") as f:
            head = f.read(512).lstrip().lower()
        if head.startswith((b"<!doctype html", b"<html")):
            html = log_dir / ("report.html" if key == "report" else f"{key}.html")
            html.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(uri, html)
            value["html"] = str(html)
