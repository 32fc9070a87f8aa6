"""Stand-ins for a plane's processes as kwokctl's binary runtime records them
(sigs.k8s.io/kwok v0.8.0 pkg/kwokctl/runtime/binary, pkg/kwokctl/runtime/exec.go): each
component started through ``<cluster>/bin/<component>``, a symlink to the real binary,
its pid in ``<cluster>/pids/<component>.pid``. Used by the ``down`` and reap tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testcluster import controlplane

SLEEP = shutil.which("sleep")


def start_component(home: Path, component: str = "etcd") -> subprocess.Popen:
    """A stand-in component as kwokctl starts one: through ``<home>/bin/<component>``, a
    symlink to ``sleep``, its pid recorded in ``<home>/pids``."""
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "pids").mkdir(exist_ok=True)
    link = home / "bin" / component
    link.symlink_to(SLEEP)
    p = subprocess.Popen([str(link), "300"], start_new_session=True)
    (home / "pids" / f"{component}.pid").write_text(str(p.pid))
    return p


def gone(p: subprocess.Popen, timeout: float = 5) -> bool:
    """Whether ``p`` exits within ``timeout`` seconds."""
    try:
        p.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def no_binaries(tools=()):
    """In place of :func:`testcluster.controlplane.binaries`: none built, so ``down`` asks
    no kwokctl and kills what the cluster recorded itself."""
    raise controlplane.Unavailable("not built (test)")
