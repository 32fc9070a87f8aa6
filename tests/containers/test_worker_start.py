"""The RDMA memlock check for real: the Worker command (kfp_gpu.mpi.spec.ssh.DEFAULT_WORKER_COMMAND)
in the horovod image as uid 1000, with KFP_GPU_RDMA=1 and a verbs device node, under the
memlock limits a container runtime hands out (docker ``--ulimit``).

The device is a plain file bind-mounted at /dev/infiniband/uverbs0 (the check only looks
for its presence; no RDMA hardware here). The command after the entry module is a shell
that reports what sshd would inherit: ``ulimit -l`` and the device env file.
"""

from __future__ import annotations

import pytest

from kfp_gpu.mpi.spec import ssh
from kfp_gpu.training import worker_start

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

ENTRY = list(ssh.DEFAULT_WORKER_COMMAND[:3])  # the image's python -m ...worker_start
REPORT = ["sh", "-c", "echo limit=$(ulimit -l); cat $HOME/.kfp_gpu_worker_env"]


def worker(run_in, image, tmp_path, memlock: str, user_id: str = str(ssh.MPI_USER_ID),
           cap_add: list[str] | None = None, **env: str):
    """Run the entry + REPORT as a Worker (uid ``user_id``); ``memlock`` is docker's
    ``soft:hard`` in bytes."""
    import docker

    dev = tmp_path / "uverbs0"
    dev.touch()
    soft, hard = (int(v) for v in memlock.split(":"))
    return run_in(image("horovod"), ENTRY + REPORT, user=user_id, cap_add=cap_add or [],
                  environment={"CUDA_DEVICE_MEMORY_LIMIT_0": "1000m", **env},
                  ulimits=[docker.types.Ulimit(name="memlock", soft=soft, hard=hard)],
                  volumes={str(dev): {"bind": "/dev/infiniband/uverbs0", "mode": "ro"}},
                  timeout_s=120)


def test_rdma_worker_with_a_small_memlock_stops_with_the_fix(run_in, image, tmp_path):
    res = worker(run_in, image, tmp_path, "65536:65536", KFP_GPU_RDMA="1")
    assert res.exit_code == 1, res.output
    assert "RLIMIT_MEMLOCK (ulimit -l) of this Worker is 64 KiB (hard 64 KiB)" in res.output
    for fix in ("LimitMEMLOCK=infinity", "default_ulimits", "--ulimit memlock=-1"):
        assert fix in res.output
    assert "limit=" not in res.output  # sshd (here: the report) never started


def test_the_soft_limit_is_raised_to_the_hard_one_first(run_in, image, tmp_path):
    """64 KiB soft under an 8 MiB hard limit: the entry raises it (the report shows the
    raised value), and 8 MiB (Linux's default since 5.16) is still refused."""
    res = worker(run_in, image, tmp_path, f"65536:{8 << 20}", KFP_GPU_RDMA="1")
    assert res.exit_code == 1, res.output
    assert "is 8192 KiB (hard 8192 KiB), below 1048576 KiB" in res.output


def test_root_worker_with_ipc_lock_starts_whatever_the_limit(run_in, image, tmp_path):
    """The one case IPC_LOCK helps: a root process holds it in its effective set, so the
    kernel ignores the limit for RDMA registrations and the Worker starts (the env file
    lands in root's home). (An unlimited limit for uid 1000 is covered by
    tests/unit/test_worker_start.py: this engine cannot grant more than its own 8 MiB.)"""
    res = worker(run_in, image, tmp_path, "65536:65536", KFP_GPU_RDMA="1", user_id="0",
                 cap_add=["IPC_LOCK"])
    assert res.exit_code == 0, res.output
    assert "limit=64" in res.output and "CUDA_DEVICE_MEMORY_LIMIT_0=1000m" in res.output


def test_without_rdma_the_limit_is_not_judged(run_in, image, tmp_path):
    res = worker(run_in, image, tmp_path, "65536:65536")
    assert res.exit_code == 0, res.output
    assert "limit=64" in res.output and worker_start.RDMA_ENV not in res.output
