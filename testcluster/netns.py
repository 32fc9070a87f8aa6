"""Network namespaces joined to the host by a veth pair: the real node's
(:mod:`testcluster.node`) and those of operators that bind a fixed port, such as a second
mpi-operator (v0.8.2 serves its health check on ``:8080``, a constant:
cmd/mpi-operator/app/server.go ``healthCheckPort``), so that two of them can run on one
machine. A process is started inside one with ``nsenter --net=/run/netns/<name>`` (``ip
netns exec`` would remount /sys and hide the machine's cgroup v1 mounts); it reaches the
API server, which binds 0.0.0.0, on the veth's host end.

An operator's namespace is recorded in its plane's folder (``netns.json``) and removed by
:func:`remove_recorded`, which :func:`testcluster.controlplane.down` calls.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Held while an operator namespace's index is chosen and made.
LOCK = Path("/run/lock/kfp-gpu-netns.lock")


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message holds its stderr."""


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise NetnsError(f"{' '.join(argv[:4])} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def make(name: str, host_if: str, host_ip: str, inner_ip: str) -> None:
    """Namespace ``name`` with a veth pair: ``host_if`` (``host_ip``/30) on the host,
    ``eth0`` (``inner_ip``/30, default route via ``host_ip``) and ``lo`` up inside.

    Raises:
        NetnsError: an ``ip`` command failed (the namespace or link exists, no root).
    """
    run("ip", "netns", "add", name)
    run("ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", name)
    run("ip", "addr", "add", f"{host_ip}/30", "dev", host_if)
    run("ip", "link", "set", host_if, "up")
    for argv in (("ip", "addr", "add", f"{inner_ip}/30", "dev", "eth0"),
                 ("ip", "link", "set", "eth0", "up"), ("ip", "link", "set", "lo", "up"),
                 ("ip", "route", "add", "default", "via", host_ip)):
        run("ip", "netns", "exec", name, *argv)


def remove(name: str, host_if: str) -> list[str]:
    """Delete namespace ``name`` and the veth ``host_if`` where they exist; one line per
    thing removed."""
    done = []
    if exists(name):
        run("ip", "netns", "del", name, check=False)
        done.append(f"deleted netns {name}")
    if Path(f"/sys/class/net/{host_if}").exists():
        run("ip", "link", "del", host_if, check=False)
        done.append(f"deleted veth {host_if}")
    return done


def exists(name: str) -> bool:
    """Whether network namespace ``name`` exists (``ip netns`` keeps them in /run/netns)."""
    return Path(f"/run/netns/{name}").exists()


def free(name: str, host_if: str) -> bool:
    """Whether neither namespace ``name`` nor link ``host_if`` exists on this machine."""
    return not exists(name) and not Path(f"/sys/class/net/{host_if}").exists()


@dataclass(frozen=True)
class OperatorNetwork:
    """An operator's namespace: 10.215.<index*4>.1/30 on the host, .2/30 inside.

    ``index`` (0-63) keeps the operators of several planes apart (the node tier uses
    10.213/16 and 10.214/16: :class:`testcluster.node_config.Addresses`)."""

    index: int

    def __post_init__(self):
        if not 0 <= self.index < 64:
            raise ValueError(f"operator network index must be 0-63, got {self.index}")

    @property
    def host_ip(self) -> str:
        return f"10.215.{self.index * 4}.1"

    @property
    def inner_ip(self) -> str:
        return f"10.215.{self.index * 4}.2"

    @property
    def name(self) -> str:
        return f"kfpgpu-op{self.index}"

    @property
    def host_if(self) -> str:
        return f"kfpgpu{self.index}o"

    def enter(self) -> list[str]:
        """The argv prefix that runs a command inside this namespace."""
        return ["nsenter", f"--net=/run/netns/{self.name}", "--"]


def _record_file(plane_dir: Path) -> Path:
    return Path(plane_dir) / "netns.json"


def recorded(plane_dir: Path) -> list[OperatorNetwork]:
    """The operator namespaces made for the plane in ``plane_dir``."""
    f = _record_file(plane_dir)
    return [OperatorNetwork(i) for i in json.loads(f.read_text())] if f.exists() else []


def create_for(plane_dir: Path) -> OperatorNetwork:
    """Make an operator namespace with the lowest free index (neither its namespace nor
    its veth exists), recorded in ``plane_dir`` before it is made (so a failed make is
    still removed by :func:`remove_recorded`).

    Raises:
        NetnsError: all 64 indexes are in use, or an ``ip`` command failed.
    """
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:  # two test processes choosing at once get two indexes
        fcntl.flock(lock, fcntl.LOCK_EX)
        for i in range(64):
            net = OperatorNetwork(i)
            if free(net.name, net.host_if):
                break
        else:
            raise NetnsError("no free operator network index (64 namespaces exist)")
        f = _record_file(plane_dir)
        mine = [n.index for n in recorded(plane_dir)] + [net.index]
        tmp = f.with_suffix(".tmp")
        tmp.write_text(json.dumps(mine))
        tmp.replace(f)
        make(net.name, net.host_if, net.host_ip, net.inner_ip)
    return net


def remove_recorded(plane_dir: Path) -> list[str]:
    """Remove every operator namespace recorded for ``plane_dir`` (safe to call twice);
    one line per thing removed. The processes inside must be stopped first."""
    done = []
    for net in recorded(plane_dir):
        done += remove(net.name, net.host_if)
    _record_file(plane_dir).unlink(missing_ok=True)
    return done
