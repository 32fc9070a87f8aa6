"""Run a catalog pipeline on this machine with ``kfp.local`` (SubprocessRunner, no venv)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kfp_gpu.build import registry

DATA_DIR_ENV = "KFP_GPU_DATA_DIR"
_TYPES = {"STRING": str, "NUMBER_INTEGER": int, "NUMBER_DOUBLE": float, "BOOLEAN": None,
          "String": str, "Integer": int, "Float": float, "Boolean": None}


def parse_params(pairs: list[str]) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``.

    Raises:
        ValueError: an item without ``=``.
    """
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise ValueError(f"--param takes key=value, got {p!r}")
        out[key.strip()] = value
    return out


def _to_bool(v: str) -> bool:
    low = v.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {v!r} (accepted: true/false/1/0/yes/no)")


def typed_params(pipeline, raw: dict[str, str]) -> dict:
    """Convert text values to the pipeline's declared parameter types.

    Raises:
        ValueError: unknown parameter (naming the accepted ones) or a bad value.
    """
    inputs = pipeline.component_spec.inputs or {}
    out = {}
    for key, value in raw.items():
        if key not in inputs:
            raise ValueError(f"unknown parameter {key!r}; accepted: {sorted(inputs)}")
        kind = _TYPES.get(str(inputs[key].type), str)
        try:
            out[key] = _to_bool(value) if kind is None else kind(value)
        except ValueError as e:
            raise ValueError(f"parameter {key}: {e}") from e
    return out


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
        pipeline_root: str = "local_outputs", data_dir: str | None = None) -> dict:
    """Run pipeline ``name`` under kfp.local; returns a summary of its outputs.

    Returns:
        ``{"pipeline", "seconds", "pipeline_root", "outputs": {name: value | {"uri",
        "metadata"}}}``.

    Raises:
        ValueError: unknown pipeline or parameter; RuntimeError: a task failed.
    """
    from kfp import local

    if name not in registry.PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; accepted: {sorted(registry.PIPELINES)}")
    factory = registry.resolve(registry.PIPELINES[name])
    pipeline = factory(gpu) if gpu else factory()
    merged = {**default_data_params(name, data_dir), **params}
    kwargs = typed_params(pipeline, merged)
    root = str(Path(pipeline_root).resolve())
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=root,
               raise_on_error=True)
    t0 = time.perf_counter()
    task = pipeline(**kwargs)
    seconds = time.perf_counter() - t0
    outputs = {}
    for key, value in (task.outputs or {}).items():
        if hasattr(value, "uri"):
            outputs[key] = {"uri": value.uri, "metadata": dict(value.metadata or {})}
        else:
            outputs[key] = value
    return {"pipeline": name, "seconds": round(seconds, 1), "pipeline_root": root,
            "parameters": kwargs, "outputs": outputs}
