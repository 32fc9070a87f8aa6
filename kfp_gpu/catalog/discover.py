"""Every component and pipeline, found from the packages themselves (no hand-kept list),
and imported by name here alone.

Components: each folder ``components/<name>/`` with a ``component.py`` (package
``kfp_gpu.components.<name>``) whose ``@dsl.component`` is the attribute ``<name>``;
compiled to ``components/<name>/component.yaml``. ``components/shared`` holds no component.
Pipelines: each module ``pipelines/<module>.py`` that assigns a top-level ``ENTRY`` (a
:class:`kfp_gpu.dsl.entry.PipelineEntry`); its name is the module name with ``_`` as ``-``
(``imdb_lstm`` -> ``imdb-lstm``), and the entry must carry that name; compiled to
``pipelines/<module>.yaml``.

Listing reads the source files (``ast``) and imports nothing, so it is cheap; :func:`entry`
and :func:`component` import one module when it is compiled or run. Modules found here must
not import TensorFlow at import time.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

COMPONENTS_PACKAGE = "kfp_gpu.components"
PIPELINES_PACKAGE = "kfp_gpu.pipelines"
#: Component folders that are not components.
NOT_COMPONENTS = ("shared",)
#: The one name a pipeline module exports to the catalog.
ENTRY_NAME = "ENTRY"


def package_dir(package: str) -> Path:
    """Folder of a package (``kfp_gpu.components`` -> the ``components/`` folder when
    installed editable), found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package} is not an installed package")
    return Path(next(iter(spec.submodule_search_locations)))


def _top_level(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def discover_components(root: Path | None = None) -> dict[str, str]:
    """Component name -> ``"module:attribute"``, sorted by name."""
    root = root or package_dir(COMPONENTS_PACKAGE)
    out = {}
    for f in sorted(root.glob("*/component.py")):
        name = f.parent.name
        if name in NOT_COMPONENTS:
            continue
        defined = {n.name for n in _top_level(f).body if isinstance(n, ast.FunctionDef)}
        if name not in defined:
            raise ValueError(f"{f} defines no component function {name!r} (the folder's name)")
        out[name] = f"{COMPONENTS_PACKAGE}.{name}.component:{name}"
    return out


def _assigns_entry(tree: ast.Module) -> bool:
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == ENTRY_NAME
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])) for n in tree.body)


def discover_pipelines(root: Path | None = None,
                       package: str = PIPELINES_PACKAGE) -> dict[str, str]:
    """Pipeline name -> module (``"kfp_gpu.pipelines.imdb_lstm"``), sorted by module."""
    root = root or package_dir(package)
    return {f.stem.replace("_", "-"): f"{package}.{f.stem}" for f in sorted(root.glob("*.py"))
            if not f.stem.startswith("_") and _assigns_entry(_top_level(f))}


COMPONENTS: dict[str, str] = discover_components()
PIPELINES: dict[str, str] = discover_pipelines()


def accepted() -> str:
    return ", ".join(sorted(PIPELINES))


def entry(name: str):
    """The :class:`kfp_gpu.dsl.entry.PipelineEntry` of catalog pipeline ``name`` (imports
    its module).

    Raises:
        ValueError: not a catalog pipeline (naming the accepted ones), or a module whose
            ``ENTRY`` is not a PipelineEntry of that name.
    """
    from kfp_gpu.dsl.entry import PipelineEntry

    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; accepted: {accepted()}")
    found = getattr(importlib.import_module(PIPELINES[name]), ENTRY_NAME, None)
    if not isinstance(found, PipelineEntry) or found.name != name:
        raise ValueError(f"{PIPELINES[name]}.{ENTRY_NAME} is not the PipelineEntry {name!r}")
    return found


def component(name: str):
    """The ``@dsl.component`` of catalog component ``name`` (imports its module).

    Raises:
        ValueError: not a catalog component (naming the accepted ones).
    """
    if name not in COMPONENTS:
        raise ValueError(f"unknown component {name!r}; accepted: {', '.join(COMPONENTS)}")
    module, _, attr = COMPONENTS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
