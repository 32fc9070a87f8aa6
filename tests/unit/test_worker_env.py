"""The Worker's device-plugin env reaches ranks that sshd starts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from kfp_gpu.mpi.spec import ssh
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
    """The Worker entry (kfp_gpu.training.worker_start, the start of
    ssh.DEFAULT_WORKER_COMMAND) writes the file then execs its command; a process started
    with a fresh environment (as sshd starts a rank: only HOME, PATH) loads it."""
    home = tmp_path / "home"
    home.mkdir()
    entry_env = {**os.environ, "HOME": str(home), "CUDA_DEVICE_MEMORY_LIMIT_0": "123m"}
    done = subprocess.run([sys.executable, "-m", "kfp_gpu.training.worker_start", "sh", "-c",
                           "echo exec $CUDA_DEVICE_MEMORY_LIMIT_0"], env=entry_env,
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "exec 123m"  # the command ran, with the Worker's env
    rank = ("import os; from kfp_gpu.training.worker_env import load_worker_env; "
            "load_worker_env(); print(os.environ.get('CUDA_DEVICE_MEMORY_LIMIT_0'))")
    out = subprocess.run([sys.executable, "-c", rank], capture_output=True, text=True,
                         env={"HOME": str(home), "PATH": os.environ["PATH"]}, check=True,
                         timeout=60)
    assert out.stdout.strip() == "123m"


def test_worker_command_starts_sshd_through_the_entry():
    """Both Worker commands (non-root image, root image) run the entry module with the
    sshd command as its arguments, so the file is written before any rank can start."""
    for cmd in (ssh.DEFAULT_WORKER_COMMAND, ssh.ROOT_SSH.worker_command):
        assert cmd[1:3] == ("-m", "kfp_gpu.training.worker_start")
        assert cmd[3] == "/usr/sbin/sshd" and "-De" in cmd
