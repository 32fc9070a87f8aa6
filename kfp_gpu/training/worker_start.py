"""Entry of a Worker container: check the RDMA memlock limit, hand the device env on, exec sshd.

``python -m kfp_gpu.training.worker_start /usr/sbin/sshd -De -f /home/mpiuser/.sshd_config``
(:data:`kfp_gpu.mpi.spec.ssh.DEFAULT_WORKER_COMMAND`) does, in order:

1. RDMA memlock check, only when the builder asked for RDMA
   (:data:`RDMA_ENV` ``=1``, set by :meth:`kfp_gpu.mpi.spec.network.Network.worker_env`) and an
   RDMA device is mounted (``/dev/infiniband/uverbs*``, what k8s-rdma-shared-dev-plugin
   hands a pod). Registering memory for RDMA verbs (``ibv_reg_mr``) pins it, and the kernel
   refuses pinning beyond ``RLIMIT_MEMLOCK`` unless the process holds ``CAP_IPC_LOCK``
   (torvalds/linux ``drivers/infiniband/core/umem.c`` ``ib_umem_get``). Kubernetes sets no
   ambient capabilities, so ``IPC_LOCK`` in ``securityContext.capabilities.add`` reaches
   only a root process; a non-root rank lives with the limit the container runtime gives
   the pod (Kubernetes has no ulimit field). NCCL's troubleshooting guide ("Runtime and MPI
   issues", Docker: ``--shm-size=1g --ulimit memlock=-1``) asks for an unlimited limit. The
   soft limit is first raised to the hard one (allowed without privilege); a limit still
   below :data:`MIN_MEMLOCK_BYTES` stops the Worker with the fix (:func:`memlock_problem`),
   instead of NCCL failing ``ibv_reg_mr`` later or quietly falling back to TCP.
2. :func:`kfp_gpu.training.worker_env.write_worker_env`: the device plugin's env (HAMi
   limits, ``NVIDIA_VISIBLE_DEVICES``, ...) goes to a file the ranks load (sshd gives them a
   fresh environment; see that module for why ``mpirun -x`` is no fix).
3. :func:`kfp_gpu.training.host_keys.ensure_host_keys`: sshd's host keys, made in this
   container (the image carries none: a host key baked into an image is one every
   container of it shares).
4. ``exec`` the command (sshd), so it stays PID 1 and gets the kubelet's signals.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Mapping
from pathlib import Path

from kfp_gpu.training.host_keys import ensure_host_keys
from kfp_gpu.training.worker_env import default_path, write_worker_env

#: Env var the MPIJob/TrainJob builders set on Workers that request RDMA (value ``1``).
RDMA_ENV = "KFP_GPU_RDMA"
#: Smallest finite ``RLIMIT_MEMLOCK`` accepted with RDMA, bytes (1 GiB). A project choice:
#: NCCL asks for unlimited; the floor refuses the runtimes' defaults that certainly fail
#: (64 KiB before Linux 5.16, 8 MiB since: ``MLOCK_LIMIT`` in torvalds/linux
#: ``include/uapi/linux/resource.h``) without refusing a site's deliberate finite limit.
MIN_MEMLOCK_BYTES = 1 << 30
#: Bit of ``CAP_IPC_LOCK`` in ``CapEff`` (torvalds/linux ``include/uapi/linux/capability.h``).
CAP_IPC_LOCK = 14
#: Where the RDMA device plugin mounts the verbs devices (rdma-core ``/dev/infiniband``).
RDMA_DEVICE_DIR = Path("/dev/infiniband")
#: Kubernetes' default ``terminationMessagePath``: what is written there becomes the
#: container's termination message in the pod status.
TERMINATION_LOG = Path("/dev/termination-log")
PROC_STATUS = Path("/proc/self/status")

_FIX = ("Fix one of: (a) give containers an unlimited memlock limit in the container "
        "runtime: containerd inherits its own limit (systemd drop-in for containerd.service "
        "with LimitMEMLOCK=infinity, then restart containerd), CRI-O: default_ulimits = "
        "[\"memlock=-1:-1\"] under [crio.runtime] in crio.conf, Docker: --ulimit memlock=-1 "
        "(or \"default-ulimits\" in daemon.json); (b) run the Workers as root, where IPC_LOCK "
        "lifts the limit (ssh=kfp_gpu.mpi.spec.ssh.ROOT_SSH with a root image); (c) turn RDMA off "
        "(rdma=False: NCCL uses TCP sockets).")


def _fmt(limit: int) -> str:
    if limit == resource.RLIM_INFINITY:
        return "unlimited"
    return f"{limit // 1024} KiB"


def memlock_problem(soft: int, hard: int, *, cap_ipc_lock: bool,
                    minimum: int = MIN_MEMLOCK_BYTES) -> str | None:
    """Why RDMA cannot work with this ``RLIMIT_MEMLOCK``, or None when it can (pure).

    Args:
        soft / hard: the limits in bytes, ``resource.RLIM_INFINITY`` for unlimited (the
            soft one is enforced; ``ulimit -l`` shows it in KiB).
        cap_ipc_lock: the process holds ``CAP_IPC_LOCK`` in its effective set (then the
            kernel ignores the limit for RDMA registrations).
        minimum: smallest finite limit accepted, bytes.

    Raises:
        ValueError: ``minimum`` is not positive.
    """
    if minimum <= 0:
        raise ValueError(f"minimum must be a positive number of bytes, not {minimum}")
    if cap_ipc_lock or soft == resource.RLIM_INFINITY or soft >= minimum:
        return None
    return (f"RDMA requested, but RLIMIT_MEMLOCK (ulimit -l) of this Worker is {_fmt(soft)} "
            f"(hard {_fmt(hard)}), below {_fmt(minimum)}, and the Worker holds no effective "
            "CAP_IPC_LOCK (IPC_LOCK reaches only root processes): ranks cannot register "
            "memory for RDMA (ibv_reg_mr fails with ENOMEM). NCCL asks for unlimited. " + _FIX)


def has_cap_ipc_lock(proc_status: str) -> bool:
    """Whether ``CapEff`` in the text of ``/proc/self/status`` has ``CAP_IPC_LOCK``
    (False when the line is missing)."""
    for line in proc_status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_IPC_LOCK & 1)
    return False


def rdma_devices(dev_dir: Path = RDMA_DEVICE_DIR) -> list[str]:
    """Names of the verbs devices (``uverbs*``) under ``dev_dir``, sorted ([] if none)."""
    if not dev_dir.is_dir():
        return []
    return sorted(p.name for p in dev_dir.iterdir() if p.name.startswith("uverbs"))


def check_rdma_memlock(environ: Mapping[str, str] = os.environ,
                       dev_dir: Path = RDMA_DEVICE_DIR,
                       proc_status: Path = PROC_STATUS) -> str | None:
    """Raise the soft memlock limit to the hard one and judge it; the problem text or None.

    Nothing is checked without ``RDMA_ENV=1``; without a verbs device under ``dev_dir`` a
    warning goes to stderr (NCCL will use sockets) and None is returned. ``proc_status``:
    where the effective capabilities are read (``CapEff``).
    """
    if environ.get(RDMA_ENV) != "1":
        return None
    if not rdma_devices(dev_dir):
        print(f"kfp-gpu worker: {RDMA_ENV}=1 but no {dev_dir}/uverbs* device is mounted: "
              "NCCL will use TCP sockets (is the RDMA device plugin installed?)",
              file=sys.stderr)
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    caps = has_cap_ipc_lock(proc_status.read_text()) if proc_status.is_file() else False
    return memlock_problem(soft, hard, cap_ipc_lock=caps)


def main(argv: list[str], *, dev_dir: Path = RDMA_DEVICE_DIR,
         proc_status: Path = PROC_STATUS) -> int:
    """``python -m kfp_gpu.training.worker_start CMD...``: check, write the device env,
    make sshd's missing host keys, exec CMD. Returns 1 (after writing the problem to stderr
    and the termination log) when the memlock check fails; does not return when CMD is
    given and the checks pass."""
    problem = check_rdma_memlock(os.environ, dev_dir, proc_status)
    if problem:
        print(f"kfp-gpu worker: {problem}", file=sys.stderr)
        if TERMINATION_LOG.exists():  # the kubelet mounts it; elsewhere write nothing
            try:
                TERMINATION_LOG.write_text(problem)
            except OSError:
                pass
        return 1
    write_worker_env(default_path())
    ensure_host_keys(argv)  # this container's own sshd host key
    if argv:
        os.execvp(argv[0], argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
