"""``kfp-gpu doctor`` as a user runs it against the plane (its admin kubeconfig), for the
cluster tests of doctor (tests/cluster/test_doctor.py, test_dra.py, test_kueue.py)."""

from __future__ import annotations

import subprocess
import sys


def doctor(plane, *args: str) -> subprocess.CompletedProcess:
    """``python -m kfp_gpu.cli doctor --kubeconfig <the plane's> *args``; not checked."""
    return subprocess.run([sys.executable, "-m", "kfp_gpu.cli", "doctor", "--kubeconfig",
                           str(plane.kubeconfig), *args], capture_output=True, text=True,
                          timeout=120, check=False)
