"""Issue 11 item 15: the Worker's device-plugin env reaches ranks that sshd starts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from kfp_gpu.training import worker_env


def test_writer_keeps_device_names_only_and_is_private(tmp_path):
    path = tmp_path / worker_env.WORKER_ENV_FILE
    env = {"CUDA_DEVICE_MEMORY_LIMIT_0": "123m", "CUDA_DEVICE_SM_LIMIT": "50",
           "GPU_PORTION": "0.5", "METAGPU_MAX_MEM": "4000", "NVIDIA_VISIBLE_DEVICES": "GPU-1",
           "CUDA_VISIBLE_DEVICES": "0", "PATH": "/bin", "SECRET_TOKEN": "x"}
    written = worker_env.write_worker_env(path, env)
    assert set(written) == set(env) - {"PATH", "SECRET_TOKEN"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "SECRET_TOKEN" not in path.read_text()
    with pytest.raises(ValueError, match="one line"):
        worker_env.write_worker_env(path, {"GPU_PORTION": "0.5\nPATH=/evil"})


def test_loader_sets_missing_names_only(tmp_path):
    path = tmp_path / "f"
    path.write_text("CUDA_DEVICE_MEMORY_LIMIT_0=123m\nGPU_PORTION=0.5\nPATH=/evil\n")
    environ = {"GPU_PORTION": "0.25"}
    assert worker_env.load_worker_env(path, environ) == {"CUDA_DEVICE_MEMORY_LIMIT_0": "123m"}
    assert environ == {"GPU_PORTION": "0.25", "CUDA_DEVICE_MEMORY_LIMIT_0": "123m"}
    assert worker_env.load_worker_env(tmp_path / "missing", environ) == {}


def test_a_rank_with_a_clean_env_sees_the_worker_env(tmp_path):
    """The Worker entry writes the file then execs its command; a process started with a
    fresh environment (as sshd starts a rank: only HOME, PATH) loads it."""
    home = tmp_path / "home"
    home.mkdir()
    entry_env = {**os.environ, "HOME": str(home), "CUDA_DEVICE_MEMORY_LIMIT_0": "123m"}
    subprocess.run([sys.executable, "-m", "kfp_gpu.training.worker_env", "true"],
                   env=entry_env, check=True, timeout=60)
    rank = ("import os; from kfp_gpu.training.worker_env import load_worker_env; "
            "load_worker_env(); print(os.environ.get('CUDA_DEVICE_MEMORY_LIMIT_0'))")
    out = subprocess.run([sys.executable, "-c", rank], capture_output=True, text=True,
                         env={"HOME": str(home), "PATH": os.environ["PATH"]}, check=True,
                         timeout=60)
    assert out.stdout.strip() == "123m"
