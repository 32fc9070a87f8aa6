"""Planes left behind: a test session killed before its teardown (a CI job cut at its time
limit, a ``kill -9`` of pytest) leaves its scratch plane in /tmp -- the real node's
containerd with the three images imported twice over (content and unpacked snapshots,
about 9 GB), a bind mount, a network namespace (holding a node index), cgroups. One such
plane was found on the development machine after a killed CI run (9.4 GB). Each costs the
next session's node that much disk, and a node short of disk would lose its images: the
kubelet's eviction manager reclaims node-level resources before evicting pods, and for
``imagefs.available`` that is deleting every image no running container uses
(k8s.io/kubernetes v1.36.3 pkg/kubelet/eviction/eviction_manager.go
``reclaimNodeLevelResources``; pkg/kubelet/images/image_gc_manager.go "Removing image to
free bytes"); the next pod of a project image would then try to pull it from ghcr.io.

:func:`stale_planes` finds such folders (:func:`scratch_dir`'s ``kfp-gpu-`` prefix, a
plane's marks, no process of theirs alive, untouched for ``min_age_s``); :func:`reap`
takes each down with :func:`testcluster.controlplane.down`, which removes exactly what
the plane recorded. A plane whose processes still run -- another session's -- is never
touched, nor ``make cluster-up``'s plane (not under the scratch prefix).

``python -m testcluster.reap`` lists and removes them; the session's ``plane`` fixture
calls :func:`reap` before bringing up its own.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from testcluster import controlplane, node, supervise

#: Where :func:`testcluster.controlplane.scratch_dir` makes planes, and the prefix every
#: caller's folder name starts with (kfp-gpu-plane-, kfp-gpu-node-down-, kfp-gpu-gang-).
SCRATCH_ROOT = Path("/tmp")
SCRATCH_PREFIX = "kfp-gpu-"


def recorded_pids(dir: Path) -> list[int]:
    """Every pid a plane in ``dir`` recorded: its supervisor, the processes it started
    (``pids/``: operators, the real node's daemons) and each kwokctl cluster's components
    (``kwok/clusters/<name>/pids/``)."""
    homes = [dir, *sorted((dir / "kwok" / "clusters").glob("*"))]
    supervisor = supervise._read_pid(supervise.pid_file(dir))
    return [*([supervisor] if supervisor else []),
            *(pid for home in homes for pid in controlplane.recorded_pids(home))]


def mentioned_by_a_process(dir: Path) -> bool:
    """Whether a running process has ``dir`` in its command line (each daemon of a plane
    is started with paths under its folder: kubeconfig, state, sockets)."""
    needle = str(dir).encode()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if needle in (p / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def newest_change(dir: Path) -> float:
    """The latest mtime of ``dir``, its log folder and its pid files (seconds since the
    epoch): a plane being brought up touches them."""
    paths = [dir, dir / "logs", dir / "pids", dir / "supervisor.pid"]
    times = []
    for p in paths:
        try:
            times.append(p.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def node_claims(dir: Path) -> set[str]:
    """The machine-wide names the real node of the plane in ``dir`` recorded (its network
    namespace, its cgroup root): :func:`testcluster.node.down` removes what runs there."""
    try:
        s = node._load(dir)
    except (OSError, ValueError):
        return set()
    return {str(s[k]) for k in ("netns", "cgroup_root") if s.get(k)}


def stale_planes(root: Path = SCRATCH_ROOT, min_age_s: float = 600.0) -> list[Path]:
    """Scratch planes under ``root`` that nobody runs: the folder's name starts with
    :data:`SCRATCH_PREFIX`, it holds a plane's marks
    (:func:`testcluster.controlplane.is_plane_dir`), none of its recorded pids is alive, no
    process names it, and it has not changed for ``min_age_s`` seconds (one being brought
    up right now is left alone). A stale plane whose node's namespace or cgroup root a
    live plane now uses (the same node index, taken after the old namespace went) is left
    too: taking it down would remove the live node's."""
    now = time.time()
    stale, live = [], []
    for d in sorted(Path(root).glob(f"{SCRATCH_PREFIX}*")):
        if not d.is_dir() or d.is_symlink() or not controlplane.is_plane_dir(d):
            continue
        if (now - newest_change(d) < min_age_s
                or any(supervise.alive(pid) for pid in recorded_pids(d))
                or mentioned_by_a_process(d)):
            live.append(d)
        else:
            stale.append(d)
    if controlplane.DEFAULT_DIR.is_dir():
        live.append(controlplane.DEFAULT_DIR)
    taken = set().union(*(node_claims(d) for d in live))
    return [d for d in stale if not node_claims(d) & taken]


def reap(root: Path = SCRATCH_ROOT, min_age_s: float = 600.0, log=print) -> list[Path]:
    """Take down every plane :func:`stale_planes` finds (``controlplane.down``: mounts,
    network namespace, veth, cgroups, sysctls, then the folder); ``log`` gets one line per
    plane with the disk space its removal freed. Returns the folders removed."""
    removed = []
    for d in stale_planes(root, min_age_s):
        before = shutil.disk_usage(d).free
        controlplane.down(d)
        removed.append(d)
        freed = shutil.disk_usage(root).free - before
        log(f"removed a stale plane left by an earlier session: {d} "
            f"({max(freed, 0) / 2**30:.1f} GiB freed)")
    return removed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m testcluster.reap",
        description="Take down the scratch planes a killed test session left in /tmp "
                    "(no process of theirs alive). make cluster-up's plane is not touched.")
    p.add_argument("--min-age", type=float, default=600.0,
                   help="seconds a plane's folder must have been left untouched (default 600)")
    p.add_argument("--root", type=Path, default=SCRATCH_ROOT,
                   help=f"where scratch planes lie (default {SCRATCH_ROOT})")
    p.add_argument("--dry-run", action="store_true", help="list them, remove nothing")
    a = p.parse_args(argv)
    if a.dry_run:
        found = stale_planes(a.root, a.min_age)
        for d in found:
            print(f"stale: {d}")
    else:
        found = reap(a.root, a.min_age)
    if not found:
        print("no stale plane")
    return 0


if __name__ == "__main__":
    sys.exit(main())
