"""Compile every component and pipeline of the registry (:mod:`kfp_gpu.build.registry`) to
YAML, or check they are current."""

from __future__ import annotations

import difflib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kfp_gpu import storage
from kfp_gpu.build import images, registry


@dataclass(frozen=True)
class Target:
    """One compiled YAML: ``kind`` is ``component`` or ``pipeline``."""

    kind: str
    name: str
    ref: str
    path: Path


def package_dir(subpackage: str) -> Path:
    """Folder of ``kfp_gpu.components`` / ``kfp_gpu.pipelines`` (the repo folder when editable)."""
    return registry.package_dir(f"kfp_gpu.{subpackage}")


def targets(output_dir: Path | None = None, only: str | None = None) -> list[Target]:
    """Where each catalog entry compiles to (package locations, or under ``output_dir``).

    Raises:
        ValueError: ``only`` is not a catalog name (naming the accepted names).
    """
    comp_root = output_dir / "components" if output_dir else package_dir("components")
    pipe_root = output_dir / "pipelines" if output_dir else package_dir("pipelines")
    out = [Target("component", n, r, comp_root / n / "component.yaml")
           for n, r in registry.COMPONENTS.items()]
    # The old path of a renamed component carries the new spec (registry.DEPRECATED_COMPONENTS).
    out += [Target("component", old, registry.COMPONENTS[new], comp_root / old / "component.yaml")
            for old, new in registry.DEPRECATED_COMPONENTS.items()]
    out += [Target("pipeline", n, r, pipe_root / f"{n.replace('-', '_')}.yaml")
            for n, r in registry.PIPELINES.items()]
    if only:
        names = [t.name for t in out]
        if only not in names:
            raise ValueError(f"unknown component or pipeline {only!r}; accepted: {names}")
        out = [t for t in out if t.name == only]
    return out


def compile_target(t: Target, dest: Path, gpu: str | None = None) -> None:
    """Compile one target to ``dest``; pipelines get the GPU request ``gpu`` if given."""
    from kfp import compiler

    obj = registry.resolve(t.ref)
    if t.kind == "pipeline":
        obj = obj(gpu) if gpu else obj()
    with storage.atomic_file(dest, suffix=".yaml") as tmp:
        compiler.Compiler().compile(obj, str(tmp))


def compile_all(output_dir: Path | None = None, gpu: str | None = None,
                only: str | None = None) -> list[Path]:
    """Compile the catalog; returns the written paths."""
    written = []
    for t in targets(output_dir, only):
        compile_target(t, t.path, gpu if t.kind == "pipeline" else None)
        written.append(t.path)
    return written


def check_all(only: str | None = None) -> list[str]:
    """Recompile into a temporary folder and diff against the checked-in YAML.

    Returns:
        One message (with a short unified diff) per stale or missing file; [] if current.
    """
    if images.registry() != images.DEFAULT_REGISTRY:
        raise ValueError(f"{images.REGISTRY_ENV}={images.registry()!r} is set: the checked-in "
                         f"YAML uses the default registry {images.DEFAULT_REGISTRY!r}; unset it "
                         "to check")
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in targets(None, only):
            fresh = Path(tmp) / f"{t.kind}-{t.name}.yaml"
            compile_target(t, fresh)
            if not t.path.exists():
                problems.append(f"{t.path}: missing (run `kfp-gpu compile`)")
                continue
            old, new = t.path.read_text().splitlines(), fresh.read_text().splitlines()
            if old != new:
                diff = list(difflib.unified_diff(old, new, str(t.path), "compiled", n=1,
                                                 lineterm=""))
                problems.append(f"{t.path}: stale (run `kfp-gpu compile`)\n"
                                + "\n".join(diff[:20]))
    return problems


def compiled_pipeline(ref: str) -> tuple[Path, str]:
    """Registry pipeline name or YAML path -> (compiled YAML path, pipeline display name).

    Raises:
        ValueError: neither a registry pipeline nor an existing YAML file (names the
            registry's pipelines).
    """
    if ref in registry.PIPELINES:
        path = targets(only=ref)[0].path
        if not path.is_file():
            raise ValueError(f"compiled YAML for {ref!r} missing at {path}; run "
                             "`kfp-gpu compile`")
        return path, ref
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        import yaml

        doc = next(iter(yaml.safe_load_all(path.read_text())), None) or {}
        name = doc.get("pipelineInfo", {}).get("name") or path.stem.replace("_", "-")
        return path, name
    raise ValueError(f"unknown pipeline {ref!r}; accepted: a catalog pipeline "
                     f"({', '.join(sorted(registry.PIPELINES))}) or a compiled .yaml file")
