"""The component tasks of a KFP run as ``get_run`` shows them (pure): which rows are the
pipeline's tasks, which pod told about each, which were served from the cache.


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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: Argo/KFP nodes that are never a component task (anatomy.md; api/26 of the recording).
INTERNAL = frozenset({"root", "root-driver", "executor", "entrypoint"})
DRIVER_SUFFIX = "-driver"
#: The Argo workflow's own node: ``generateName`` = the pipeline name + ``-`` + 5 random
#: lowercase alphanumerics (Argo ``workflow/util`` ``generateName``; ``imdb-lstm-lx8bz``).
WORKFLOW_NODE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-[a-z0-9]{5}$")
#: Most seconds between a cached task's start and end (its DAG node and skipped step are
#: made and finished in one pass of Argo's controller; times have whole seconds).
CACHED_SPAN = timedelta(seconds=1)



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


def value_of(obj, key: str, default=None):
    """``obj[key]`` of a dict body, ``obj.key`` of a ``kfp_server_api`` model; ``default``
    when absent."""
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
    for t in value_of(value_of(run, "run_details") or {}, "task_details") or []:
        pods = [str(p) for c in (value_of(t, "child_tasks") or [])
                if (p := value_of(c, "pod_name"))]
        out.append({"name": str(value_of(t, "display_name") or ""),
                    "state": str(value_of(t, "state") or ""), "pods": pods,
                    "start": _time(value_of(t, "start_time")), "end": _time(value_of(t, "end_time"))})
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
