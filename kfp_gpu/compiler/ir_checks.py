"""Compile-time checks of a compiled pipeline (KFP IR, ``PipelineSpec`` as a dict) for task
patterns the KFP 2.17.0 backend cannot run, although the SDK compiles them and ``kfp.local``
runs them (pure: no I/O).

Each pattern names the upstream source it follows (kubeflow/pipelines at tag 2.17.0):

- ``importer-display-name``: an importer task whose ``taskInfo.name`` (the display name,
  ``set_display_name``) differs from its task key while another task (or the DAG's outputs)
  reads its output. The importer records its execution under ``taskInfo.name``
  (backend/src/v2/component/importer_launcher.go ``Execute``: ``TaskName:
  l.task.GetTaskInfo().GetName()``; the Argo importer template passes no ``--task_name``,
  backend/src/v2/compiler/argocompiler/importer.go), while consumers look the producer up by
  its task key (backend/src/v2/driver/resolve.go ``resolveUpstreamArtifacts``: ``cannot find
  producer task "<key>_<dag id>"``). Container and DAG tasks get the key as ``--task_name``
  (argocompiler/container.go, dag.go; PR 12061), so their display names are harmless.
  kubeflow/pipelines issue 11173 (open). An importer with a display name whose output
  nobody reads runs.
- ``importer-condition``: an importer task with ``triggerPolicy.condition`` is refused when
  the run is created (argocompiler/dag.go: "triggerPolicy.condition on importer task is not
  supported").
- ``importer-uri-source``: an importer whose ``artifact_uri`` runtime parameter is not an
  input of its DAG (``componentInputParameter``), e.g. another task's output: the importer
  reads only the parent DAG's input parameters (importer_launcher.go
  ``ImportSpecToMLMDArtifact``: "parent DAG does not have input parameter").
- ``importer-in-loop``: an importer inside a ``dsl.ParallelFor`` body
  (kubeflow/pipelines issue 10860, open: the importer's execution is not found per
  iteration).
- ``executor-kind``: a ``customJob`` or ``resolver`` executor (argocompiler/dag.go: "custom
  job executors is Google Cloud only", "resolver executors not implemented").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

#: The backend release the patterns were read from.
KFP_BACKEND = "2.17.0"
_SRC = f"kubeflow/pipelines {KFP_BACKEND}"


@dataclass(frozen=True)
class IrProblem:
    """One task the backend cannot run: ``task`` (``<component>/<task key>``), ``pattern``
    (a name of the module docstring's list), ``why`` and ``upstream`` (issue / file)."""

    task: str
    pattern: str
    why: str
    upstream: str

    def __str__(self) -> str:
        return f"task {self.task}: {self.pattern}: {self.why} ({self.upstream})"


def _dags(spec: dict) -> Iterator[tuple[str, dict]]:
    """``(component name, dag)`` of the root and of every DAG component."""
    yield "root", (spec.get("root") or {}).get("dag") or {}
    for name, comp in (spec.get("components") or {}).items():
        if comp.get("dag"):
            yield name, comp["dag"]


def _producers(dag: dict) -> set[str]:
    """Task keys whose outputs the DAG's tasks or the DAG's own outputs read."""
    out: set[str] = set()
    for task in (dag.get("tasks") or {}).values():
        inputs = task.get("inputs") or {}
        for spec in (inputs.get("artifacts") or {}).values():
            out.add(((spec or {}).get("taskOutputArtifact") or {}).get("producerTask", ""))
        for spec in (inputs.get("parameters") or {}).values():
            out.add(((spec or {}).get("taskOutputParameter") or {}).get("producerTask", ""))
    outputs = dag.get("outputs") or {}
    for spec in (outputs.get("artifacts") or {}).values():
        for sel in (spec or {}).get("artifactSelectors") or []:
            out.add(sel.get("producerSubtask", ""))
    for spec in (outputs.get("parameters") or {}).values():
        src = (spec or {}).get("valueFromParameter") or {}
        out.add(src.get("producerSubtask", ""))
        for sel in ((spec or {}).get("valueFromOneof") or {}).get("parameterSelectors") or []:
            out.add(sel.get("producerSubtask", ""))
    out.discard("")
    return out


def _loop_bodies(spec: dict) -> set[str]:
    """Components that are the body of a ParallelFor (the ref of an iterator task)."""
    return {(t.get("componentRef") or {}).get("name", "")
            for _, dag in _dags(spec) for t in (dag.get("tasks") or {}).values()
            if t.get("parameterIterator") or t.get("artifactIterator")}


def problems(spec: dict | list) -> list[IrProblem]:
    """The tasks of a compiled pipeline the KFP 2.17.0 backend cannot run.

    Args:
        spec: the compiled YAML loaded as a dict (``PipelineSpec``), or the list of its
            documents (the platform spec after it is ignored).

    Returns:
        One :class:`IrProblem` per task and pattern, in DAG order; [] when none.
    """
    pipeline = spec[0] if isinstance(spec, list) else spec
    comps = pipeline.get("components") or {}
    executors = (pipeline.get("deploymentSpec") or {}).get("executors") or {}
    loops = _loop_bodies(pipeline)
    out: list[IrProblem] = []
    for owner, dag in _dags(pipeline):
        read = _producers(dag)
        for key, task in (dag.get("tasks") or {}).items():
            where = f"{owner}/{key}"
            label = (comps.get((task.get("componentRef") or {}).get("name", "")) or {}).get(
                "executorLabel", "")
            executor = executors.get(label) or {}
            for kind in ("customJob", "resolver"):
                if kind in executor:
                    out.append(IrProblem(where, "executor-kind", f"a {kind} executor cannot "
                                         "run on KFP's Argo backend",
                                         f"{_SRC} backend/src/v2/compiler/argocompiler/dag.go"))
            if "importer" not in executor:
                continue
            shown = (task.get("taskInfo") or {}).get("name", key)
            if shown != key and key in read:
                out.append(IrProblem(
                    where, "importer-display-name",
                    f"display name {shown!r} differs from the task key {key!r} and its output "
                    "is read downstream: the importer records itself under the display name, "
                    f"the consumer's driver fails with 'cannot find producer task \"{key}_<dag "
                    "id>\"'; drop set_display_name on the importer",
                    f"kubeflow/pipelines issue 11173; {_SRC} backend/src/v2/component/"
                    "importer_launcher.go"))
            if (task.get("triggerPolicy") or {}).get("condition"):
                out.append(IrProblem(
                    where, "importer-condition", "an importer under a condition is refused "
                    "when the run is created; move the condition to the consumers",
                    f"{_SRC} backend/src/v2/compiler/argocompiler/dag.go"))
            uri = ((executor["importer"].get("artifactUri") or {}).get("runtimeParameter"))
            if uri:
                source = ((task.get("inputs") or {}).get("parameters") or {}).get(uri) or {}
                if "componentInputParameter" not in source:
                    out.append(IrProblem(
                        where, "importer-uri-source",
                        f"artifact_uri comes from {sorted(source) or 'nothing'}; the importer "
                        "reads only its DAG's input parameters (pass a pipeline parameter)",
                        f"{_SRC} backend/src/v2/component/importer_launcher.go"))
            if owner in loops:
                out.append(IrProblem(
                    where, "importer-in-loop", "an importer inside a dsl.ParallelFor body; "
                    "import before the loop and pass the artifact in",
                    "kubeflow/pipelines issue 10860"))
    return out


def check(spec: dict | list, name: str = "") -> None:
    """Refuse a compiled pipeline with :func:`problems`.

    Raises:
        ValueError: one line naming the pipeline, every problem and its upstream source.
    """
    found = problems(spec)
    if found:
        what = f"pipeline {name!r}" if name else "the pipeline"
        raise ValueError(f"{what} cannot run on a KFP {KFP_BACKEND} backend: "
                         + "; ".join(str(p) for p in found))
