"""Where a YAML/JSON block's data comes from: ``<!-- docs-test: source=KIND:WHAT[#SELECT] -->``
(used by tests/support/doc_blocks.py). Each returns a list of documents:

- ``python:EXPR``: an expression in the page's namespace (its Python blocks above, visible
  or ``invisible-code-block``), e.g. what a builder returns; a list is several documents;
- ``compile:PATH[#KEY/KEY/...]``: ``kfp-gpu compile -o DIR`` once per session, then the file
  ``DIR/PATH`` (a component or pipeline YAML, a manifest), optionally one value inside;
- ``kustomize:DIR[#KIND,KIND]``: DIR rendered by :func:`tests.support.kustomize.kustomize` (what the
  repository ships rendered), optionally only the objects of those kinds;
- ``file:PATH[#KEY/KEY/...]``: a file the repository ships, as it is.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _select(doc, path: str):
    for key in (k for k in path.split("/") if k):
        if isinstance(doc, list):
            doc = doc[int(key)]
        else:
            assert isinstance(doc, dict) and key in doc, f"#{path}: no {key!r} there"
            doc = doc[key]
    return doc


@functools.cache
def compiled() -> Path:
    """The folder ``kfp-gpu compile -o`` wrote (once per session)."""
    out = Path(tempfile.mkdtemp(prefix="docs-compile-"))
    proc = subprocess.run([str(Path(sys.executable).parent / "kfp-gpu"), "compile", "-o",
                           str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"kfp-gpu compile -o {out}: {proc.stdout}{proc.stderr}"
    return out


@functools.cache
def kustomized(folder: str) -> tuple:
    from tests.support.kustomize import kustomize

    return tuple(kustomize(REPO / folder))


def load(source: str, namespace: dict) -> list:
    """The documents ``source`` names (see the module docstring).

    Raises:
        AssertionError: an unknown kind, a missing file or key, a failed command.
    """
    kind, sep, rest = source.partition(":")
    assert sep, f"source={source}: KIND:WHAT (python, compile, kustomize, file)"
    what, _, select = rest.partition("#")
    if kind == "python":
        value = eval(what, namespace)  # the page's own expression
        return list(value) if isinstance(value, list | tuple) else [value]
    if kind == "kustomize":
        docs = list(kustomized(what))
        if select:
            kinds = select.split(",")
            docs = [d for d in docs if d.get("kind") in kinds]
            assert docs, f"kubectl kustomize {what}: no {kinds}"
        return docs
    if kind in ("compile", "file"):
        path = (compiled() if kind == "compile" else REPO) / what
        assert path.is_file(), f"source={source}: no file {path}"
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        if select:
            assert len(docs) == 1, f"{what}: #{select} in a file of {len(docs)} documents"
            return [_select(docs[0], select)]
        return docs
    raise AssertionError(f"source={source}: unknown kind {kind!r} (python, compile, "
                         "kustomize, file)")
