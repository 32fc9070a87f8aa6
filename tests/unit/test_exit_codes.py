"""One exit-code rule for faults in this process and in a task: input -> 2,
environment -> 3, job or internal -> 1 (kfp_gpu.cli.errors; README "Exit codes").

A full disk is real here: writing to /dev/full fails with ENOSPC (no mount needed), and as
root a 32 KiB tmpfs fills up under ``kfp-gpu compile -o DIR``."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kfp_gpu.cli import errors
from kfp_gpu.cli.app import app
from kfp_gpu.inputs import errors as input_errors

runner = CliRunner()


def _error_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("error: ")]


def _disk_full(path: Path, data: str, *args, **kwargs) -> int:
    """``Path.write_text`` onto /dev/full: the kernel answers ENOSPC."""
    with open("/dev/full", "w", encoding="utf-8") as f:
        return f.write(data)


# ---------------------------------------------------------------- environment -> 3
def test_a_full_disk_during_compile_is_the_environment_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_text", _disk_full)
    out = tmp_path / "out"
    r = runner.invoke(app, ["compile", "--only", "imdb-lstm", "-o", str(out)])
    assert r.exit_code == errors.ENVIRONMENT == 3, r.output
    assert _error_lines(r.output) == [
        "error: the disk is full (no space left); free space there or write elsewhere"]
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="mounting a tmpfs needs root on Linux")
def test_a_full_tmpfs_under_compile_names_the_file(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(mnt)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("mount -t tmpfs refused here (a container without CAP_SYS_ADMIN)")
    try:
        r = subprocess.run([sys.executable, "-m", "kfp_gpu", "compile", "-o",
                            str(mnt / "out")], capture_output=True, text=True, timeout=300,
                           check=False)
        left = sorted(p.name for p in mnt.iterdir())
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert r.returncode == 3, r.stdout + r.stderr
    lines = _error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: the disk is full (no space left)")
    assert left == []  # the staged folder was removed


def test_the_environment_errnos_and_the_input_ones():
    with pytest.raises(OSError) as full:
        _disk_full(Path("x"), "data")
    assert full.value.errno == errno.ENOSPC
    assert errors.classify(full.value)[0] == 3
    quota = OSError(errno.EDQUOT, "Disk quota exceeded", "/home/u/out/x.yaml")
    assert errors.classify(quota) == (
        3, ("the disk is full (disk quota exceeded): /home/u/out/x.yaml; free space there or "
            "write elsewhere"))
    assert errors.classify(OSError(errno.EMFILE, "Too many open files"))[0] == 3
    for e in (FileNotFoundError(errno.ENOENT, "No such file or directory", "in.csv"),
              PermissionError(errno.EACCES, "Permission denied", "/out"),
              OSError(errno.EROFS, "Read-only file system", "/ro/out")):
        assert errors.classify(e)[0] == 2, e


# ---------------------------------------------------------------- internal -> 1
def _bug(*args, **kwargs):
    raise ValueError("bug")


def test_an_internal_valueerror_in_compile_is_1_with_the_hint(tmp_path, monkeypatch):
    from kfp_gpu.compiler import compile as comp

    monkeypatch.setattr(comp, "compile_all", _bug)
    r = runner.invoke(app, ["compile", "-o", str(tmp_path / "out")])
    assert r.exit_code == 1, r.output
    assert _error_lines(r.output) == [
        "error: internal error: ValueError: bug (run with -v for the traceback)"]
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["-v", "compile", "-o", str(tmp_path / "out")])
    assert r.exit_code == 1 and "Traceback" in r.output
    assert _error_lines(r.output) == ["error: internal error: ValueError: bug"]


def test_an_internal_valueerror_in_submit_is_1(monkeypatch):
    from kfp_gpu.cluster import submit

    monkeypatch.setattr(submit, "submit", _bug)
    r = runner.invoke(app, ["submit", "imdb-lstm", "--host", "http://127.0.0.1:1"])
    assert r.exit_code == 1, r.output
    assert _error_lines(r.output)[0].startswith("error: internal error: ValueError: bug")


def test_which_valueerrors_are_input():
    from kfp_gpu.dsl import k8s_rules

    with pytest.raises(ValueError) as refused:  # the library's rule refusing a value
        k8s_rules.gpu_request("gpu:-1")
    assert errors.is_input_error(refused.value)
    with pytest.raises(ValueError) as decoding:
        json.loads("{")
    assert errors.is_input_error(decoding.value)
    # an implicit ValueError inside our own code (unpacking): a bug, not a refusal
    code = compile("def f():\n    a, b = [1, 2, 3]\n", "<kfp_gpu.fake>", "exec").co_consts[0]
    f = types.FunctionType(code, {"__name__": "kfp_gpu.fake"})
    with pytest.raises(ValueError) as implicit:
        f()
    assert not errors.is_input_error(implicit.value)
    assert errors.classify(implicit.value)[0] == 1
    with pytest.raises(ValueError) as third_party:  # raised outside kfp_gpu
        _bug()
    assert errors.classify(third_party.value)[0] == 1


# ---------------------------------------------------------------- input -> 2
def test_an_input_error_in_compile_is_2(tmp_path, monkeypatch):
    from kfp_gpu.compiler import compile as comp

    def refuse(*args, **kwargs):
        raise input_errors.EmptyInput("the test split is empty", input="test.csv")

    monkeypatch.setattr(comp, "compile_all", refuse)
    r = runner.invoke(app, ["compile", "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert _error_lines(r.output) == ["error: the test split is empty"]


def test_the_library_s_own_refusal_stays_2(tmp_path):
    r = runner.invoke(app, ["compile", "--only", "nope", "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert _error_lines(r.output)[0].startswith("error: unknown component or pipeline 'nope'")


# ---------------------------------------------------------------- task records
@pytest.mark.parametrize("exc, code", [
    (input_errors.MissingColumn("no column 'review'", input="x.csv"), 2),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/x.csv"), 2),
    (ValueError("bug"), 1),
    (OSError(errno.ENOSPC, "No space left on device"), 3),  # the environment's
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), 3),
])
def test_the_local_run_task_record_keeps_its_codes(tmp_path, monkeypatch, exc, code):
    """The record a task writes is read back as ``input_error`` / ``environment``; the run
    command exits by :func:`errors.task_status`: 2 for a refused input, 3 for the
    environment's failure, 1 for any other task failure -- what :func:`errors.classify`
    says of the same exception raised in this process."""
    from kfp_gpu.local import run as local_run

    rec = input_errors.record_of(input_errors.record(exc))
    assert errors.task_status(rec["input_error"], rec["environment"]) == code
    try:  # the same exception raised in this process: the same status
        raise exc
    except Exception as raised:  # noqa: BLE001
        in_process = errors.classify(raised)[0]
    assert in_process == code

    def failed(*args, **kwargs):
        raise local_run.TaskFailed("prep-text", rec["message"], rec["input"],
                                   tmp_path / "prep-text.log", rec["input_error"],
                                   rec["environment"])

    monkeypatch.setattr(local_run, "run", failed)
    r = runner.invoke(app, ["run", "imdb-lstm", "--local", "--data-dir", str(tmp_path)])
    assert r.exit_code == code, r.output
    assert _error_lines(r.output) == [f"error: task prep-text failed: {rec['message']}"]


def test_the_readme_table_states_the_rule():
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = text[text.index("### Exit codes"):].split("\n## ")[0]
    row3 = next(ln for ln in table.splitlines() if ln.startswith("| 3 "))
    assert "disk is full" in row3
    row1 = next(ln for ln in table.splitlines() if ln.startswith("| 1 "))
    assert "internal error" in row1
