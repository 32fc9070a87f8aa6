"""Planes a killed session left behind (testcluster/reap.py) and the node's disk check
(testcluster/node_images.py).

Found on the development machine (2026-11-29): a CI run killed at a session's end had
left its plane in /tmp (the real node's containerd with the images imported, 9.4 GB, a
bind mount, netns ``kfpgpu-node0``, 35 cgroups), which nothing removed; under 1 % free the
kubelet's eviction manager would delete the next node's images
(pkg/kubelet/eviction/eviction_manager.go ``reclaimNodeLevelResources``). The stand-ins here are what the plane records: components started through
``<cluster>/bin/<component>`` links with pids in ``<cluster>/pids`` (as kwokctl's binary
runtime does), a node's ``state.json``, real network namespaces where root allows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testcluster import controlplane, node_config, node_images, reap
from tests.support.kwok_stand_ins import no_binaries, start_component
from tests.support.waiting import wait_for

HOUR_AGO = time.time() - 3600


def age(d: Path, when: float = HOUR_AGO) -> None:
    """Make ``d`` look untouched since ``when`` (the folders :func:`reap.newest_change`
    reads)."""
    for p in (d, d / "logs", d / "pids", d / "supervisor.pid"):
        if p.exists():
            os.utime(p, (when, when))


def killed_plane(root: Path, name: str = "kfp-gpu-plane-dead") -> Path:
    """A plane as a killed session leaves it: its kwokctl cluster's component recorded but
    no longer running, its logs, nothing touched for an hour."""
    d = root / name
    home = d / "kwok" / "clusters" / "kfp-gpu-abc123"
    p = start_component(home, "kube-apiserver")
    p.kill()
    p.wait()
    (d / "kubeconfig").write_text("")
    (d / "logs").mkdir()
    age(d)
    return d


@pytest.fixture(autouse=True)
def _no_kwokctl(monkeypatch):
    monkeypatch.setattr(controlplane, "binaries", no_binaries)  # down asks no kwokctl


def test_a_killed_sessions_plane_is_found_and_removed(tmp_path):
    d = killed_plane(tmp_path)
    assert reap.stale_planes(tmp_path) == [d]
    lines: list[str] = []
    assert reap.reap(tmp_path, log=lines.append) == [d]
    assert not d.exists()
    assert len(lines) == 1 and str(d) in lines[0] and "GiB" in lines[0]
    assert reap.stale_planes(tmp_path) == []


def test_a_plane_whose_component_still_runs_is_left(tmp_path):
    d = tmp_path / "kfp-gpu-plane-live"
    p = start_component(d / "kwok" / "clusters" / "kfp-gpu-live", "etcd")
    try:
        (d / "kubeconfig").write_text("")
        age(d)
        assert reap.stale_planes(tmp_path) == []
        assert reap.reap(tmp_path) == [] and d.exists()
        assert p.poll() is None, "reap stopped a running plane's process"
    finally:
        p.kill()
        p.wait()


def test_a_plane_a_process_names_is_left(tmp_path):
    """A plane's daemons carry paths under its folder in their argv (kubeconfig, state):
    such a process alive means somebody runs it, recorded pid or not."""
    d = killed_plane(tmp_path)
    # one process with the path in its argv (``sh -c`` would fork a ``sleep`` that outlives
    # the kill); read until it shows, as CI once read it before it did
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)",
                               str(d / "kubeconfig")])
    try:
        wait_for(lambda: reap.mentioned_by_a_process(d), 10, "the holder's command line")
        assert reap.stale_planes(tmp_path) == []
    finally:
        holder.kill()
        holder.wait()
    assert reap.stale_planes(tmp_path) == [d]


def test_a_plane_being_brought_up_is_left(tmp_path):
    d = killed_plane(tmp_path)
    age(d, time.time() - 60)
    assert reap.stale_planes(tmp_path, min_age_s=600) == []
    assert reap.stale_planes(tmp_path, min_age_s=30) == [d]


def test_only_scratch_planes_are_candidates(tmp_path):
    """Not the scratch prefix (``make cluster-up``'s folder is ~/.cache/kfp-gpu/cluster),
    or not a plane's folder: never touched."""
    other = killed_plane(tmp_path, "my-plane")
    precious = tmp_path / "kfp-gpu-notes"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    age(precious)
    assert reap.stale_planes(tmp_path) == []
    assert reap.reap(tmp_path) == []
    assert other.exists() and (precious / "notes.txt").read_text() == "keep me"


def test_a_dead_plane_whose_node_names_a_live_planes_is_left(tmp_path):
    """The node's network index is the lowest free one: once a dead plane's namespace was
    deleted, a new plane's node takes the same name and cgroup root. Taking the dead one
    down would kill the live node's containers."""
    claims = {"netns": "kfpgpu-node0", "cgroup_root": "/kfp-gpu-node0"}
    dead = killed_plane(tmp_path, "kfp-gpu-plane-dead")
    live = tmp_path / "kfp-gpu-plane-live"
    p = start_component(live / "kwok" / "clusters" / "kfp-gpu-live", "etcd")
    try:
        for d in (dead, live):
            (d / "node").mkdir(exist_ok=True)
            (d / "node" / "state.json").write_text(json.dumps(claims))
        age(dead)
        assert reap.node_claims(dead) == set(claims.values())
        assert reap.stale_planes(tmp_path) == []
        (live / "node" / "state.json").write_text(json.dumps(
            {"netns": "kfpgpu-node1", "cgroup_root": "/kfp-gpu-node1"}))
        assert reap.stale_planes(tmp_path) == [dead]
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                    reason="network namespaces need root and iproute2")
def test_reaping_removes_the_dead_planes_network_namespace(tmp_path):
    from testcluster import netns

    d = killed_plane(tmp_path)
    net = netns.create_for(d)
    try:
        age(d)
        assert reap.reap(tmp_path) == [d]
        assert not Path(f"/run/netns/{net.name}").exists()
        assert not Path(f"/sys/class/net/{net.host_if}").exists()
    finally:
        netns.remove(net.name, net.host_if)


def test_the_cli_lists_then_removes(tmp_path, capsys):
    d = killed_plane(tmp_path)
    root = ["--root", str(tmp_path)]
    assert reap.main([*root, "--dry-run"]) == 0
    assert f"stale: {d}" in capsys.readouterr().out and d.exists()
    assert reap.main(root) == 0
    assert not d.exists()
    assert reap.main(root) == 0
    assert capsys.readouterr().out.strip().endswith("no stale plane")


# ---------------------------------------------------------------- the node's disk

GIB = 2**30


def test_an_image_fits_only_above_the_kubelets_eviction_threshold():
    """2 GiB image = 4 GiB in containerd; 100 GiB disk at 1 % = 1 GiB floor: 5 GiB free is
    exactly enough, a byte less is a byte short."""
    assert node_config.DISK_EVICTION_PERCENT == 1
    assert node_images.disk_shortfall(2 * GIB, 5 * GIB, 100 * GIB) == 0
    assert node_images.disk_shortfall(2 * GIB, 5 * GIB - 1, 100 * GIB) == 1
    assert node_images.disk_shortfall(2 * GIB, 3 * GIB, 100 * GIB) == 2 * GIB
    assert node_images.disk_shortfall(2 * GIB, 5 * GIB, 100 * GIB, percent=5) == 4 * GIB


def test_the_kubelet_evicts_at_the_threshold_the_check_uses(tmp_path):
    paths = node_config.Paths(tmp_path / "node")
    kc = node_config.kubelet_config(paths, node_config.Addresses(0), ca_file=tmp_path / "ca",
                                    cgroup_root="/x", oom_score_adj=0)
    pct = f"{node_config.DISK_EVICTION_PERCENT}%"
    assert kc["evictionHard"]["imagefs.available"] == pct
    assert kc["evictionHard"]["nodefs.available"] == pct
    assert kc["imageGCHighThresholdPercent"] == 100  # no GC above the eviction threshold


def test_image_deletions_are_read_from_the_nodes_logs(tmp_path):
    """Lines as k8s.io/kubernetes v1.36.3 writes them (klog text format; messages from
    eviction_manager.go and image_gc_manager.go) and as containerd v2.4.2's CRI plugin logs
    an image's deletion (internal/cri/server/events.go)."""
    from testcluster.plane import Plane

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "containerd.log").write_text(
        'time="2026-11-29T02:01:02Z" level=info msg="ImageCreate event name:\\"x\\""\n'
        'time="2026-11-29T02:03:04Z" level=info msg="ImageDelete event '
        'name:\\"ghcr.io/kfp-gpu/kfp-gpu-horovod:0.1.0\\""\n')
    (tmp_path / "logs" / "kubelet.log").write_text(
        'I1128 23:10:01.1 1 kubelet_node_status.go:639] "Recording event message for node"'
        ' event="NodeHasNoDiskPressure"\n'
        'I1128 23:41:07.2 1 eviction_manager.go:381] "Eviction manager: attempting to '
        'reclaim" resourceName="ephemeral-storage"\n'
        'I1128 23:41:07.3 1 image_gc_manager.go:529] "Removing image to free bytes" '
        'imageID="sha256:ab12" size=2147483648 runtimeHandler=""\n')
    got = node_images.image_removals(Plane(tmp_path))
    assert len(got) == 3
    assert got[0].startswith("kubelet.log: ") and "attempting to reclaim" in got[0]
    assert "sha256:ab12" in got[1]
    assert got[2].startswith("containerd.log: ") and "kfp-gpu-horovod" in got[2]
    assert node_images.image_removals(Plane(tmp_path / "none")) == []
