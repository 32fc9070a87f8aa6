"""SIGINT/SIGTERM stop a local run's whole process tree.

The unit tests run :func:`kfp_gpu.local.interrupt.guard` in a child Python (signals and
the child-subreaper flag stay out of pytest's process). The ``slow`` tests start the real
console script ``kfp-gpu run imdb-lstm --local`` on 1,000 reviews per split, wait for a
task-start line, send the signal to the CLI's pid only (as a CI runner does) and check
the exit status, the one ``interrupted`` line, that no process of the run is left, and
that the run left nothing in ``$TMPDIR`` (kfp.local's ``ephemeral_component.py`` folders
and ``kfp-workspace-*``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.support.waiting import wait_for_line

ROOT = Path(__file__).resolve().parents[2]
KFP_GPU = Path(sys.executable).with_name("kfp-gpu")

GUARD_SCRIPT = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from kfp_gpu.local import interrupt

    with interrupt.guard(grace_s=2):
        try:
            # a shell ignoring SIGTERM (its sleeps inherit that: SIGKILL needed) and an
            # orphan whose parent exits at once (found only as the subreaper's child)
            subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300 & sleep 301 & wait"])
            subprocess.Popen(["sh", "-c", "(sleep 302 &); exec sleep 303"])
            time.sleep(1.0)
            print("TREE", *interrupt.descendants(), flush=True)
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            time.sleep(60)
            print("NOT INTERRUPTED", flush=True)
        except interrupt.Interrupted as e:
            print("EXIT", e.exit_code, "LEFT", *interrupt.descendants(), flush=True)
""")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_guard_stops_every_descendant_then_raises(sig, code):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", GUARD_SCRIPT, sig], capture_output=True,
                          text=True, timeout=60, check=False, cwd=ROOT)
    lines = proc.stdout.splitlines()
    tree = [int(p) for p in next(x for x in lines if x.startswith("TREE")).split()[1:]]
    assert len(tree) == 5, lines  # a shell and 4 sleeps (the orphan included)
    assert f"EXIT {code} LEFT" in lines, proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 30  # 2 s grace, then SIGKILL: not the sleeps' 300 s
    assert not [p for p in tree if _alive(p)]


def test_descendants_excludes_unrelated_processes():
    from kfp_gpu.local import interrupt

    with subprocess.Popen(["sleep", "30"]) as child:
        try:
            assert child.pid in interrupt.descendants()
            assert os.getppid() not in interrupt.descendants()
        finally:
            child.kill()


# ------------------------------------------------------------------ the real CLI


def _start_cli(tmp_path: Path, shared_data: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "KFP_GPU_DATA_DIR": str(shared_data), "TMPDIR": str(tmpdir),
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [str(KFP_GPU), "run", "imdb-lstm", "--local", "--pipeline-root", "root",
         "-p", "epochs=1", "-p", "max_rows_per_split=1000", *extra],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, tmpdir


def _processes_naming(text: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and text in " ".join(
                    p.info["cmdline"] or []):
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_the_cli_stops_the_run(tmp_path, shared_data, sig, code):
    proc, tmpdir = _start_cli(tmp_path, shared_data)
    try:
        seen = wait_for_line(proc, "[train-text-classifier] started")
        time.sleep(3)  # inside the task: its Python is importing TensorFlow / training
        tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert tree, "no task process under the CLI"
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "\n".join(seen) + "\n" + rest
    assert proc.returncode == code, out
    lines = [x for x in rest.splitlines() if x.strip()]
    interrupted = [x for x in lines if x.startswith("interrupted")]
    assert len(interrupted) == 1, out
    assert "Traceback" not in rest, out
    root = tmp_path / "root"
    # the finished task is kept, the interrupted one's outputs are gone
    assert "prep-text" in interrupted[0] and "train-text-classifier (" not in interrupted[0]
    run_dirs = [d for d in root.iterdir() if d.name != "logs"]
    assert [t.name for d in run_dirs for t in d.iterdir()] == ["prep-text"], out
    # nothing of the run is left running, nothing in $TMPDIR
    time.sleep(0.5)
    assert not [p for p in tree if _alive(p)]
    assert not _processes_naming(str(root))
    assert sorted(os.listdir(tmpdir)) == [], out


@pytest.mark.slow
def test_a_finished_run_leaves_no_temp_folders(tmp_path, shared_data):
    """kfp.local's per-task ``mktemp -d`` folders and its ``kfp-workspace-*`` folder are
    the run's own temp folder, removed at the end; the summary JSON is
    written and names only paths that exist."""
    import json

    proc, tmpdir = _start_cli(tmp_path, shared_data, "--summary-json", "summary.json")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    assert sorted(os.listdir(tmpdir)) == [], out[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["pipeline"] == "imdb-lstm"
    for line in out.splitlines():
        if line.startswith("  ") and ": /" in line:
            assert Path(line.split(": ", 1)[1]).exists(), line
    assert " 0.0 " not in out
