"""The plane's ``down`` without a plane: what it kills and what it refuses to remove
(testcluster/controlplane.py). kwokctl's binary runtime starts each component through a
symlink ``<cluster>/bin/<component>`` into the binary cache and records its pid in
``<cluster>/pids/<component>.pid`` (sigs.k8s.io/kwok v0.8.0 pkg/kwokctl/runtime/binary,
pkg/kwokctl/runtime/exec.go); a process a killed kwokctl left behind is found that way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from testcluster import controlplane
from tests.support.kwok_stand_ins import SLEEP, gone, no_binaries, start_component


def test_a_component_started_through_the_link_is_killed(tmp_path):
    home = tmp_path / "clusters" / "c1"
    p = start_component(home)
    try:
        # /proc/PID/exe resolves into the binary, outside home: the old check missed it
        assert not Path(os.readlink(f"/proc/{p.pid}/exe")).is_relative_to(home)
        assert controlplane.recorded_pids(home) == [p.pid]
        assert controlplane.kill_if_under(p.pid, home) is True
        assert gone(p)
    finally:
        p.kill()


def test_a_pid_reused_by_another_program_is_left_alone(tmp_path):
    home = tmp_path / "clusters" / "c1"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "etcd").symlink_to(shutil.which("true"))  # not sleep's binary
    other = subprocess.Popen([SLEEP, "300"], start_new_session=True)
    try:
        assert controlplane.kill_if_under(other.pid, home) is False
        assert not gone(other, timeout=0.5)
    finally:
        other.kill()
        other.wait()


def test_down_stops_what_a_killed_kwokctl_left(tmp_path, monkeypatch):
    plane = tmp_path / "plane"
    home = plane / "kwok" / "clusters" / "kfp-gpu-abc123"
    p = start_component(home, "kube-apiserver")
    monkeypatch.setattr(controlplane, "binaries", no_binaries)  # no kwokctl to ask
    try:
        t0 = time.monotonic()
        controlplane.down(plane)
        assert gone(p), "the recorded component still runs after down"
        assert time.monotonic() - t0 < 30
    finally:
        p.kill()
    assert not plane.exists()


def test_down_refuses_a_folder_that_is_not_a_planes(tmp_path, capsys):
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep me")
    with pytest.raises(RuntimeError, match="is not a control plane's folder"):
        controlplane.down(precious)
    assert (precious / "thesis.tex").read_text() == "keep me"
    assert controlplane.main(["down", "--dir", str(precious)]) == 1
    assert "refusing to remove it" in capsys.readouterr().err
    assert (precious / "thesis.tex").exists()


def test_down_of_a_missing_folder_is_a_no_op(tmp_path):
    controlplane.down(tmp_path / "never-made")
    assert not (tmp_path / "never-made").exists()


def test_every_mark_makes_a_plane_folder(tmp_path):
    for mark in controlplane.PLANE_MARKS:
        d = tmp_path / mark.replace("/", "_")
        (d / mark).parent.mkdir(parents=True, exist_ok=True)
        (d / mark).write_text("")
        assert controlplane.is_plane_dir(d), mark
    assert not controlplane.is_plane_dir(tmp_path / "empty")


def test_a_plane_folder_too_long_for_the_nodes_sockets_is_refused_before_anything():
    """CI found it (2026-11-28): under pytest-xdist the plane's folder lay one level deeper
    and dra-example-driver's registrar socket came to 110 bytes, past sockaddr_un's 107, so
    the plugin exited and every real-pod test erred. The node now refuses such a folder
    first, naming the socket; :func:`controlplane.scratch_dir` gives a short one."""
    from testcluster import controlplane, node_config

    deep = Path("/tmp/pytest-of-root/pytest-212/popen-gw0/control-plane0")
    long = node_config.too_long_sockets(node_config.Paths(deep / "node"))
    registrar = f"{deep}/node/kubelet/plugins_registry/gpu.example.com-reg.sock"
    assert long == [f"{registrar} (110 bytes)"]
    short = controlplane.scratch_dir()
    try:
        assert node_config.too_long_sockets(node_config.Paths(short / "node")) == []
        assert short.is_dir() and not any(short.iterdir())
    finally:
        short.rmdir()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                    reason="network namespaces need root and iproute2")
def test_down_removes_the_operators_network_namespaces(tmp_path):
    """An operator started with ``own_network`` (the gang test's mpi-operator) lives in a
    namespace recorded in the plane's folder; ``down`` deletes it and its veth, read back
    from /run/netns and /sys/class/net."""
    from testcluster import netns

    plane = tmp_path / "plane"
    (plane / "pids").mkdir(parents=True)
    a = netns.create_for(plane)
    b = netns.create_for(plane)
    try:
        assert a.index != b.index and a.name != b.name
        for net in (a, b):
            assert Path(f"/run/netns/{net.name}").exists()
            assert Path(f"/sys/class/net/{net.host_if}").exists()
        inside = subprocess.run([*a.enter(), "ip", "-4", "-o", "addr", "show", "eth0"],
                                capture_output=True, text=True, check=True).stdout
        assert f"{a.inner_ip}/30" in inside
        controlplane.down(plane)
        for net in (a, b):
            assert not Path(f"/run/netns/{net.name}").exists(), net.name
            assert not Path(f"/sys/class/net/{net.host_if}").exists(), net.host_if
        assert not plane.exists()
    finally:
        for net in (a, b):
            netns.remove(net.name, net.host_if)


def test_operator_network_names_fit_the_kernels_limits():
    from testcluster import netns

    for i in (0, 63):
        net = netns.OperatorNetwork(i)
        assert len(net.host_if) <= 15  # IFNAMSIZ - 1
        assert net.host_ip.rsplit(".", 1)[0] == net.inner_ip.rsplit(".", 1)[0]
    with pytest.raises(ValueError, match="0-63"):
        netns.OperatorNetwork(64)
