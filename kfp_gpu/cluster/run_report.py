"""What a finished KFP run did, told per component task: the failure or the outputs.

A KFP 2.17 backend's ``get_run`` (v2beta1 ``Run``, kubeflow/pipelines
``backend/api/v2beta1/run.proto``) gives a FAILED run no ``error`` and its
``run_details.task_details`` no ``error`` either; those task details mix the pipeline's
component tasks with the Argo/KFP machinery that runs them (``root``, ``root-driver``, one
``executor`` and one ``<task>-driver`` per task, the workflow node named like the pipeline
plus ``-xxxxx``; kubeflow/pipelines ``docs/contributing/anatomy.md`` and
``backend/src/v2/compiler/argocompiler/container.go``). Each task's ``child_tasks[].pod_name``
is the Argo node id of its executor pod (``<workflow>-<hash>``); the pod itself is named
``<workflow>-system-container-impl-<hash>`` when Argo names pods the v2 way
(``POD_NAMES=v2``, the default) and carries the node id in its annotation
``workflows.argoproj.io/node-id`` and the run id in its label ``pipeline/runid``.

Which node is whose (Argo node ids are ``<workflow>-<FNV-1a 32 of the node name>``,
argoproj/argo-workflows ``pkg/apis/workflow/v1alpha1/workflow_types.go`` ``NodeID``; node
names are dotted paths, ``<workflow>.root.<task>``): a container task's ``child_tasks`` is
its ``executor`` node (``<...>.<task>.executor``, the pod that ran the component); an
importer is one pod node of its own (``system-importer``, kubeflow/pipelines
``backend/src/v2/compiler/argocompiler/importer.go``) whose ``child_tasks`` are the tasks
that depend on it, as a driver's (``<task>-driver``) are its task's node. Those own nodes
are found by their id, kept only when the body names it (:func:`own_node`).

A task served from KFP's cache ran no pod: its driver found a cache hit and wrote
``cached-decision`` true (``backend/src/v2/driver/container.go``, "Use cache for task"), and
the ``executor`` step runs only ``when: cached-decision != true`` (``container.go``
``addContainerExecutorTemplate``), so Argo records that node ``Skipped``, which the API
reports as ``SKIPPED`` ("Entity has been skipped. For example, due to caching.", run.proto
``RuntimeState``; ``backend/src/apiserver/server/api_converter.go`` ``toModelTask`` takes a
node's phase, start and finish times as they are). The API names no row's own node, so the
task is tied to its skipped step by time (:func:`is_cached`).

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
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace

from kfp_gpu import task_outputs
from kfp_gpu.inputs import errors

#: Argo/KFP nodes that are never a component task (anatomy.md; api/26 of the recording).
INTERNAL = frozenset({"root", "root-driver", "executor", "entrypoint"})
DRIVER_SUFFIX = "-driver"
#: The Argo workflow's own node: ``generateName`` = the pipeline name + ``-`` + 5 random
#: lowercase alphanumerics (Argo ``workflow/util`` ``generateName``; ``imdb-lstm-lx8bz``).
WORKFLOW_NODE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-[a-z0-9]{5}$")
#: The annotation and label that tie a pod to its Argo node and KFP run (the recorded pods).
NODE_ID_ANNOTATION = "workflows.argoproj.io/node-id"
RUN_ID_LABEL = "pipeline/runid"
#: KFP's executor container (the launcher runs the component there).
CONTAINER = "main"
#: Lines of a pod's log read (the records are at the end of the component's output).
TAIL_LINES = 2000
#: What KFP's launcher logs after the component ran: ``glog.Infof("ExecutorOutput: %s",
#: prettyPrint(...))`` of the executor output file the kfp SDK wrote (its ``artifacts`` with
#: each output's ``uri`` and ``metadata``, its ``parameterValues``); kubeflow/pipelines
#: ``backend/src/v2/component/launcher_v2.go`` ``getExecutorOutputFile``.
EXECUTOR_OUTPUT = "] ExecutorOutput: "
#: A glog line (KFP's driver and launcher log through github.com/golang/glog):
#: ``Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg``, L the severity (I, W, E, F).
GLOG_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\s\]]+:\d+\] ?(.*)$")
#: Argo's executor in the same container: its logrus lines and, when the command failed, the
#: cobra error ``Error: exit status N`` (argoproj/argo-workflows ``cmd/argoexec``).
ARGO_LINE = re.compile(r'^(time="[^"]*" level=\w+ msg=|Error: exit status \d+$)')
#: KFP's launcher when the component's process exited non-zero (launcher-v2 ``main.go``).
EXIT_STATUS = re.compile(r"^failed to execute component: exit status \d+$")
#: An error line of the component itself: the last line of a Python traceback
#: (``ValueError: ...``, ``kfp_gpu.inputs.errors.EmptyInput: ...``), the CLI's one line
#: (``error: ...``, kfp_gpu/cli/errors.py ``report``), a logging record at ERROR or above.
ERROR_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|"
                        r"Failed|Failure|Fault)(?::\s.*)?|error: .+|(?:ERROR|CRITICAL)\b.*)$")
#: Most seconds between a cached task's start and end (its DAG node and skipped step are
#: made and finished in one pass of Argo's controller; times have whole seconds).
CACHED_SPAN = timedelta(seconds=1)


class LogUnavailable(Exception):
    """A task pod's log cannot be read; the message says why in a few words."""


#: ``read_log(run_id, node_id) -> log text``; raises :class:`LogUnavailable`.
LogReader = Callable[[str, str], str]


@dataclass
class Task:
    """A component task of the run as ``get_run`` shows it.

    Attributes:
        name: the API's ``display_name`` (the pipeline spec's task name).
        label: the spec's ``taskInfo.name`` when it differs from ``name``, else "".
        state: the task's ``state`` ("" when the API gave none).
        pods: Argo node ids of the pods whose log tells about it: a container task's
            ``child_tasks[].pod_name`` (its executor), an importer's or a failed driver's
            own node (:func:`own_node`; none when the body does not name it).
        stage: ``executor``, or ``driver`` when only its KFP driver failed.
        kind: ``container`` or ``importer`` (the spec's executor; ``container`` without a
            spec).
        cached: served from KFP's cache, no pod ran (:func:`is_cached`).
    """

    name: str
    label: str = ""
    state: str = ""
    pods: list[str] = field(default_factory=list)
    stage: str = "executor"
    kind: str = "container"
    cached: bool = False

    @property
    def title(self) -> str:
        """``name`` with the spec's display name in parentheses when it differs."""
        return f"{self.name} ({self.label})" if self.label else self.name


@dataclass
class Report:
    """The lines to print and the exit status they imply (0, 1 or 2)."""

    lines: list[str]
    code: int = 0


def _get(obj, key: str, default=None):
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _time(value) -> datetime | None:
    """A task time (RFC 3339 text in a dict body, a datetime from ``kfp_server_api``), or
    None when absent or unreadable."""
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def task_details(run) -> list[dict]:
    """``run_details.task_details`` of a ``get_run`` body (a dict or a ``kfp_server_api``
    ``V2beta1Run``) as ``{"name", "state", "pods", "start", "end"}`` dicts (pure; ``pods``:
    the ``child_tasks[].pod_name`` node ids, ``start``/``end``: datetimes or None)."""
    out = []
    for t in _get(_get(run, "run_details") or {}, "task_details") or []:
        pods = [str(p) for c in (_get(t, "child_tasks") or [])
                if (p := _get(c, "pod_name"))]
        out.append({"name": str(_get(t, "display_name") or ""),
                    "state": str(_get(t, "state") or ""), "pods": pods,
                    "start": _time(_get(t, "start_time")), "end": _time(_get(t, "end_time"))})
    return out


def fnv32a(text: str) -> int:
    """32-bit FNV-1a of ``text`` (UTF-8): Go's ``hash/fnv.New32a``, which Argo hashes node
    names with."""
    h = 0x811C9DC5
    for b in text.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def argo_node_id(workflow: str, node_name: str) -> str:
    """Argo's id of the node named ``node_name`` (``<workflow>.root.<task>``...):
    ``<workflow>-<fnv32a(node_name)>``, the workflow's own node its name
    (argo-workflows ``pkg/apis/workflow/v1alpha1/workflow_types.go`` ``NodeID``)."""
    return workflow if node_name == workflow else f"{workflow}-{fnv32a(node_name)}"


def workflow_name(rows: list[dict]) -> str:
    """The run's Argo workflow (``<pipeline>-xxxxx``): the task detail named like one whose
    name starts every node id of the body, else "" (pure)."""
    every = [p for r in rows for p in r["pods"]]
    return next((r["name"] for r in rows if every and WORKFLOW_NODE.match(r["name"])
                 and all(p.startswith(r["name"] + "-") for p in every)), "")


def own_node(rows: list[dict], name: str) -> str:
    """The node id of ``<workflow>.root.<name>`` (a root-level importer, a driver
    ``<task>-driver``) when some task detail of the body lists it as a child, else ""
    (pure): the API names no row's own node, and a task inside a loop or group has a
    longer node name."""
    wf = workflow_name(rows)
    node = argo_node_id(wf, f"{wf}.root.{name}") if wf else ""
    return node if node and any(node in r["pods"] for r in rows) else ""


def is_cached(row: dict, rows: list[dict]) -> bool:
    """Whether the component task ``row`` was served from KFP's cache (pure): it SUCCEEDED,
    its start and end are at most :data:`CACHED_SPAN` apart, and an ``executor`` step
    SKIPPED between them. Argo makes the task's node, skips its ``executor`` (``when``
    false) and finishes both in one pass (argo-workflows ``workflow/controller/dag.go``
    ``executeDAGTask``; a skipped node's ``FinishedAt`` is its ``StartedAt``,
    ``operator.go`` ``initializeNode``), while a task that runs a pod ends seconds after it
    started (recorded api/27: ``prep-images`` and its skipped step both at 19:49:16)."""
    start, end = row.get("start"), row.get("end")
    if row.get("state") != "SUCCEEDED" or start is None or end is None \
            or not timedelta(0) <= end - start <= CACHED_SPAN:
        return False
    return any(r["name"] == "executor" and r["state"] == "SKIPPED" and r.get("start")
               and start <= r["start"] <= end for r in rows)


def spec_tasks(spec: dict | list | None) -> dict[str, dict]:
    """Component task name -> ``{"label", "kind", "outputs"}`` in a compiled pipeline spec
    (pure): ``label`` its ``taskInfo.name``, ``kind`` ``importer`` when its executor is a
    ``dsl.importer`` (``deploymentSpec.executors[...].importer``) else ``container``,
    ``outputs`` each output artifact's name -> its ``schemaTitle``.

    ``spec``: the IR dict (or the YAML documents, the first being the IR). The tasks of
    ``root.dag`` and of every DAG component (``dsl.ParallelFor``, ``dsl.If``,
    ``dsl.ExitHandler`` groups) whose component runs an executor (``executorLabel``); the
    groups themselves are left out (kfp ``pipeline_spec.proto`` ``PipelineTaskSpec``).
    """
    if isinstance(spec, list):
        spec = spec[0] if spec else None
    if not isinstance(spec, dict):
        return {}
    components = spec.get("components") or {}
    executors = (spec.get("deploymentSpec") or {}).get("executors") or {}
    dags = [((spec.get("root") or {}).get("dag") or {})]
    dags += [c["dag"] for c in components.values() if isinstance(c, dict) and c.get("dag")]
    out = {}
    for dag in dags:
        for name, task in (dag.get("tasks") or {}).items():
            comp = components.get(((task.get("componentRef") or {}).get("name")) or "") or {}
            label = comp.get("executorLabel")
            if not label:
                continue
            arts = ((comp.get("outputDefinitions") or {}).get("artifacts")) or {}
            out[name] = {
                "label": (task.get("taskInfo") or {}).get("name") or name,
                "kind": "importer" if "importer" in (executors.get(label) or {}) else "container",
                "outputs": {a: str(((d or {}).get("artifactType") or {}).get("schemaTitle", ""))
                            for a, d in arts.items()}}
    return out


def component_tasks(spec: dict | list | None) -> dict[str, str]:
    """Component task name -> its ``taskInfo.name`` in a compiled pipeline spec (pure; the
    tasks of :func:`spec_tasks`)."""
    return {name: t["label"] for name, t in spec_tasks(spec).items()}


def is_internal(name: str, all_pods: Iterable[str] = ()) -> bool:
    """Whether a task detail named ``name`` is Argo/KFP machinery, told from the body alone
    (pure): ``root``, ``root-driver``, ``executor``, ``*-driver``, and the workflow node
    (``<pipeline>-xxxxx`` whose name starts every pod name of the run)."""
    if name in INTERNAL or name.endswith(DRIVER_SUFFIX):
        return True
    every = [p for p in all_pods if p]
    return bool(WORKFLOW_NODE.match(name) and every
                and all(p.startswith(name + "-") for p in every))


def _matching_tasks(rows: list[dict], spec) -> dict[str, dict]:
    """:func:`spec_tasks` of ``spec``, or {} when no task detail carries one of its names
    (a spec that is not the run's: the body's own rule applies then)."""
    tasks = spec_tasks(spec)
    known = set(tasks) | {t["label"] for t in tasks.values()}
    return tasks if any(r["name"] in known for r in rows) else {}


def _lookup(tasks: dict[str, dict], name: str) -> dict | None:
    """The spec's entry for a task detail named by its task name or its ``taskInfo.name``."""
    return tasks.get(name) or next((t for t in tasks.values() if t["label"] == name), None)


def _task(r: dict, rows: list[dict], info: dict | None, stage: str = "executor") -> Task:
    """The :class:`Task` of task detail ``r`` (``info``: its :func:`spec_tasks` entry)."""
    label = (info or {}).get("label", r["name"])
    kind = (info or {}).get("kind", "container")
    if stage == "driver":
        node = own_node(rows, r["name"] + DRIVER_SUFFIX)
        pods = [node] if node else []
    elif kind == "importer":
        node = own_node(rows, r["name"])
        pods = [node] if node else []
    else:
        pods = list(r["pods"])
    return Task(r["name"], "" if label == r["name"] else label, r["state"], pods, stage,
                kind, kind == "container" and stage == "executor" and is_cached(r, rows))


def _tasks(run, spec, states: set[str]) -> tuple[list[Task], list[dict]]:
    rows = task_details(run)
    tasks = _matching_tasks(rows, spec)
    all_pods = [p for r in rows for p in r["pods"]]
    out = []
    for r in rows:
        if r["state"] not in states:
            continue
        if tasks:
            info = _lookup(tasks, r["name"])
            if info is not None:
                out.append(_task(r, rows, info))
        elif not is_internal(r["name"], all_pods):
            out.append(_task(r, rows, None))
    return out, rows


def failed_tasks(run, spec: dict | list | None = None) -> list[Task]:
    """The failed component tasks of a ``get_run`` body, never the internals (pure).

    With ``spec`` (the compiled pipeline submitted) a component task is one of
    :func:`spec_tasks`; without it, any task detail that :func:`is_internal` does not
    reject. A component task that did not fail itself but whose ``<task>-driver`` did
    (inputs that could not be resolved, a pod spec patch refused) is listed with
    ``stage="driver"`` and the driver's own pod (:func:`own_node`).
    """
    failed, rows = _tasks(run, spec, {"FAILED", "ERROR"})
    seen = {t.name for t in failed}
    tasks = _matching_tasks(rows, spec)
    all_pods = [p for r in rows for p in r["pods"]]
    for r in rows:
        if r["state"] not in ("FAILED", "ERROR") or not r["name"].endswith(DRIVER_SUFFIX):
            continue
        task = r["name"][:-len(DRIVER_SUFFIX)]
        info = _lookup(tasks, task) if tasks else None
        known = (info is not None) if tasks else not is_internal(task, all_pods)
        if known and task not in seen:
            failed.append(_task({**r, "name": task}, rows, info, stage="driver"))
            seen.add(task)
    return failed


def succeeded_tasks(run, spec: dict | list | None = None) -> list[Task]:
    """The component tasks of a ``get_run`` body that SUCCEEDED (pure; see
    :func:`failed_tasks` for what a component task is), each with ``cached`` and ``kind``."""
    return _tasks(run, spec, {"SUCCEEDED"})[0]


def error_line_of(log: str) -> str:
    """The line of a failed task's log that says what went wrong, when no record does
    (pure). Argo's and KFP's own lines (:data:`ARGO_LINE`, :data:`GLOG_LINE`) come after
    the component's output and are passed over: the last error line of the component
    itself (:data:`ERROR_LINE`: a traceback's exception, ``error: ...``), else the last
    message KFP's driver or launcher logged at ERROR/FATAL other than the bare ``exit
    status N`` (an artifact upload that failed, inputs not resolved), else the
    component's last line, else that bare status, else the last line; "" for an empty
    log."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    own = [ln for ln in lines if not (GLOG_LINE.match(ln) or ARGO_LINE.match(ln))]
    kfp = [m.group(2).strip() for ln in lines
           if (m := GLOG_LINE.match(ln)) and m.group(1) in "EF" and m.group(2).strip()]
    said = [m for m in kfp if not EXIT_STATUS.match(m)]
    return next((ln for ln in reversed(own) if ERROR_LINE.match(ln)), "") or \
        (said[-1] if said else "") or (own[-1] if own else "") or \
        (kfp[-1] if kfp else "") or (lines[-1] if lines else "")


def message_of(log: str) -> tuple[str, bool | None]:
    """``(message, input_error)`` of a failed task's log (pure): the last
    :mod:`kfp_gpu.inputs.errors` record (its message, and ``input`` when it names one),
    else :func:`error_line_of` with ``input_error`` None (no record: a task that failed
    before it could write one, or outside the component's body)."""
    for line in reversed(log.splitlines()):
        rec = errors.record_of(line)
        if rec is not None:
            msg = str(rec["message"])
            if rec.get("input") and str(rec["input"]) not in msg:
                msg += f" (input: {rec['input']})"
            return msg, bool(rec.get("input_error"))
    return (error_line_of(log) or "the log is empty"), None


def environment_of(log: str) -> bool:
    """Whether the last :mod:`kfp_gpu.inputs.errors` record in a failed task's log says its
    environment failed it (the record's ``environment``: a store that does not answer, a
    full disk); False without a record (pure)."""
    for line in reversed(log.splitlines()):
        rec = errors.record_of(line)
        if rec is not None:
            return bool(rec.get("environment"))
    return False


def executor_output_of(log: str) -> dict | None:
    """The executor output KFP's launcher logged last in a task's log
    (:data:`EXECUTOR_OUTPUT`: the JSON object that follows, over as many lines as it
    takes), or None when there is none or it does not parse (pure)."""
    at = log.rfind(EXECUTOR_OUTPUT)
    if at < 0:
        return None
    try:
        found, _ = json.JSONDecoder().raw_decode(log[at + len(EXECUTOR_OUTPUT):].lstrip())
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _from_executor_output(found: dict, outputs: dict[str, str] | None) -> dict | None:
    """A :mod:`kfp_gpu.task_outputs` record of an executor output: each artifact's first
    ``uri``, the numeric ``metadata`` of the outputs whose schema (``outputs``: name ->
    ``schemaTitle``, the spec's) is :data:`kfp_gpu.task_outputs.METRICS_SCHEMA`, the
    ``parameterValues``; only the outputs the spec declares when it is given (the launcher
    may add its log artifact). None when it names no output."""
    arts = {}
    for name, listed in (found.get("artifacts") or {}).items():
        first = next(iter((listed or {}).get("artifacts") or []), None)
        if not isinstance(first, dict) or (outputs is not None and name not in outputs):
            continue
        arts[name] = SimpleNamespace(uri=first.get("uri", ""),
                                     schema_title=(outputs or {}).get(name),
                                     metadata=first.get("metadata") or {})
    values = found.get("parameterValues") or found.get("parameter_values") or {}
    if not arts and not values:
        return None
    return task_outputs.record_of(task_outputs.record(arts, values))


def outputs_of(log: str, outputs: dict[str, str] | None = None) -> dict | None:
    """What a task that succeeded produced, from its log (pure): the last
    :mod:`kfp_gpu.task_outputs` record (a kfp-gpu component's own), else the executor
    output KFP's launcher logged (:func:`executor_output_of`; ``outputs``: the task's
    output artifacts by name -> ``schemaTitle`` from the spec, for which are metrics and
    which to show), in the record's shape ``{"artifacts", "metrics", "values"}``; None when
    neither is there."""
    for line in reversed(log.splitlines()):
        rec = task_outputs.record_of(line)
        if rec is not None:
            return rec
    found = executor_output_of(log)
    return _from_executor_output(found, outputs) if found is not None else None


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
    run_id = str(_get(run, "run_id") or "")
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
    run_id = str(_get(run, "run_id") or "")
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


def kube_log_reader(api_client, namespace: str, container: str = CONTAINER,
                    tail_lines: int = TAIL_LINES) -> LogReader:
    """A :data:`LogReader` over the Kubernetes API (``kubernetes`` client ``CoreV1Api``).

    The run's pods are listed once per run (label ``pipeline/runid=<run_id>``) to map each
    Argo node id to its pod name (annotation ``workflows.argoproj.io/node-id``); a node id
    with no such pod is tried as the pod name itself (Argo ``POD_NAMES=v1``). Then
    ``GET .../pods/<name>/log?container=main&tailLines=<tail_lines>``.

    Raises (from the reader): :class:`LogUnavailable` with the HTTP status and reason (a pod
    garbage-collected after the run reads ``pod <name> not found``) or the connection error.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError  # the kubernetes client's transport

    core = client.CoreV1Api(api_client)
    pods_of: dict[str, dict[str, str]] = {}

    def read(run_id: str, node_id: str) -> str:
        if run_id not in pods_of:
            try:
                items = core.list_namespaced_pod(
                    namespace, label_selector=f"{RUN_ID_LABEL}={run_id}").items or []
            except (ApiException, OSError, ValueError):
                items = []  # e.g. no list permission: try the node id as the pod name
            except HTTPError as e:  # no connection (MaxRetryError, ...)
                raise LogUnavailable(f"Kubernetes API unreachable: {type(e).__name__}") from e
            pods_of[run_id] = {
                (p.metadata.annotations or {}).get(NODE_ID_ANNOTATION, ""): p.metadata.name
                for p in items}
        name = pods_of[run_id].get(node_id, node_id)
        try:
            return core.read_namespaced_pod_log(name, namespace, container=container,
                                                tail_lines=tail_lines) or ""
        except ApiException as e:
            if e.status == 404:
                raise LogUnavailable(f"pod {name} not found in namespace {namespace} "
                                     "(garbage-collected?)") from None
            raise LogUnavailable(f"reading the log of pod {name}: HTTP {e.status} "
                                 f"{e.reason}") from None
        except HTTPError as e:
            raise LogUnavailable(f"Kubernetes API unreachable: {type(e).__name__}") from e

    return read


def kube_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace of the kubeconfig context in use (``--context`` or the current one),
    or None when it names none or there is no kubeconfig (kubernetes client
    ``config.list_kube_config_contexts``)."""
    from kubernetes import config

    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # noqa: BLE001 - no kubeconfig, or one the client cannot read
        return None
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) \
        if context else active
    return ((chosen or {}).get("context") or {}).get("namespace") or None
