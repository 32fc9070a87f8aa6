"""What a finished KFP run did, told per component task: the failure or the outputs.

The rows of ``get_run`` are read by :mod:`kfp_gpu.cluster.run_tasks` (which are the
pipeline's tasks, cached or not), the task pods' logs by
:mod:`kfp_gpu.cluster.task_logs`; this module turns both into the lines
``kfp-gpu submit --wait`` prints and the exit status they imply.

The pure part (:func:`component_tasks`, :func:`failed_tasks`, :func:`succeeded_tasks`,
:func:`failure_report`, :func:`outputs_report`) turns that body and the compiled pipeline
spec into lines; the message of a failed task and the outputs of one that succeeded come
from its pod's log (the record lines of :mod:`kfp_gpu.inputs.errors` and
:mod:`kfp_gpu.task_outputs`, else what KFP's launcher logged of the component's outputs,
:func:`executor_output_of`, or the log's last error line, :func:`message_of`), read by a
function given to them -- :func:`kube_log_reader` reads it through the Kubernetes API.

"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from kfp_gpu.cluster.run_tasks import Task, failed_tasks, spec_tasks, succeeded_tasks, value_of
from kfp_gpu.cluster.task_logs import (
    LogReader,
    LogUnavailable,
    environment_of,
    message_of,
    outputs_of,
)


@dataclass
class Report:
    """The lines to print and the exit status they imply (0, 1 or 2)."""

    lines: list[str]
    code: int = 0


def ui_link(ui: str, run_id: str) -> str:
    """The KFP UI page of a run: ``<ui>/#/runs/details/<run_id>`` (kfp ``client.py``
    ``run_pipeline``'s link)."""
    return f"{ui.rstrip('/')}/#/runs/details/{run_id}"


def _read(read_log: LogReader | None, run_id: str, pods: list[str], pick) -> tuple:
    """The first of ``pods`` whose log ``pick`` finds something in: ``(found, why)``."""
    if read_log is None:
        return None, "no kubeconfig to read the task's log"
    why = "no pod recorded for the task"
    for pod in pods:
        try:
            log = read_log(run_id, pod)
        except LogUnavailable as e:
            why = str(e)
            continue
        found = pick(log)
        if found is not None:
            return found, ""
        why = "its log holds no record"
    return None, why


def failure_report(run, spec: dict | list | None, read_log: LogReader | None, url: str,
                   no_reader_why: str = "") -> Report:
    """One line per failed component task of a FAILED run (pure but for ``read_log``).

    ``task <name> failed: <message>`` -- the :mod:`kfp_gpu.inputs.errors` record in the
    task pod's log (`` (input error)`` or `` (unreachable)`` appended when it says so),
    else the log's last error line (:func:`error_line_of`); a log that cannot be read ->
    ``see <url> (<why>)``.
    A task whose KFP driver failed reads ``task <name> failed before it ran (KFP driver):
    ...``.

    Exit status (kfp_gpu/cli/errors.py ``task_status``; ``kfp-gpu run``'s rule): 2 when
    every failed task left a record saying its input was refused (a malformed URI, a
    missing file or object), 3 when every one left a record saying its environment failed
    it (:func:`environment_of`: a store that does not answer), else 1.
    """
    run_id = str(value_of(run, "run_id") or "")
    tasks = failed_tasks(run, spec)
    if not tasks:
        return Report([f"no component task failed (KFP's own steps did): see {url}"], 1)
    lines, input_flags, environment_flags = [], [], []
    for t in tasks:
        head = (f"task {t.title} failed before it ran (KFP driver)" if t.stage == "driver"
                else f"task {t.title} failed")
        found, why = _read(read_log, run_id, t.pods,
                           lambda log: (*message_of(log), environment_of(log)))
        why = (no_reader_why or why) if read_log is None else why
        if found is None:
            lines.append(f"{head}: see {url} ({why})")
            input_flags.append(False)
            environment_flags.append(False)
            continue
        message, input_error, environment = found
        lines.append(f"{head}: {message}" + (" (input error)" if input_error else
                                             " (unreachable)" if environment else ""))
        input_flags.append(bool(input_error) and t.stage == "executor")
        environment_flags.append(environment and t.stage == "executor")
    code = (2 if input_flags and all(input_flags)
            else 3 if environment_flags and all(environment_flags) else 1)
    return Report(lines, code)


def _metric(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def cached_line(task: Task, url: str) -> str:
    """What the summary says of a task served from KFP's cache (no pod ran this time, so
    no log holds its outputs; KFP's UI shows the cached ones)."""
    return (f"task {task.title}: served from KFP's cache (no pod ran; its outputs, those "
            f"of the run that computed them, are shown at {url})")


def outputs_report(run, spec: dict | list | None, read_log: LogReader | None, url: str,
                   no_reader_why: str = "") -> Report:
    """The output artifacts (URI) and metrics of each component task of a SUCCEEDED run
    (pure but for ``read_log``), from its pod's log (:func:`outputs_of`: the kfp-gpu record,
    else what KFP's launcher logged). A task served from the cache gets
    :func:`cached_line` (from the body alone); an importer nothing (its artifact is the URI
    the run was given, its pod logs no outputs). Without a reader: one line saying the rest
    are shown at ``url`` and why.

    Lines: ``task <name> outputs:``, then ``  <output>: <uri>`` per artifact, ``  metrics:
    k=v, ...`` and ``  <value>: <v>`` per returned value; ``outputs of <tasks>: see <url>
    (<why>)`` for pods that could not be read.
    """
    run_id = str(value_of(run, "run_id") or "")
    tasks = [t for t in succeeded_tasks(run, spec) if t.kind != "importer"]
    outputs = {name: t["outputs"] for name, t in spec_tasks(spec).items()}
    lines = [cached_line(t, url) for t in tasks if t.cached]
    if read_log is None:
        why = no_reader_why or "no kubeconfig to read the task logs"
        if len(lines) < len(tasks) or not tasks:
            lines.append(f"outputs and metrics: shown in the KFP UI at {url} ({why})")
        return Report(lines)
    missing = []
    for t in tasks:
        if t.cached:
            continue
        rec, why = _read(read_log, run_id, t.pods,
                         functools.partial(outputs_of, outputs=outputs.get(t.name)))
        if rec is None:
            missing.append((t, why))
            continue
        lines.append(f"task {t.title} outputs:")
        lines += [f"  {name}: {uri}" for name, uri in rec["artifacts"].items()]
        if rec["metrics"]:
            lines.append("  metrics: " + ", ".join(f"{k}={_metric(v)}"
                                                   for k, v in rec["metrics"].items()))
        lines += [f"  {name}: {value}" for name, value in rec["values"].items()]
    unread = [(t, why) for t, why in missing if why != "its log holds no record"]
    if unread:
        lines.append("outputs of " + ", ".join(t.name for t, _ in unread)
                     + f": see {url} ({unread[0][1]})")
    if not lines:
        lines.append(f"outputs and metrics: shown in the KFP UI at {url} (no task log "
                     "holds its outputs)")
    return Report(lines)
