"""``kfp-gpu compile`` output is all or nothing.

A failure after some targets compiled must leave the output folder as it was (absent, or
with its old files) and no temp folder beside it; the package folders get no file at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kfp_gpu.catalog import discover as registry
from kfp_gpu.compiler import compile as comp


def _failing_after(n: int, real=comp.compile_text):
    calls = []

    def compile_text(t, gpu=None, image_set=None, settings=None):
        calls.append(t.name)
        if len(calls) > n:
            raise ValueError(f"boom at {t.name}")
        return f"# {t.name}\n" if n < 99 else real(t, gpu, image_set, settings)

    return compile_text, calls


def test_failure_midway_leaves_no_new_output_folder(tmp_path, monkeypatch):
    fake, calls = _failing_after(2)
    monkeypatch.setattr(comp, "compile_text", fake)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="boom"):
        comp.compile_all(out)
    assert len(calls) == 3  # two compiled before the failure
    assert os.listdir(tmp_path) == []  # no out/, no temp folder beside it


def test_failure_midway_keeps_an_existing_folder_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "out"
    old = out / "components" / next(iter(registry.COMPONENTS)) / "component.yaml"
    old.parent.mkdir(parents=True)
    old.write_text("old\n")
    (out / "mine.txt").write_text("user file\n")
    fake, _ = _failing_after(2)
    monkeypatch.setattr(comp, "compile_text", fake)
    with pytest.raises(ValueError):
        comp.compile_all(out)
    assert old.read_text() == "old\n"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        old.relative_to(out).as_posix(), "mine.txt"]
    assert os.listdir(tmp_path) == ["out"]


def test_runtime_manifest_failure_writes_nothing(tmp_path, monkeypatch):
    """The Trainer runtime is the last piece: its failure must not leave the YAML written."""
    monkeypatch.setattr(comp, "compile_text",
                        lambda t, gpu=None, image_set=None, settings=None:
                        f"image: {image_set.image('horovod')}" if image_set else "x")

    def broken(*a, **k):
        raise ValueError("runtime boom")

    monkeypatch.setattr(comp, "runtime_manifest_texts", broken)
    with pytest.raises(ValueError, match="runtime boom"):
        comp.compile_all(tmp_path / "out")
    assert os.listdir(tmp_path) == []


def test_package_folders_get_no_file_when_one_target_fails(monkeypatch):
    fake, _ = _failing_after(3)
    monkeypatch.setattr(comp, "compile_text", fake)
    writes = []
    monkeypatch.setattr(comp.storage, "write_text", lambda p, t: writes.append(p))
    with pytest.raises(ValueError):
        comp.compile_all()
    assert writes == []


def test_success_moves_everything_into_place(tmp_path, monkeypatch):
    fake, _ = _failing_after(10_000)
    monkeypatch.setattr(comp, "compile_text", fake)
    out = tmp_path / "out"
    written = comp.compile_all(out)
    assert written and all(Path(p).is_file() for p in written)
    assert all(Path(p).read_text().startswith("# ") for p in written if "manifests" not in
               str(p))
    assert os.listdir(tmp_path) == ["out"]
    assert (out.stat().st_mode & 0o777) == 0o777 & ~_umask()
    # a second run into the existing folder replaces the files, leaves no temp folder
    assert comp.compile_all(out) == written
    assert os.listdir(tmp_path) == ["out"]


def test_output_dir_that_is_a_file_is_refused_before_compiling(tmp_path, monkeypatch):
    fake, calls = _failing_after(10_000)
    monkeypatch.setattr(comp, "compile_text", fake)
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        comp.compile_all(tmp_path / "f")
    assert calls == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_file_in_the_way_moves_nothing(tmp_path, monkeypatch):
    """Every destination is checked before the first file moves into an existing folder."""
    fake, _ = _failing_after(10_000)
    monkeypatch.setattr(comp, "compile_text", fake)
    out = tmp_path / "out"
    (out / "components").mkdir(parents=True)
    (out / "pipelines").write_text("a file where a folder goes\n")
    with pytest.raises(ValueError, match="in the way"):
        comp.compile_all(out)
    assert sorted(p.name for p in out.rglob("*")) == ["components", "pipelines"]
    assert os.listdir(tmp_path) == ["out"]
