"""Device-plugin environment of a Worker container, handed to the ranks sshd starts.

sshd starts each session with a fresh environment (USER, HOME, PATH, SHELL, SSH_*), not the
environment of the container's PID 1, so what a device plugin's Allocate put into the Worker
container (HAMi ``CUDA_DEVICE_MEMORY_LIMIT_<i>``/``CUDA_DEVICE_SM_LIMIT``, KAI
``GPU_PORTION``, MetaGPU ``METAGPU_*``, ``NVIDIA_VISIBLE_DEVICES``) never reaches a rank
mpirun started over ssh. ``mpirun -x NAME`` is no fix: it forwards the *Launcher's* value,
the same one to every rank, while the values are per Worker (each device plugin Allocate
answers for the GPUs of that pod: ``NVIDIA_VISIBLE_DEVICES`` names that node's GPU UUIDs)
and the Launcher requests no GPU, so it has none of them (HAMi-core reads
the limit from the rank process env in ``do_init_device_memory_limits``,
Project-HAMi/HAMi-core src/multiprocess/multiprocess_memory_limit.c, so a rank without it is
unlimited).

So the Worker writes these names to :data:`WORKER_ENV_FILE` in its home before it starts
sshd (:func:`write_worker_env`, called by the Worker command ``python -m
kfp_gpu.training.worker_start /usr/sbin/sshd ...``), and the rank program loads the file
before it imports TensorFlow (:func:`load_worker_env`), without overriding names already
set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

#: File (in the Worker user's home) holding ``NAME=value`` lines, mode 0600.
WORKER_ENV_FILE = ".kfp_gpu_worker_env"
#: Names a device plugin or this project sets on a Worker container: HAMi
#: (``CUDA_DEVICE_MEMORY_LIMIT*``, ``CUDA_DEVICE_SM_LIMIT``, ``CUDA_OVERSUBSCRIBE``), KAI
#: (``GPU_PORTION``, ``RUNAI_NUM_OF_GPUS``), MetaGPU (``METAGPU_*``,
#: ``CNVRG_META_GPU_DEVICES``), NVIDIA (``NVIDIA_VISIBLE_DEVICES``, ``CUDA_VISIBLE_DEVICES``;
#: NVIDIA's DRA driver puts ``CUDA_MPS_PIPE_DIRECTORY`` into a container whose claim shares
#: its GPU through MPS: kubernetes-sigs/dra-driver-nvidia-gpu @v0.4.1
#: cmd/gpu-kubelet-plugin/sharing.go ``GetCDIContainerEdits``; without it a rank started by
#: sshd would not find the MPS daemon).
DEVICE_ENV = re.compile(r"^(CUDA_DEVICE_\w*|CUDA_OVERSUBSCRIBE|CUDA_VISIBLE_DEVICES|GPU_PORTION"
                        r"|RUNAI_NUM_OF_GPUS|METAGPU_\w*|CNVRG_META_GPU_DEVICES"
                        r"|NVIDIA_VISIBLE_DEVICES|CUDA_MPS_PIPE_DIRECTORY)$")


def default_path(environ: Mapping[str, str] = os.environ) -> Path:
    """``$HOME/.kfp_gpu_worker_env`` (``/`` when HOME is unset)."""
    return Path(environ.get("HOME", "/")) / WORKER_ENV_FILE


def device_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The entries of ``environ`` whose names match :data:`DEVICE_ENV`, sorted by name."""
    return {k: environ[k] for k in sorted(environ) if DEVICE_ENV.match(k)}


def write_worker_env(path: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Write :func:`device_env` of ``environ`` to ``path`` atomically, mode 0600; returns it.

    Raises:
        ValueError: a value holds a newline (the file is one ``NAME=value`` per line).
    """
    env = device_env(environ)
    bad = [k for k, v in env.items() if "\n" in v]
    if bad:
        raise ValueError(f"device env values must be one line: {bad}")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("".join(f"{k}={v}\n" for k, v in env.items()))
    os.replace(tmp, path)
    return env


def load_worker_env(path: Path | None = None,
                    environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set each ``NAME=value`` of ``path`` (default :func:`default_path`) that matches
    :data:`DEVICE_ENV` and is not already in ``environ``; returns what was set. A missing
    file (not on a Worker, e.g. a local run) sets nothing."""
    path = default_path(environ) if path is None else path
    if not path.is_file():
        return {}
    added: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and DEVICE_ENV.match(name) and name not in environ:
            environ[name] = added[name] = value
    return added

