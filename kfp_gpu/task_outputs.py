"""The one record a component leaves in its task log when it succeeds: its outputs.

The KFP v2beta1 API of a 2.17 backend returns no artifacts with a run (``get_run``'s
``run_details.task_details`` carry names, states and pod names only; the artifacts live in
ML Metadata, which the API does not serve). So a component ends its body with
:func:`emit`, which writes ONE line to stdout: :data:`RECORD_PREFIX` followed by a JSON
object ``{"artifacts": {name: uri}, "metrics": {key: number}, "values": {name: value}}``.
``kfp-gpu submit --wait`` reads that line back from the task pod's log (container ``main``,
where KFP's launcher runs the component and its stdout goes) with :func:`record_of`, as it
reads the failure record of :mod:`kfp_gpu.inputs.errors`. A component that writes no record
still has its artifacts told on a cluster, from the executor output KFP's launcher logs
(:func:`kfp_gpu.cluster.task_logs.executor_output_of`); the record adds the values a
component chooses to report.

``uri``: the artifact's ``uri`` as KFP gave it (``minio://...``, ``s3://...``, ``gs://...`` on
a cluster; a local path under kfp.local). ``metrics``: the scalar entries of every
``system.Metrics`` output (kfp ``kfp/dsl/types/artifact_types.py`` ``Metrics.log_metric``
keeps them in ``metadata``); with more than one Metrics output each key is prefixed with
the output's name and a dot.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import TextIO

from kfp_gpu.inputs.errors import json_after

#: The start of the record line a task that succeeded leaves in its log (stdout).
RECORD_PREFIX = "kfp-gpu-task-outputs: "

#: kfp's schema title of a scalar-metrics artifact (kfp/dsl/types/artifact_types.py).
METRICS_SCHEMA = "system.Metrics"


def _number(value) -> float | int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and not (isinstance(value, float) and
                                               (math.isnan(value) or math.isinf(value))):
        return value
    return None


def record(artifacts: Mapping[str, object], values: Mapping[str, object] | None = None) -> str:
    """The one-line record of a task's outputs (pure).

    Args:
        artifacts: output name -> kfp artifact (anything with ``uri``; ``schema_title`` and
            ``metadata`` for a Metrics output); None values are left out.
        values: returned parameters to show (JSON-serialisable: bool, number, string).

    Returns:
        :data:`RECORD_PREFIX` + JSON ``{"artifacts", "metrics", "values"}`` on one line;
        NaN/inf metrics are left out (JSON has no NaN).
    """
    uris: dict[str, str] = {}
    metric_outputs = []
    for name, art in artifacts.items():
        if art is None:
            continue
        uris[name] = str(getattr(art, "uri", "") or "")
        if getattr(art, "schema_title", None) == METRICS_SCHEMA:
            metric_outputs.append((name, getattr(art, "metadata", None) or {}))
    metrics: dict[str, float | int] = {}
    for name, meta in metric_outputs:
        for key, value in meta.items():
            num = _number(value)
            if num is not None:
                metrics[f"{name}.{key}" if len(metric_outputs) > 1 else key] = num
    return RECORD_PREFIX + json.dumps({"artifacts": uris, "metrics": metrics,
                                       "values": dict(values or {})}, default=str)


def emit(artifacts: Mapping[str, object], values: Mapping[str, object] | None = None,
         stream: TextIO | None = None) -> None:
    """Write :func:`record` of ``artifacts`` / ``values`` to ``stream`` (stdout) and flush:
    the last thing a component body does."""
    out = stream or sys.stdout
    out.write(record(artifacts, values) + "\n")
    out.flush()


def record_of(line: str) -> dict | None:
    """The record in a task log line written by :func:`emit`, or None for any other line
    (a record cut or garbled, or without ``artifacts``, reads as None)."""
    rec = json_after(line, RECORD_PREFIX)
    if rec is None or not isinstance(rec.get("artifacts"), dict):
        return None
    rec.setdefault("metrics", {})
    rec.setdefault("values", {})
    return rec
