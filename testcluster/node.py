"""The node tier: one real Kubernetes node joins the plane beside the kwok nodes, so pods
really run (the project's images under a kubelet, containerd and runc).

    python -m testcluster.controlplane up --node     # make cluster-up NODE=1
    python -m testcluster.controlplane down          # removes the node too

What runs, all built from the wrapper modules in testcluster/go (``build.sh node``):
kubelet and kube-proxy (k8s.io/kubernetes v1.36.3, the same module as the control plane),
containerd v2.4.2 + runc v1.5.3, the CNI plugins v1.10.0 (bridge, host-local, loopback,
portmap), CoreDNS v1.15.0 and dra-example-driver v0.2.1's kubelet plugin. Everything but
the veth's host end lives in a network namespace of its own (``ip netns add``); daemons
are started in it with ``nsenter --net=`` (``ip netns exec`` would remount /sys and hide
the machine's cgroup v1 mounts). The API server is reached on the veth's host end (it
binds 0.0.0.0), the kubelet by the API server on the node's InternalIP
(``--kubelet-preferred-address-types=InternalIP``, set by :mod:`testcluster.controlplane`).
Cluster DNS is CoreDNS as a process of the node on the node's address; Service ClusterIPs
(the ``kubernetes`` Service for in-cluster clients) are kube-proxy's iptables rules in
the namespace.

State is recorded in ``<plane>/node/state.json`` before each thing is made, so
:func:`down` removes exactly what :func:`up` made: processes (by pid; containers and
shims by their cgroup and containerd address), mounts under the node's folder, the
namespace, the veth, the cgroups under the node's cgroup root, libcni's cache files of
the node's network, and the six sysctls kubelet sets (restored to the host's values when the
machine's last real node goes: :data:`SYSCTL_FILE`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import yaml

from testcluster import netns
from testcluster import node_config as cfg
from testcluster.node_images import NodeError, containerd_answers, import_pause, run

#: Kubernetes' pause source in the module cache (the image the CRI runs each pod around).
#: The processes of the node, in start order (stopped in reverse).
PROCESSES = ("containerd", "kubelet", "kube-proxy", "coredns", "dra-plugin")
CGROUP_FS = Path("/sys/fs/cgroup")
CNI_CACHE = Path("/var/lib/cni/results")
#: The host's values of the sysctls kubelet sets, recorded by the machine's first real node
#: and restored when its last one is gone (they are the host's, not a namespace's).
SYSCTL_FILE = Path("/run/kfp-gpu/node-sysctls.json")
#: dra-example-driver's device class (deployments/helm/.../deviceclass.yaml) and driver.
DRA_DEVICE_CLASS = cfg.DRA_DRIVER


# ---------------------------------------------------------------- state
def state_file(plane_dir: Path) -> Path:
    return Path(plane_dir) / "node" / "state.json"


def _load(plane_dir: Path) -> dict:
    f = state_file(plane_dir)
    return json.loads(f.read_text()) if f.exists() else {}


def _record(plane_dir: Path, **kv) -> dict:
    s = _load(plane_dir)
    s.update(kv)
    f = state_file(plane_dir)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(s, indent=1))
    tmp.replace(f)
    return s


def free_index() -> int:
    """The lowest node network index (:class:`testcluster.node_config.Addresses`) whose
    namespace does not exist on this machine."""
    for i in range(64):
        if netns.free(cfg.Addresses(i).netns, cfg.Addresses(i).host_if):
            return i
    raise NodeError("no free node network index (64 node namespaces exist)")


# ---------------------------------------------------------------- pause image
def up(plane, *, index: int | None = None, gpus: int = 4) -> None:
    """Bring the real node up on ``plane`` (a :class:`testcluster.controlplane.Plane`
    whose ``bins`` hold the node tier's tools) and wait until it is Ready.

    ``gpus`` fake GPUs are advertised both ways the project requests them: extended
    resources ``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb`` and ``nvidia.com/gpu.shared``
    on the node's status (kept by the kubelet: extended resources it does not manage are
    left in capacity, as Kubernetes documents for extended resources), and ``gpus``
    devices of dra-example-driver's kubelet plugin (DeviceClass ``gpu.example.com``).

    Raises:
        NodeError: a step failed (the message names the log); what was made is recorded
            so :func:`down` removes it.
    """
    d = plane.dir
    paths = cfg.Paths(d / "node")
    long = cfg.too_long_sockets(paths)
    if long:
        raise NodeError(f"the plane's folder {d} is too long for the node's unix sockets "
                        f"(at most {cfg.UNIX_PATH_MAX} bytes): {', '.join(long)}; bring the "
                        "plane up in a shorter folder (--dir)")
    addrs = cfg.Addresses(free_index() if index is None else index)
    for p in (paths.config, paths.cni_conf, paths.cni_ipam, paths.cdi, paths.pod_logs,
              paths.kubelet_root):
        p.mkdir(parents=True, exist_ok=True)
    cgroup_root = f"/kfp-gpu-node{addrs.index}"
    _record(d, index=addrs.index, netns=addrs.netns, host_if=addrs.host_if,
            cgroup_root=cgroup_root, root=str(paths.root))
    _remember_sysctls()
    _network(addrs)
    for sub in _cgroup_hierarchies():
        (sub / cgroup_root.lstrip("/")).mkdir(exist_ok=True)

    node_kc = _write_config(plane, paths, addrs, cgroup_root)
    b = plane.bins
    ns = ["nsenter", f"--net=/run/netns/{addrs.netns}", "--"]
    path_env = {"PATH": os.pathsep.join([str(b["containerd"]), str(b["runc"]),
                                         os.environ.get("PATH", "")])}
    plane.start_process("containerd", [*ns, str(b["containerd"] / "containerd"), "--config",
                                       str(paths.config / "containerd.toml")], path_env)
    _wait(lambda: containerd_answers(plane, paths), 60, "containerd did not answer", plane,
          "containerd")
    import_pause(plane, paths)
    plane.start_process("kubelet", [
        *ns, str(b["kubelet"] / "kubelet"), f"--config={paths.config / 'kubelet.yaml'}",
        f"--kubeconfig={node_kc}", f"--hostname-override={cfg.NODE_NAME}",
        f"--node-ip={addrs.node_ip}", f"--root-dir={paths.kubelet_root}",
        f"--node-labels={cfg.REAL_NODE_LABEL}=true", "--v=2"], path_env)
    _wait(lambda: _node_ready(plane), 180, "the node did not become Ready", plane, "kubelet")
    plane.start_process("kube-proxy", [*ns, str(b["kubelet"] / "kube-proxy"),
                                       f"--config={paths.config / 'kube-proxy.yaml'}"])
    plane.start_process("coredns", [*ns, str(b["coredns"] / "coredns"), "-conf",
                                    str(paths.config / "Corefile")])
    _advertise_gpus(plane, gpus)
    plane.apply([dra_device_class()])
    plane.start_process("dra-plugin", [
        *ns, str(b["dra-example-driver"] / "dra-example-kubeletplugin"),
        f"--node-name={cfg.NODE_NAME}", f"--cdi-root={paths.cdi}", f"--num-devices={gpus}",
        f"--kubelet-registrar-directory-path={paths.kubelet_root / 'plugins_registry'}",
        f"--kubelet-plugins-directory-path={paths.kubelet_root / 'plugins'}"],
        {"KUBECONFIG": str(node_kc)})
    _wait(lambda: _slices(plane) >= gpus, 90,
          "dra-example-driver published no ResourceSlice", plane, "dra-plugin")


def _write_config(plane, paths: cfg.Paths, addrs: cfg.Addresses, cgroup_root: str) -> Path:
    """The node's config files (kubeconfig, CA, resolv.conf, containerd, CNI, kubelet,
    kube-proxy, CoreDNS) from :mod:`testcluster.node_config`; returns the kubeconfig."""
    b = plane.bins
    oom = int(Path("/proc/self/oom_score_adj").read_text())
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    node_kc = paths.config / "kubeconfig"
    node_kc.write_text(yaml.safe_dump(cfg.node_kubeconfig(admin, addrs.host_ip)))
    ca = paths.config / "ca.crt"
    ca.write_text(_ca_pem(admin))
    (paths.config / "resolv.conf").write_text(f"nameserver {addrs.node_ip}\n")
    (paths.config / "containerd.toml").write_text(
        cfg.containerd_config(paths, b["runc"] / "runc", b["cni-plugins"] / "cni"))
    (paths.cni_conf / "10-kfp-gpu.conflist").write_text(
        json.dumps(cfg.cni_conflist(paths, addrs), indent=1))
    (paths.config / "kubelet.yaml").write_text(yaml.safe_dump(cfg.kubelet_config(
        paths, addrs, ca_file=ca, cgroup_root=cgroup_root, oom_score_adj=oom)))
    (paths.config / "kube-proxy.yaml").write_text(yaml.safe_dump(
        cfg.kube_proxy_config(addrs, node_kc, oom)))
    (paths.config / "Corefile").write_text(cfg.corefile(addrs, node_kc))

    return node_kc


def dra_device_class() -> dict:
    """dra-example-driver v0.2.1's DeviceClass (deployments/helm/dra-example-driver/
    templates/deviceclass.yaml, resource.k8s.io/v1)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": DRA_DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {
                "expression": f"device.driver == '{DRA_DEVICE_CLASS}'"}}]}}


def _ca_pem(kubeconfig: dict) -> str:
    import base64

    c = kubeconfig["clusters"][0]["cluster"]
    if "certificate-authority-data" in c:
        return base64.b64decode(c["certificate-authority-data"]).decode()
    return Path(c["certificate-authority"]).read_text()


def _network(a: cfg.Addresses) -> None:
    netns.make(a.netns, a.host_if, a.host_ip, a.node_ip)
    run("ip", "netns", "exec", a.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1")


def _cgroup_hierarchies() -> list[Path]:
    """The machine's cgroup v1 hierarchies (one folder per mounted controller set)."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        _dev, mnt, fstype = line.split()[:3]
        if fstype == "cgroup" and Path(mnt).is_relative_to(CGROUP_FS):
            out.append(Path(mnt))
    return out


def _node_ready(plane) -> bool:
    r = plane.kubectl("get", "node", cfg.NODE_NAME, "-o", "json", check=False)
    if r.returncode != 0:
        return False
    conds = json.loads(r.stdout).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def _slices(plane) -> int:
    r = plane.kubectl("get", "resourceslices", "--field-selector",
                      f"spec.nodeName={cfg.NODE_NAME}", "-o", "json", check=False)
    if r.returncode != 0:
        return 0
    return sum(len(s["spec"].get("devices") or []) for s in json.loads(r.stdout)["items"])


def _advertise_gpus(plane, gpus: int) -> None:
    res = {"nvidia.com/gpu": str(gpus), "nvidia.com/mig-1g.10gb": str(gpus),
           "nvidia.com/gpu.shared": str(gpus * 4)}
    plane.kubectl("patch", "node", cfg.NODE_NAME, "--subresource=status", "--type=merge",
                  "-p", json.dumps({"status": {"capacity": res, "allocatable": res}}))


def _wait(cond, timeout: float, what: str, plane, process: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not plane.running(process):
            raise NodeError(f"{process} exited: see {plane.logs / (process + '.log')}")
        if cond():
            return
        time.sleep(0.5)
    raise NodeError(f"{what} in {timeout:.0f} s: see {plane.logs / (process + '.log')}")


# ---------------------------------------------------------------- down
def down(plane) -> list[str]:
    """Remove what :func:`up` made on ``plane`` (per its state file), in reverse; safe to
    call twice and after a failed up. Returns one line per thing removed."""
    s = _load(plane.dir)
    if not s:
        return []
    done = []
    for name in reversed(PROCESSES):
        if plane.running(name):
            done.append(f"stopped {name}")
        plane.stop_process(name, grace_s=5)
    root = Path(s["root"])
    killed = _kill_node_processes(s["cgroup_root"], root)
    if killed:
        done.append(f"killed {killed} container/shim processes")
    n = _unmount_under(root)
    if n:
        done.append(f"unmounted {n} mounts")
    done += netns.remove(s["netns"], s["host_if"])
    n = _remove_cgroups(s["cgroup_root"])
    if n:
        done.append(f"removed {n} cgroups")
    done += _restore_sysctls_if_last()
    for f in cni_cache_files(root):
        f.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    return done


def cni_cache_files(root: Path) -> list[Path]:
    """libcni's cache files (/var/lib/cni/results: one per pod network attachment, the
    pods' network and containerd's loopback) of the node in ``root``: those naming a
    network namespace under it (the node's containerd keeps pod namespaces in its state
    folder: ``netns_mounts_under_state_dir``)."""
    out = []
    for f in CNI_CACHE.glob("*") if CNI_CACHE.is_dir() else []:
        with contextlib.suppress(OSError):
            if str(root) in f.read_text(errors="replace"):
                out.append(f)
    return out


def node_namespaces() -> list[str]:
    """The network namespaces of this machine's real nodes (any plane's)."""
    names = run("ip", "netns", "list", check=False).stdout.split()
    return [n for n in names if n.startswith("kfpgpu-node")]


def _remember_sysctls() -> None:
    """Record the host's values of the sysctls kubelet changes, once per machine: the first
    node of any plane writes :data:`SYSCTL_FILE` before its kubelet starts (a second node
    would only see the first kubelet's values)."""
    if SYSCTL_FILE.exists():
        return
    SYSCTL_FILE.parent.mkdir(parents=True, exist_ok=True)
    tmp = SYSCTL_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: Path(f"/proc/sys/{k}").read_text().strip()
                               for k in cfg.KUBELET_SYSCTLS}))
    tmp.replace(SYSCTL_FILE)


def _restore_sysctls_if_last() -> list[str]:
    """When no real node is left on the machine, put back the values
    :func:`_remember_sysctls` recorded and remove the record."""
    if node_namespaces() or not SYSCTL_FILE.exists():
        return []
    done = []
    for k, v in json.loads(SYSCTL_FILE.read_text()).items():
        f = Path(f"/proc/sys/{k}")
        with contextlib.suppress(OSError):
            if f.read_text().strip() != v:
                f.write_text(v)
                done.append(f"restored {k.replace('/', '.')}={v}")
    SYSCTL_FILE.unlink(missing_ok=True)
    return done


def _kill_node_processes(cgroup_root: str, root: Path) -> int:
    """SIGKILL every process in a cgroup under ``cgroup_root`` (containers) and every
    containerd shim started for the node's containerd (its command line names the node's
    socket). Returns how many."""
    sock = str(root / "containerd" / "containerd.sock")
    n = 0
    for _ in range(3):
        pids = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cg = (p / "cgroup").read_text()
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if f":{cgroup_root}/" in cg or (
                        "containerd-shim" in cmd and sock in cmd):
                    pids.append(int(p.name))
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        n += len(pids)
        time.sleep(0.5)
    return n


def mounts_under(root: Path) -> list[str]:
    """Mount points at or under ``root`` (from /proc/mounts), deepest first."""
    r = str(root)
    pts = []
    for line in Path("/proc/mounts").read_text().splitlines():
        mnt = line.split()[1].replace("\\040", " ")
        if mnt == r or mnt.startswith(r + "/"):
            pts.append(mnt)
    return sorted(set(pts), key=lambda m: m.count("/"), reverse=True)


def _unmount_under(root: Path) -> int:
    n = 0
    for _ in range(5):
        pts = mounts_under(root)
        if not pts:
            break
        for m in pts:
            if subprocess.run(["umount", m], capture_output=True, check=False).returncode:
                subprocess.run(["umount", "-l", m], capture_output=True, check=False)
            n += 1
    return n


def cgroups_under(cgroup_root: str) -> list[Path]:
    """Cgroup folders at or under ``cgroup_root`` in every v1 hierarchy, deepest first."""
    out = []
    for h in _cgroup_hierarchies():
        top = h / cgroup_root.lstrip("/")
        if top.is_dir():
            out.extend(Path(p) for p, _, _ in os.walk(top))
    return sorted(out, key=lambda p: len(p.parts), reverse=True)


def _remove_cgroups(cgroup_root: str) -> int:
    n = 0
    for p in cgroups_under(cgroup_root):
        with contextlib.suppress(OSError):
            p.rmdir()
            n += 1
    return n
