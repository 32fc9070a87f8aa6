"""``down`` removes everything the node tier made: a plane of its own (tier 1 without
mpi-operator, whose fixed health port belongs to the session's plane) gets a real node and
a running pod, then :func:`testcluster.controlplane.down` must leave no process, mount,
network namespace, veth, cgroup, libcni cache file or changed sysctl behind -- read from
/proc, ``ip`` and /sys, not from the tier's own state file.

It also shows two planes on one machine: this one's real node, JobSet and Trainer (on
free ports of their own) beside the session plane's, which keeps its namespace, addresses
and managers while this one comes and goes.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from testcluster import controlplane, node, node_config, node_images, operators

pytestmark = [pytest.mark.node, pytest.mark.timeout(600)]


def processes_mentioning(text: str) -> list[str]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                out.append(f"{p.name}: {cmd[:120]}")
    return out


def test_down_leaves_nothing_of_the_node(real_node, tier2):
    where = controlplane.scratch_dir("kfp-gpu-node-down-")
    plane = controlplane.up(where, name=f"kfp-gpu-{uuid.uuid4().hex[:6]}", node=True,
                            mpi_operator=False)
    state = json.loads(node.state_file(where).read_text())
    try:
        assert state["netns"] != json.loads(node.state_file(real_node.dir).read_text())[
            "netns"], "two planes' nodes share a network namespace"
        plane.kubectl("run", "sleeper", "--image", node_config.PAUSE_IMAGE,
                      "--image-pull-policy=Never", "--overrides", json.dumps({"spec": {
                          "tolerations": [{"key": node_config.REAL_NODE_TAINT["key"],
                                           "operator": "Exists"}],
                          "nodeSelector": {node_config.REAL_NODE_LABEL: "true"}}}))
        plane.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s")
        # JobSet and Trainer of this plane beside the session plane's (free ports each)
        plane.bins.update({t: tier2.bins[t] for t in controlplane.TIER2})
        operators.start_tier2(plane)
        assert plane.running("jobset") and plane.running("trainer")
        assert tier2.running("jobset") and tier2.running("trainer")
        assert set(operators.ports(plane).values()).isdisjoint(
            operators.ports(tier2).values())
        # what is there before down, seen from the machine
        assert processes_mentioning(str(where)), "no process of the plane runs"
        assert node.mounts_under(where), "the running pod made no mount under the plane"
        assert node.cgroups_under(state["cgroup_root"]), "no pod cgroup"
        sysctls = {k: Path(f"/proc/sys/{k}").read_text().strip()
                   for k in node_config.KUBELET_SYSCTLS}
    finally:
        controlplane.down(where, plane.name)
    assert processes_mentioning(str(where)) == []
    assert node.mounts_under(where) == []
    assert state["netns"] not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                text=True, check=True).stdout.split()
    assert not Path(f"/sys/class/net/{state['host_if']}").exists()
    assert node.cgroups_under(state["cgroup_root"]) == []
    # the host's sysctls stay as the session node's kubelet set them (it still runs) and
    # their record stays for the machine's last node to restore
    assert {k: Path(f"/proc/sys/{k}").read_text().strip() for k in sysctls} == sysctls
    assert node.SYSCTL_FILE.exists()
    assert node.cni_cache_files(Path(state["root"])) == []
    assert not where.exists()
    # the session's node is untouched
    assert node_images.node_images(real_node)
