"""Every component and pipeline, found from the packages themselves (no hand-kept list).

Components: each folder ``components/<name>/`` with a ``component.py`` (package
``kfp_gpu.components.<name>``) whose ``@dsl.component`` is the attribute ``<name>``;
compiled to ``components/<name>/component.yaml``. ``components/shared`` holds no component.
Pipelines: each module ``pipelines/<module>.py`` that defines a top-level ``build``
function: the factory taking the GPU request text (``gpu: str``, see :mod:`kfp_gpu.gpu`)
and returning the ``@dsl.pipeline`` function; its name is the module name with ``_`` as
``-`` (``imdb_lstm`` -> ``imdb-lstm``); compiled to ``pipelines/<module>.yaml``. A pipeline
module may set ``LOCAL_DATA = (parameter, path under KFP_GPU_DATA_DIR)``, the parameter
``kfp-gpu run --local --data-dir`` fills.

Discovery reads the source files (``ast``) and imports nothing, so listing is cheap;
:func:`resolve` imports one entry when it is compiled or run. Modules found here must not
import TensorFlow at import time.
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


def _pipeline_modules(root: Path) -> dict[str, ast.Module]:
    return {f.stem: tree for f in sorted(root.glob("*.py")) if not f.stem.startswith("_")
            for tree in [_top_level(f)]
            if any(isinstance(n, ast.FunctionDef) and n.name == "build" for n in tree.body)}


def discover_pipelines(root: Path | None = None) -> dict[str, str]:
    """Pipeline name -> ``"module:build"``, sorted by module."""
    mods = _pipeline_modules(root or package_dir(PIPELINES_PACKAGE))
    return {m.replace("_", "-"): f"{PIPELINES_PACKAGE}.{m}:build" for m in mods}


def discover_local_data(root: Path | None = None) -> dict[str, tuple[str, str]]:
    """Pipeline name -> ``(parameter, path under KFP_GPU_DATA_DIR)`` from ``LOCAL_DATA``."""
    out = {}
    for m, tree in _pipeline_modules(root or package_dir(PIPELINES_PACKAGE)).items():
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "LOCAL_DATA" for t in node.targets):
                param, rel = ast.literal_eval(node.value)
                out[m.replace("_", "-")] = (str(param), str(rel))
    return out


COMPONENTS: dict[str, str] = discover_components()
PIPELINES: dict[str, str] = discover_pipelines()
#: Pipelines' parameter for local data: name -> (parameter, path under KFP_GPU_DATA_DIR).
LOCAL_DATA: dict[str, tuple[str, str]] = discover_local_data()


def resolve(ref: str):
    """Import ``"module:attribute"`` and return the attribute."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
