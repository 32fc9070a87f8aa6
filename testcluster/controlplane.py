"""The test control plane: the real kube-apiserver, kube-controller-manager, kube-scheduler
and etcd (Kubernetes v1.36.3) with kwok nodes, and the real mpi-operator (v0.8.2), all built
from their pinned Go modules by testcluster/build.sh and run on loopback.

    python -m testcluster.controlplane up [--dir D]    # prints the kubeconfig path
    python -m testcluster.controlplane down [--dir D]  # stops what up started, by pid
    (make cluster-up / make cluster-down)

How it is put together (tests/cluster/README.md "How the plane is built and run" is the
recipe; each step names its upstream source):

- kwokctl (sigs.k8s.io/kwok@v0.8.0) ``create cluster --runtime binary`` with every binary
  given as a local path (pkg/kwokctl/runtime/file.go: a path that exists is used as is, no
  download): etcd, kube-apiserver (secure port, ``--authorization-mode=Node,RBAC``:
  pkg/kwokctl/components/kube_apiserver.go), kube-controller-manager (all default
  controllers: Job, garbage collector, ResourceClaim, service-account token ...),
  kube-scheduler with a second profile :data:`GANG_SCHEDULER` (mpi-operator's
  ``--gang-scheduling=<name>`` sets every pod's schedulerName to it), kwok-controller with
  the stages of :mod:`testcluster.stages`; kubectl (built from the same release) on PATH,
  as kwokctl needs it (pkg/kwokctl/runtime/cluster_tools.go).
- The seven fake GPU nodes of :mod:`testcluster.nodes`.
- The MPIJob CRD of mpi-operator v0.8.2 (manifests/base/kubeflow.org_mpijobs.yaml) and
  scheduler-plugins' PodGroup CRD (v0.34.7, the version mpi-operator v0.8.2 requires),
  server-side applied from the Go module cache.
- mpi-operator out of cluster (cmd/mpi-operator/app/options/options.go flags;
  ``KUBECONFIG`` env; leader election always on, in ``--lock-namespace``).

Every process is started in its own session and stopped by its pid (kwokctl keeps the
pids of the ones it started and stops them on ``delete cluster``). The plane's supervisor
(:mod:`testcluster.supervise`, one process per plane, started first by :func:`up` and
stopped first by :func:`down`) restarts any of them that exits, with the kubelet's
container restart backoff, as a cluster restarts its static pods and Deployments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from testcluster import audit, modules, nodes, processes, stages
from testcluster.plane import Plane

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "testcluster" / "build.sh"
DEFAULT_DIR = Path(os.environ.get("KFP_GPU_CLUSTER_DIR",
                                  Path.home() / ".cache" / "kfp-gpu" / "cluster"))
#: The second kube-scheduler profile (same plugins as default-scheduler).
GANG_SCHEDULER = "kfp-gpu-gang-scheduler"
TIER1 = ("k8s", "etcd", "kwok", "mpi-operator")
TIER2 = ("jobset", "trainer")
TIER3 = ("kueue",)
TIERS = {1: TIER1, 2: TIER1 + TIER2, 3: TIER1 + TIER2 + TIER3}
#: The node tier (a real kubelet node, :mod:`testcluster.node`); beside any tier.
NODE = ("kubelet", "containerd", "runc", "cni-plugins", "coredns", "dra-example-driver")
#: Extra Subject Alternative Names of the API server's certificate: the first address of
#: the Service range (the ``kubernetes`` Service that in-cluster clients dial; the API
#: server's default --service-cluster-ip-range is 10.0.0.0/24).
SERVICE_SANS = ["10.0.0.1"]


class Unavailable(RuntimeError):
    """The control plane cannot be brought up here (binaries not built, no go)."""


def binaries(tools: tuple[str, ...] = TIER1) -> dict[str, Path]:
    """{tool: folder of its built binaries}; raises :class:`Unavailable` naming the missing."""
    out, missing = {}, []
    for t in tools:
        r = subprocess.run(["bash", str(BUILD), "--dir", t], capture_output=True, text=True,
                           check=False)
        if r.returncode == 0 and r.stdout.strip():
            out[t] = Path(r.stdout.strip())
        else:
            missing.append(t)
    if missing:
        raise Unavailable(f"control-plane binaries not built: {', '.join(missing)} "
                          f"(bash testcluster/build.sh {' '.join(missing)})")
    return out


# ---------------------------------------------------------------- up / down
def _kwokctl_config(plane: Plane) -> Path:
    """The kwokctl configuration file: the stages, one document each; kube-apiserver
    audits the service accounts' requests (:mod:`testcluster.audit`)."""
    path = plane.dir / "kwokctl.yaml"
    conf = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokctlConfiguration",
            "options": {"runtime": "binary", "kubeApiserverCertSANs": SERVICE_SANS,
                        "kubeAuditPolicy": str(audit.write_policy(plane.dir))},
            # The API server reaches a real node's kubelet (logs, exec) at its InternalIP;
            # by default it tries the node's host name first, which here names the host.
            "componentsPatches": [
                {"name": "kube-apiserver", "extraArgs": [
                    {"key": "kubelet-preferred-address-types", "value": "InternalIP"}]},
                # kwokctl's binary runtime starts kwok-controller with --manage-all-nodes=true
                # (pkg/kwokctl/components/kwok_controller.go: the annotation selector is set
                # only by the kind runtime), which would also drive a real node's pods; the
                # later flag wins (pflag), so kwok manages only the annotated fake nodes.
                {"name": "kwok-controller", "extraArgs": [
                    {"key": "manage-all-nodes", "value": "false"},
                    {"key": "manage-nodes-with-annotation-selector",
                     "value": f"{nodes.KWOK_NODE_ANNOTATION}=fake"}]}]}
    path.write_text(yaml.safe_dump_all([conf, *stages.all_stages()]))
    return path


def _scheduler_config(plane: Plane) -> Path:
    """kube-scheduler config with profiles default-scheduler and :data:`GANG_SCHEDULER`
    (kubescheduler.config.k8s.io/v1; kwokctl fills in clientConnection.kubeconfig:
    pkg/kwokctl/runtime/binary/cluster_kube_scheduler.go)."""
    path = plane.dir / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler"}, {"schedulerName": GANG_SCHEDULER}],
    }))
    return path


def _create_cluster(plane: Plane) -> None:
    b = plane.bins
    argv = [str(b["kwok"] / "kwokctl"), "create", "cluster", "--name", plane.name,
            "--runtime", "binary", "--wait", "3m", "--kubeconfig", str(plane.kubeconfig),
            "--etcd-binary", str(b["etcd"] / "etcd"),
            "--kube-apiserver-binary", str(b["k8s"] / "kube-apiserver"),
            "--kube-controller-manager-binary", str(b["k8s"] / "kube-controller-manager"),
            "--kube-scheduler-binary", str(b["k8s"] / "kube-scheduler"),
            "--kwok-controller-binary", str(b["kwok"] / "kwok"),
            "--kube-scheduler-config", str(_scheduler_config(plane)),
            "-c", str(_kwokctl_config(plane))]
    plane.logs.mkdir(parents=True, exist_ok=True)
    # a child of the plane's supervisor: the components it forks and leaves are
    # reparented to it (a subreaper), which restarts them (testcluster/supervise.py)
    rc = processes.run_once(plane.dir, "kwokctl-create", argv, plane.env(),
                            plane.logs / "kwokctl.log", timeout=600)
    if rc != 0:
        tail = (plane.logs / "kwokctl.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"kwokctl create cluster failed ({rc}):\n{tail}")
    processes.adopt(plane.dir, plane.workdir / "clusters" / plane.name, plane.env())


def _wait_nodes_ready(plane: Plane, names: list[str], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = plane.kubectl("get", "nodes", "-l", f"{nodes.FAKE_NODE_LABEL}=true", "-o", "json")
        ready = {n["metadata"]["name"] for n in json.loads(r.stdout)["items"]
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])}
        if set(names) <= ready:
            return
        time.sleep(0.5)
    raise RuntimeError(f"fake nodes not Ready in {timeout:.0f} s")


def built_tier() -> int:
    """The highest tier whose binaries are all built (0: not even tier 1)."""
    for tier in (3, 2, 1):
        try:
            binaries(TIERS[tier])
            return tier
        except Unavailable:
            continue
    return 0


def up(dir: Path = DEFAULT_DIR, name: str = "kfp-gpu", tier: int = 1,
       node: bool = False, mpi_operator: bool = True) -> Plane:
    """Bring the control plane up in ``dir`` (must not hold a running one) with the
    operators of ``tier`` (1: mpi-operator; 2: + JobSet, Trainer; 3: + Kueue) and, with
    ``node``, a real node (:mod:`testcluster.node`); return it. ``mpi_operator=False``
    leaves mpi-operator out (a second plane on a machine where one runs: its health port
    8080 is fixed upstream).

    Raises:
        Unavailable: binaries not built.
        RuntimeError: a step failed (the message names the log to read).
    """
    from testcluster import kueue, operators

    plane = Plane(Path(dir), name, binaries(TIERS[tier] + (NODE if node else ())))
    if plane.kubeconfig.exists():
        raise RuntimeError(f"{plane.dir} already holds a control plane: "
                           "python -m testcluster.controlplane down first")
    plane.dir.mkdir(parents=True, exist_ok=True)
    try:
        processes.start(plane.dir)
        _create_cluster(plane)
        fake = nodes.fake_nodes()
        plane.apply(fake)
        _wait_nodes_ready(plane, [n["metadata"]["name"] for n in fake])
        plane.kubectl("create", "namespace", "mpi-operator")
        plane.apply(modules.crds("mpi-operator") + modules.crds("podgroup"))
        if mpi_operator:
            plane.start_mpi_operator()
        if tier >= 2:
            operators.start_tier2(plane)
        if tier >= 3:
            kueue.start_tier3(plane)
        (plane.dir / "tier").write_text(str(tier))
        if node:
            start_node(plane)
    except BaseException:
        down(plane.dir, name)
        raise
    return plane


def start_node(plane: Plane) -> None:
    """Add the real node (:func:`testcluster.node.up`) to a running plane."""
    from testcluster import node

    plane.bins.update(binaries(NODE))
    node.up(plane)


def has_node(dir: Path) -> bool:
    """Whether the plane in ``dir`` has its real node (made by :func:`start_node`)."""
    from testcluster import node

    return node.state_file(Path(dir)).exists()


def attach(dir: Path = DEFAULT_DIR, name: str = "kfp-gpu") -> Plane:
    """The plane that :func:`up` started in ``dir``."""
    dir = Path(dir)
    return Plane(dir, name, binaries(TIERS[tier_of(dir)] + (NODE if has_node(dir) else ())))


def tier_of(dir: Path) -> int:
    """The tier the plane in ``dir`` was brought up with."""
    f = Path(dir) / "tier"
    return int(f.read_text()) if f.exists() else 1


#: What makes a folder a plane's (one of these): :func:`down` refuses any other folder.
PLANE_MARKS = ("kubeconfig", "kwokctl.yaml", "tier", "pids", "kwok", "node/state.json",
               "supervisor.pid", "supervise")


def is_plane_dir(dir: Path) -> bool:
    """Whether ``dir`` holds (or held) a plane :func:`up` made: one of
    :data:`PLANE_MARKS` is in it."""
    return any((Path(dir) / m).exists() for m in PLANE_MARKS)


def scratch_dir(prefix: str = "kfp-gpu-plane-") -> Path:
    """A new, empty folder for a plane in the system's temporary folder, with a path short
    enough for the real node's unix sockets (:data:`testcluster.node_config.UNIX_PATH_MAX`)
    wherever the caller's own temporary folders lie (pytest-xdist's are one level deeper,
    which once put the DRA plugin's registrar socket at 110 bytes). :func:`down` removes
    it."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def down(dir: Path = DEFAULT_DIR, name: str | None = None) -> None:
    """Stop the plane's supervisor (first: nothing is restarted meanwhile), the operators
    (by pid), delete the kwokctl cluster(s) in ``dir`` (``name``, by
    default each one under ``dir/kwok/clusters``: the test fixture names its cluster
    ``kfp-gpu-<random>``), the real node if there is one, and remove ``dir``. A cluster
    process kwokctl did not stop is killed by the pid kwokctl recorded
    (``clusters/<name>/pids/<component>.pid``, kwok v0.8.0 pkg/kwokctl/runtime/exec.go),
    read before ``kwokctl delete cluster`` removes the file. Safe to call twice.

    Raises:
        RuntimeError: ``dir`` exists but is not a plane's folder (none of
            :data:`PLANE_MARKS`): nothing is stopped or removed.
    """
    from testcluster import node

    dir = Path(dir)
    if not dir.exists():
        return
    if not is_plane_dir(dir):
        raise RuntimeError(f"{dir} is not a control plane's folder (none of "
                           f"{', '.join(PLANE_MARKS)} in it): refusing to remove it")
    plane = Plane(dir)
    if processes.stop(dir):  # first: nothing is restarted while the rest stops
        print("  supervisor: stopped", file=sys.stderr)
    for line in node.down(plane):
        print(f"  node: {line}", file=sys.stderr)
    for f in sorted((dir / "pids").glob("*.pid")) if (dir / "pids").exists() else []:
        plane.stop_process(f.stem)
    from testcluster import netns

    for line in netns.remove_recorded(dir):
        print(f"  operators: {line}", file=sys.stderr)
    try:
        plane.bins = binaries(("k8s", "kwok"))
    except Unavailable:
        plane.bins = {}
    clusters = plane.workdir / "clusters"
    if name:
        names = [name]
    else:
        names = sorted(p.name for p in clusters.iterdir()) if clusters.is_dir() else []
    for cluster in names:
        recorded = recorded_pids(clusters / cluster)
        if "kwok" in plane.bins:
            subprocess.run([str(plane.bins["kwok"] / "kwokctl"), "delete", "cluster", "--name",
                            cluster], env=plane.env(), capture_output=True, timeout=120,
                           check=False)
        for pid in recorded:
            kill_if_under(pid, clusters / cluster)
    shutil.rmtree(dir, ignore_errors=True)


def recorded_pids(home: Path) -> list[int]:
    """The pids kwokctl recorded for a cluster (``<home>/pids/<component>.pid``)."""
    out = []
    for f in sorted((home / "pids").glob("*.pid")) if (home / "pids").is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            out.append(int(f.read_text().strip()))
    return out


def kill_if_under(pid: int, home: Path) -> bool:
    """SIGKILL ``pid`` if it runs a binary of the cluster in ``home``: its ``argv[0]`` is a
    path under ``home`` (kwokctl's binary runtime starts each component through the symlink
    ``<home>/bin/<component>``, so ``/proc/PID/exe`` resolves into the binary cache, not
    ``home``) or its executable is the target of one of ``<home>/bin``'s links. Returns
    whether it was killed; a pid reused by another program is left alone."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    bins = {os.path.realpath(p) for p in (home / "bin").glob("*")} if (home / "bin").is_dir() \
        else set()
    if not (argv0.startswith(str(home) + os.sep) or exe in bins):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testcluster.controlplane",
                                description="Bring the test control plane up or down.")
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--tier", type=int, choices=[1, 2, 3], default=None,
                   help="operators: 1 mpi-operator, 2 + JobSet and Trainer, 3 + Kueue "
                        "(default: the highest tier whose binaries are built)")
    p.add_argument("--node", action="store_true",
                   help="also a real node: kubelet, containerd, CoreDNS, DRA plugin "
                        "(bash testcluster/build.sh node first)")
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                   help=f"state folder (default {DEFAULT_DIR}; env KFP_GPU_CLUSTER_DIR)")
    a = p.parse_args(argv)
    try:
        if a.action == "up":
            t0 = time.monotonic()
            tier = a.tier or built_tier() or 1
            plane = up(a.dir, tier=tier, node=a.node)
            print(f"control plane (tier {tier}{', real node' if a.node else ''}) up in "
                  f"{time.monotonic() - t0:.0f} s; "
                  f"logs in {plane.logs}")
            print(f"export KUBECONFIG={plane.kubeconfig}")
        else:
            down(a.dir)
            print(f"control plane in {a.dir} stopped")
    except (Unavailable, RuntimeError) as e:  # node.NodeError is a RuntimeError
        print(f"error: {e}", file=sys.stderr)
        return 3 if isinstance(e, Unavailable) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
