"""sshd host keys made when a Worker container starts, not when its image is built.

Debian's and Ubuntu's ``openssh-server`` package generates ``/etc/ssh/ssh_host_*_key`` in
its postinst, so an image that installs it carries those private keys, and every
container of every user of a published image would share them. The horovod image deletes
them at build time (images/horovod/Dockerfile); :func:`ensure_host_keys` makes the keys
the Worker's sshd will read, in the container, just before
:mod:`kfp_gpu.training.worker_start` execs sshd:

- sshd with a config naming ``HostKey`` files (the image's non-root
  ``/home/mpiuser/.sshd_config``): each missing one is generated with ``ssh-keygen`` (its
  type taken from the file name: ``ed25519``, ``ecdsa`` or ``rsa``); a file that exists
  (the operator's ``~/.ssh/id_rsa`` from the ssh Secret) is left alone;
- sshd with a config naming none (the system config, root Workers: ``ROOT_SSH``):
  ``ssh-keygen -A`` writes the default ``/etc/ssh`` keys, as root.

Clients do not pin these keys: the Launcher's ssh ignores host keys as mpi-operator's base
image configures it (kubeflow/mpi-operator v0.8.2 ``build/base/Dockerfile``:
``StrictHostKeyChecking no`` and ``UserKnownHostsFile /dev/null`` in
``/etc/ssh/ssh_config``), which the horovod image repeats.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SYSTEM_CONFIG = Path("/etc/ssh/sshd_config")
KEY_TYPES = ("ed25519", "ecdsa", "rsa")


def sshd_config(argv: Sequence[str]) -> Path | None:
    """The config file ``argv`` starts sshd with (``-f FILE``, else the system one), or
    None when ``argv`` does not run sshd."""
    if not argv or Path(argv[0]).name != "sshd":
        return None
    for i, arg in enumerate(argv[:-1]):
        if arg == "-f":
            return Path(argv[i + 1])
    return SYSTEM_CONFIG


def host_key_files(config_text: str) -> list[Path]:
    """The ``HostKey`` files a sshd config names, in order (keyword case-insensitive, as
    sshd_config(5) reads keywords)."""
    out = []
    for line in config_text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].lower() == "hostkey":
            out.append(Path(parts[1].strip().strip('"')))
    return out


def _key_type(path: Path) -> str | None:
    return next((t for t in KEY_TYPES if t in path.name), None)


def ensure_host_keys(argv: Sequence[str], keygen: str = "ssh-keygen") -> list[Path]:
    """Generate the host keys the sshd of ``argv`` reads and that do not exist yet; the
    files made (``[]`` for ``ssh-keygen -A`` and when ``argv`` is not sshd).

    A key that cannot be made (a read-only home) is reported on stderr and skipped: sshd
    then starts with the keys it has, or says it has none.

    Raises:
        subprocess.CalledProcessError: ``ssh-keygen -A`` failed as root.
    """
    config = sshd_config(argv)
    if config is None:
        return []
    keys = host_key_files(config.read_text(encoding="utf-8")) if config.is_file() else []
    if not keys:
        if os.geteuid() == 0:
            subprocess.run([keygen, "-A"], check=True, stdout=subprocess.DEVNULL)
        return []
    made = []
    for key in keys:
        kind = _key_type(key)
        if key.exists() or kind is None:
            continue
        try:
            key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            subprocess.run([keygen, "-q", "-t", kind, "-N", "", "-C", "", "-f", str(key)],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"kfp-gpu worker: cannot make sshd host key {key}: {e}", file=sys.stderr)
            continue
        made.append(key)
    return made
