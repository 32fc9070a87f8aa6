"""Run a catalog pipeline on this machine with ``kfp.local`` (SubprocessRunner, no venv)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from kfp_gpu.build import registry
from kfp_gpu.cluster import local_docker, run_log
from kfp_gpu.cluster import params as params_mod

DATA_DIR_ENV = "KFP_GPU_DATA_DIR"
RUNNERS = ("subprocess", "docker")


def default_data_params(name: str, data_dir: str | None) -> dict[str, str]:
    """Parameters pointing a pipeline at the real data in ``data_dir`` (or $KFP_GPU_DATA_DIR)."""
    data_dir = data_dir or os.environ.get(DATA_DIR_ENV)
    if not data_dir or name not in registry.LOCAL_DATA:
        return {}
    param, rel = registry.LOCAL_DATA[name]
    path = Path(data_dir).expanduser().resolve() / rel
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (data dir {data_dir})")
    return {param: str(path)}


def run(name: str, params: dict[str, str], *, gpu: str | None = None,
        pipeline_root: str = "local_outputs", data_dir: str | None = None,
        verbose: bool = False, runner: str = "subprocess") -> dict:
    """Run pipeline ``name`` under kfp.local; returns a summary of its outputs.

    The terminal shows one line per task start/end and the components' progress lines;
    every line of every task is kept in ``<pipeline_root>/logs/<name>-<UTC time>/<task>.log``
    (:mod:`kfp_gpu.cluster.run_log`). ``verbose`` shows every line on the terminal too.

    ``runner="docker"`` runs every task in its image (:mod:`kfp_gpu.cluster.local_docker`).

    Returns:
        ``{"pipeline", "seconds", "pipeline_root", "log_dir", "tasks": {task: [status,
        seconds]}, "outputs": {name: value | {"uri", "metadata"}}}``.

    Raises:
        ValueError: unknown pipeline, runner or parameter; RuntimeError: a task failed
        (or, under docker, an output is missing).
    """
    from kfp import local

    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; accepted: {list(RUNNERS)}")
    if name not in registry.PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; accepted: {sorted(registry.PIPELINES)}")
    factory = registry.resolve(registry.PIPELINES[name])
    pipeline = factory(gpu) if gpu else factory()
    merged = {**default_data_params(name, data_dir), **params}
    kwargs = params_mod.typed(merged, params_mod.types_of_pipeline(pipeline))
    root = str(Path(pipeline_root).resolve())
    if runner == "docker":
        local_docker.prepare_root(root)
        task_runner = local_docker.runner(data_dir or os.environ.get(DATA_DIR_ENV))
    else:
        task_runner = local.SubprocessRunner(use_venv=False)
    local.init(runner=task_runner, pipeline_root=root, raise_on_error=True)
    log_dir = Path(root) / "logs" / f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    t0 = time.perf_counter()
    try:
        with run_log.captured(log_dir, verbose=verbose) as stream:
            task = pipeline(**kwargs)
    except RuntimeError as e:
        raise RuntimeError(f"{e} (task logs: {log_dir})") from e
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
