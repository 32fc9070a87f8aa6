"""A running test control plane as one object (:class:`Plane`): its folder, kubeconfig,
processes (started under the plane's supervisor, stopped by pid) and kubectl.

Made by :func:`testcluster.controlplane.up` / ``attach``; the operators and the real node
start on it (:mod:`testcluster.operators`, :mod:`testcluster.node`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testcluster import processes, supervise


@dataclass
class Plane:
    """A running control plane: its folder, cluster name and kubeconfig."""

    dir: Path
    name: str = "kfp-gpu"
    bins: dict[str, Path] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def workdir(self) -> Path:
        return self.dir / "kwok"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    def env(self) -> dict[str, str]:
        """Environment for kubectl/kwokctl/operators: KUBECONFIG, KWOK_WORKDIR, PATH."""
        e = dict(os.environ, KUBECONFIG=str(self.kubeconfig), KWOK_WORKDIR=str(self.workdir))
        if "k8s" in self.bins:
            e["PATH"] = f"{self.bins['k8s']}{os.pathsep}{e.get('PATH', '')}"
        return e

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        """Run the built kubectl against this plane; with ``check`` a non-zero exit raises
        RuntimeError with kubectl's stderr."""
        r = subprocess.run([str(self.bins["k8s"] / "kubectl"), *args], env=self.env(),
                           input=input, capture_output=True, text=True, timeout=timeout,
                           check=False)
        if check and r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])} failed ({r.returncode}): "
                               f"{r.stderr.strip()}")
        return r

    def apply(self, docs: list[dict]) -> None:
        """Server-side apply (field manager ``kfp-gpu-tests``) of ``docs``; CRDs among them
        are waited for until Established."""
        text = yaml.safe_dump_all(docs)
        self.kubectl("apply", "--server-side", "--force-conflicts",
                     "--field-manager=kfp-gpu-tests", "-f", "-", input=text)
        crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
        end = time.monotonic() + 60
        while crds and time.monotonic() < end:
            r = self.kubectl("get", "crd", *crds, "-o", "json")
            items = json.loads(r.stdout).get("items") or []
            if all(any(c["type"] == "Established" and c["status"] == "True"
                       for c in (i.get("status") or {}).get("conditions") or [])
                   for i in items):
                return
            time.sleep(0.3)
        if crds:
            raise RuntimeError(f"CRDs not Established in 60 s: {', '.join(crds)}")

    # ------------------------------------------------------------ processes
    def pid_file(self, name: str) -> Path:
        return self.dir / "pids" / f"{name}.pid"

    def start_process(self, name: str, argv: list[str],
                      extra_env: dict[str, str] | None = None) -> int:
        """Start ``argv`` in its own session, log in logs/<name>.log, pid in pids/, and have
        the plane's supervisor restart it when it exits (:func:`testcluster.processes.spawn`:
        through the supervisor when it runs)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pid_file(name).parent.mkdir(parents=True, exist_ok=True)
        return processes.spawn(self.dir, name, argv, {**self.env(), **(extra_env or {})},
                               self.logs / f"{name}.log", [self.pid_file(name)])

    def stop_process(self, name: str, grace_s: float = 10.0) -> None:
        """SIGTERM the process recorded as ``name`` (its session), SIGKILL after grace_s;
        held first, so the supervisor does not start it again (a later
        :meth:`start_process` does)."""
        f = self.pid_file(name)
        if not f.exists():
            return
        supervise.hold(self.dir, name)
        pid = int(f.read_text())
        _signal_group(pid, signal.SIGTERM)
        end = time.monotonic() + grace_s
        while time.monotonic() < end and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)
        f.unlink(missing_ok=True)

    def running(self, name: str) -> bool:
        f = self.pid_file(name)
        return f.exists() and _alive(int(f.read_text()))

    # ------------------------------------------------------------ operators
    def start_mpi_operator(self, gang_scheduling: str = "", own_network: bool = False) -> None:
        """mpi-operator v0.8.2 out of cluster, waiting until it leads (its Lease).

        ``gang_scheduling``: its ``--gang-scheduling`` scheduler name
        (cmd/mpi-operator/app/options/options.go). ``own_network``: run it in a network
        namespace of its own (:func:`testcluster.netns.create_for`, removed by
        :func:`down`), reaching the API server on the veth's host end, so that it can run
        while another plane's operator holds ``:8080`` (server.go ``healthCheckPort``)."""
        argv = [str(self.bins["mpi-operator"] / "mpi-operator"),
                "--lock-namespace=mpi-operator", "--kube-api-qps=50", "--kube-api-burst=100",
                "--threadiness=2"]
        if gang_scheduling:
            argv.append(f"--gang-scheduling={gang_scheduling}")
        env = {}
        if own_network:
            from testcluster import netns, node_config

            net = netns.create_for(self.dir)
            kc = self.dir / "mpi-operator-kubeconfig"
            kc.write_text(yaml.safe_dump(node_config.node_kubeconfig(
                yaml.safe_load(self.kubeconfig.read_text()), net.host_ip)))
            argv = [*net.enter(), *argv]
            env["KUBECONFIG"] = str(kc)  # server.go: $KUBECONFIG wins over --kubeConfig
        before = self.lease_holder("mpi-operator", "mpi-operator")
        self.start_process("mpi-operator", argv, env)
        # v0.8.2 does not release its Lease on exit (no ReleaseOnCancel: app/server.go), so
        # a restarted operator leads only once the old holder's 15 s lease has expired.
        self.wait_for_lease("mpi-operator", "mpi-operator", "mpi-operator", before)

    def lease_holder(self, ns: str, lease: str) -> str:
        r = self.kubectl("get", "lease", "-n", ns, lease, "-o",
                         "jsonpath={.spec.holderIdentity}", check=False)
        return r.stdout.strip() if r.returncode == 0 else ""

    def wait_for_lease(self, ns: str, lease: str, process: str, previous: str = "",
                       timeout: float = 90) -> None:
        """Wait until Lease ns/lease has a holder other than ``previous``; the process must
        stay alive meanwhile."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.running(process):
                raise RuntimeError(f"{process} exited: see {self.logs / (process + '.log')}")
            holder = self.lease_holder(ns, lease)
            if holder and holder != previous:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{process} did not take Lease {ns}/{lease} in {timeout:.0f} s")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (an exited, unreaped process does not)."""
    return supervise.alive(pid)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


# ---------------------------------------------------------------- binaries
