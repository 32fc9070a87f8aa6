"""Running the MPIJob/TrainJob launcher against the Kubernetes API double
(tests/doubles/k8s_api.py), in the test's process (:func:`run`) or as the component's pod
runs it (:func:`launcher_process`, :func:`cancel_while_running`), with the fast
:data:`FAST` backoff."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from kfp_gpu.mpi.launch import launcher
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
#: Retries in milliseconds, so a test of a transient error does not wait seconds.
FAST = launcher.Backoff(initial_s=0.01, factor=2.0, maximum_s=0.05, attempts=5)


def run(kube, job, record, **kw):
    """``launcher.launch(job)`` against the double ``kube``; returns ``(result, lines)``,
    the log lines it streamed."""
    lines: list[str] = []
    kw.setdefault("backoff", FAST)
    kw.setdefault("watch_timeout_s", 5)
    kw.setdefault("log_poll_s", 0.05)
    kw.setdefault("handle_sigterm", False)
    result = launcher.launch(job, record, kube.api_client(), log_sink=lines.append, **kw)
    return result, lines


def launcher_process(kube, job_yaml: str, tmp_path) -> tuple[subprocess.Popen, Path, list]:
    """``python -m kfp_gpu.mpi.launch.launcher`` on ``job_yaml`` against the double, as the
    component's pod runs it; returns the process, its record path and the stdout lines
    read so far (a reader thread keeps appending)."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(job_yaml)
    record = tmp_path / "rec.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kfp_gpu.mpi.launch.launcher", "--job", str(job_file), "--record",
         str(record), "--host", kube.host, "--backoff-initial", "0.01"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    threading.Thread(target=lambda: seen.extend(iter(proc.stdout.readline, "")),
                     daemon=True).start()
    return proc, record, seen


def cancel_while_running(kube, job_yaml: str, tmp_path) -> tuple[int, str]:
    """Start the launcher, wait until it runs (record written, watching, the first log
    line streamed), send SIGTERM as KFP's cancel does (it deletes the pod), and return
    ``(exit status, stderr)``."""
    proc, record, seen = launcher_process(kube, job_yaml, tmp_path)
    try:
        wait_for(lambda: record.exists() and kube.active_watches >= 1
                 and "training step 1\n" in seen, timeout=60, what="launcher watching")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        return proc.returncode, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
