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

The pure part (:func:`component_tasks`, :func:`failed_tasks`, :func:`succeeded_tasks`,
:func:`failure_report`, :func:`outputs_report`) turns that body and the compiled pipeline
spec into lines; the message of a failed task and the outputs of one that succeeded come
from its pod's log (the record lines of :mod:`kfp_gpu.inputs.errors` and
:mod:`kfp_gpu.task_outputs`), read by a function given to them -- :func:`kube_log_reader`
reads it through the Kubernetes API.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

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
        pods: ``child_tasks[].pod_name`` (Argo node ids of its pods).
        stage: ``executor``, or ``driver`` when only its KFP driver failed.
    """

    name: str
    label: str = ""
    state: str = ""
    pods: list[str] = field(default_factory=list)
    stage: str = "executor"

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


def task_details(run) -> list[dict]:
    """``run_details.task_details`` of a ``get_run`` body (a dict or a ``kfp_server_api``
    ``V2beta1Run``) as ``{"name", "state", "pods"}`` dicts (pure)."""
    out = []
    for t in _get(_get(run, "run_details") or {}, "task_details") or []:
        pods = [str(p) for c in (_get(t, "child_tasks") or [])
                if (p := _get(c, "pod_name"))]
        out.append({"name": str(_get(t, "display_name") or ""),
                    "state": str(_get(t, "state") or ""), "pods": pods})
    return out


def component_tasks(spec: dict | list | None) -> dict[str, str]:
    """Component task name -> its ``taskInfo.name`` in a compiled pipeline spec (pure).

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
    dags = [((spec.get("root") or {}).get("dag") or {})]
    dags += [c["dag"] for c in components.values() if isinstance(c, dict) and c.get("dag")]
    out = {}
    for dag in dags:
        for name, task in (dag.get("tasks") or {}).items():
            ref = ((task.get("componentRef") or {}).get("name")) or ""
            if (components.get(ref) or {}).get("executorLabel"):
                out[name] = (task.get("taskInfo") or {}).get("name") or name
    return out


def is_internal(name: str, all_pods: Iterable[str] = ()) -> bool:
    """Whether a task detail named ``name`` is Argo/KFP machinery, told from the body alone
    (pure): ``root``, ``root-driver``, ``executor``, ``*-driver``, and the workflow node
    (``<pipeline>-xxxxx`` whose name starts every pod name of the run)."""
    if name in INTERNAL or name.endswith(DRIVER_SUFFIX):
        return True
    every = [p for p in all_pods if p]
    return bool(WORKFLOW_NODE.match(name) and every
                and all(p.startswith(name + "-") for p in every))


def _matching_names(rows: list[dict], spec) -> dict[str, str]:
    """:func:`component_tasks` of ``spec``, or {} when no task detail carries one of its
    names (a spec that is not the run's: the body's own rule applies then)."""
    names = component_tasks(spec)
    known = set(names) | set(names.values())
    return names if any(r["name"] in known for r in rows) else {}


def _tasks(run, spec, states: set[str]) -> tuple[list[Task], list[dict]]:
    rows = task_details(run)
    names = _matching_names(rows, spec)
    labels = {label: name for name, label in names.items()}
    all_pods = [p for r in rows for p in r["pods"]]
    out = []
    for r in rows:
        if r["state"] not in states:
            continue
        if names or labels:
            if r["name"] in names:
                label = names[r["name"]]
            elif r["name"] in labels:
                label = r["name"]
            else:
                continue
            out.append(Task(r["name"], "" if label == r["name"] else label, r["state"],
                            r["pods"]))
        elif not is_internal(r["name"], all_pods):
            out.append(Task(r["name"], "", r["state"], r["pods"]))
    return out, rows


def failed_tasks(run, spec: dict | list | None = None) -> list[Task]:
    """The failed component tasks of a ``get_run`` body, never the internals (pure).

    With ``spec`` (the compiled pipeline submitted) a component task is one of
    :func:`component_tasks`; without it, any task detail that :func:`is_internal` does not
    reject. A component task that did not fail itself but whose ``<task>-driver`` did
    (inputs that could not be resolved, a pod spec patch refused) is listed with
    ``stage="driver"`` and the driver's pods.
    """
    failed, rows = _tasks(run, spec, {"FAILED", "ERROR"})
    seen = {t.name for t in failed}
    names = _matching_names(rows, spec)
    all_pods = [p for r in rows for p in r["pods"]]
    for r in rows:
        if r["state"] not in ("FAILED", "ERROR") or not r["name"].endswith(DRIVER_SUFFIX):
            continue
        task = r["name"][:-len(DRIVER_SUFFIX)]
        known = (task in names) if names else not is_internal(task, all_pods)
        if known and task not in seen:
            label = names.get(task, task)
            failed.append(Task(task, "" if label == task else label, r["state"], r["pods"],
                               stage="driver"))
            seen.add(task)
    return failed


def succeeded_tasks(run, spec: dict | list | None = None) -> list[Task]:
    """The component tasks of a ``get_run`` body that SUCCEEDED (pure; see
    :func:`failed_tasks` for what a component task is)."""
    return _tasks(run, spec, {"SUCCEEDED"})[0]


def message_of(log: str) -> tuple[str, bool | None]:
    """``(message, input_error)`` of a failed task's log (pure): the last
    :mod:`kfp_gpu.inputs.errors` record (its message, and ``input`` when it names one),
    else the last non-empty line with ``input_error`` None (no record)."""
    lines = log.splitlines()
    for line in reversed(lines):
        rec = errors.record_of(line)
        if rec is not None:
            msg = str(rec["message"])
            if rec.get("input") and str(rec["input"]) not in msg:
                msg += f" (input: {rec['input']})"
            return msg, bool(rec.get("input_error"))
    last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    return (last or "the log is empty"), None


def outputs_of(log: str) -> dict | None:
    """The last :mod:`kfp_gpu.task_outputs` record in a task's log, or None (pure)."""
    for line in reversed(log.splitlines()):
        rec = task_outputs.record_of(line)
        if rec is not None:
            return rec
    return None


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
    task pod's log (`` (input error)`` appended when it says so), else the log's last
    non-empty line; a log that cannot be read -> ``see <url> (<why>)``. A task whose KFP
    driver failed reads ``task <name> failed before it ran (KFP driver): ...``.

    Exit status (kfp_gpu/cli/errors.py; ``kfp-gpu run``'s rule): 2 when every failed task
    left a record saying its input was refused, else 1.
    """
    run_id = str(_get(run, "run_id") or "")
    tasks = failed_tasks(run, spec)
    if not tasks:
        return Report([f"no component task failed (KFP's own steps did): see {url}"], 1)
    lines, input_flags = [], []
    for t in tasks:
        head = (f"task {t.title} failed before it ran (KFP driver)" if t.stage == "driver"
                else f"task {t.title} failed")
        found, why = _read(read_log, run_id, t.pods, message_of)
        why = (no_reader_why or why) if read_log is None else why
        if found is None:
            lines.append(f"{head}: see {url} ({why})")
            input_flags.append(False)
            continue
        message, input_error = found
        lines.append(f"{head}: {message}" + (" (input error)" if input_error else ""))
        input_flags.append(bool(input_error) and t.stage == "executor")
    return Report(lines, 2 if input_flags and all(input_flags) else 1)


def _metric(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def outputs_report(run, spec: dict | list | None, read_log: LogReader | None, url: str,
                   no_reader_why: str = "") -> Report:
    """The output artifacts (URI) and metrics of each component task of a SUCCEEDED run,
    from the :mod:`kfp_gpu.task_outputs` record in its pod's log (pure but for
    ``read_log``). Without a reader: one line saying they are shown at ``url`` and why.

    Lines: ``task <name> outputs:``, then ``  <output>: <uri>`` per artifact, ``  metrics:
    k=v, ...`` and ``  <value>: <v>`` per returned value.
    """
    if read_log is None:
        why = no_reader_why or "no kubeconfig to read the task logs"
        return Report([f"outputs and metrics: shown in the KFP UI at {url} ({why})"])
    run_id = str(_get(run, "run_id") or "")
    lines, missing = [], []
    for t in succeeded_tasks(run, spec):
        rec, why = _read(read_log, run_id, t.pods, outputs_of)
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
                     "holds a kfp-gpu-task-outputs record)")
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
