"""Issue 38 moved ``kfp_gpu/build/`` and the input modules into rooms (``compiler``,
``release``, ``parameters``, ``inputs``). The old import paths still work through the alias
finder in kfp_gpu/__init__.py -- the same module objects, one DeprecationWarning naming the
new path -- and nothing is left at the old places."""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import kfp_gpu

REPO = Path(__file__).resolve().parents[1]
MODULES = sorted(old for old, new in kfp_gpu._MOVED.items() if "," not in new)


def _forget(monkeypatch) -> None:
    """Drop the old names from sys.modules and the package so the finder runs again."""
    for name in [m for m in sys.modules if m in kfp_gpu._MOVED]:
        monkeypatch.delitem(sys.modules, name)
    for old in kfp_gpu._MOVED:
        parent, _, attr = old.rpartition(".")
        if parent == "kfp_gpu":
            monkeypatch.delattr(kfp_gpu, attr, raising=False)


@pytest.mark.parametrize("old", MODULES)
def test_an_old_import_path_warns_and_is_the_moved_module(old, monkeypatch):
    _forget(monkeypatch)
    new = kfp_gpu._MOVED[old]
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(old)} is deprecated: it moved "
                                                rf"to {re.escape(new)} "):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == module.__spec__.name == new


def test_the_old_statements_work_and_warn_once_at_the_importer(monkeypatch):
    _forget(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from kfp_gpu import input_errors, storage
        from kfp_gpu.build import images, params
    assert {w.category for w in caught} == {DeprecationWarning}
    assert {str(w.message).split()[0] for w in caught} == {
        "kfp_gpu.input_errors", "kfp_gpu.storage", "kfp_gpu.build", "kfp_gpu.build.images",
        "kfp_gpu.build.params"}
    assert {w.filename for w in caught} == {__file__}
    assert images is importlib.import_module("kfp_gpu.release.images")
    assert params is importlib.import_module("kfp_gpu.parameters.command_line")
    assert storage is importlib.import_module("kfp_gpu.inputs.storage")
    assert input_errors is importlib.import_module("kfp_gpu.inputs.errors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from kfp_gpu.build import images as again
    assert again is images


@pytest.mark.parametrize("name", ["build", "storage"])
def test_the_old_public_names_warn_with_the_new_path(name, monkeypatch):
    _forget(monkeypatch)
    with pytest.warns(DeprecationWarning, match=f"kfp_gpu.{name} is deprecated: it moved to"):
        value = getattr(kfp_gpu, name)
    if name == "storage":
        assert value is importlib.import_module("kfp_gpu.inputs.storage")
    else:
        with pytest.warns(DeprecationWarning, match="kfp_gpu.release.images"):
            assert value.images is importlib.import_module("kfp_gpu.release.images")
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            _ = value.nope
    assert name not in kfp_gpu.__all__


def test_nothing_is_left_at_the_old_places():
    assert not (REPO / "kfp_gpu" / "build").exists()
    for old in MODULES:
        assert not (REPO / (old.replace(".", "/") + ".py")).exists(), old
    for room in ("compiler", "release", "parameters", "inputs"):
        assert (REPO / "kfp_gpu" / room / "__init__.py").is_file()
        assert room in kfp_gpu.__all__
