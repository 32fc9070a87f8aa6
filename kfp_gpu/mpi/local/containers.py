"""One job's containers and network on a Docker engine: create, list, inspect, remove.

The Docker side of :class:`kfp_gpu.mpi.local.runner.LocalMPIJobRunner`: every container and
network carries :data:`JOB_LABEL` = ``<namespace>.<name>`` (what ownerReferences are to the
operator: deleting the job finds everything by it) and the operator's pod labels
(kubeflow/mpi-operator v0.8.2 ``pkg/apis/kubeflow/v2beta1/constants.go``:
``training.kubeflow.org/job-name``, ``training.kubeflow.org/job-role``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from kfp_gpu.mpi.local.model import ContainerSpec, LocalPlan, Mount

#: Label on every container and network the runner creates: ``<namespace>.<name>``.
JOB_LABEL = "kfp-gpu.local-mpijob"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"  # pkg/apis/kubeflow/v2beta1/constants.go
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


def log_tail(container, lines: int = 5) -> str:
    """The last ``lines`` lines of a container's output (CR removed), for messages."""
    text = container.logs(tail=lines).decode(errors="replace").replace("\r", "")
    return text.strip()


def _loopback(local_address: str) -> bool:
    """True for a ``/proc/net/tcp[6]`` ``local_address`` (hex ``ADDR:PORT``, the address in
    host byte order: little-endian here) on 127.0.0.0/8, ``::1`` or ``::ffff:127.x``."""
    addr = local_address.split(":")[0].upper()
    if len(addr) == 8:
        return addr[6:8] == "7F"
    return addr == "0" * 24 + "01000000" or (
        addr[:24] == "0" * 16 + "FFFF0000" and addr[30:32] == "7F")


def listening(proc_net_tcp: str) -> bool:
    """True if a ``/proc/net/tcp[6]`` listing has a socket in state LISTEN (``0A``) that a
    Kubernetes ``tcpSocket`` probe could reach: not bound to a loopback address (kubelet
    probes the pod IP). This also leaves out the TCP listener of Docker's embedded DNS
    server, which dockerd opens on 127.0.0.11 inside every container of a user-defined
    network (moby/moby ``libnetwork/resolver.go``), so every Worker would otherwise look
    ready at once."""
    rows = [ln.split() for ln in proc_net_tcp.splitlines()[1:]]
    return any(len(r) > 3 and r[3] == "0A" and ":" in r[1] and not _loopback(r[1])
               for r in rows)


def state(container) -> tuple[str, int, bool]:
    """``(Docker state, exit code, OOM-killed)`` from the container's last inspection."""
    s = container.attrs.get("State") or {}
    return s.get("Status", ""), int(s.get("ExitCode") or 0), bool(s.get("OOMKilled"))


class JobContainers:
    """The containers and network of one planned job on ``client`` (a ``docker.DockerClient``).

    Args:
        plan: the job's :class:`~kfp_gpu.mpi.local.model.LocalPlan`.
        client: the engine.
        pvc_dirs: claim name -> local folder (absolute) for each ``persistentVolumeClaim``.
        image: if set, replaces every container's image.
    """

    def __init__(self, plan: LocalPlan, client, pvc_dirs: Mapping[str, str],
                 image: str | None = None):
        self.plan, self.client, self.pvc_dirs, self.image = plan, client, pvc_dirs, image
        self.key = f"{plan.namespace}.{plan.name}"
        self.workspace: Path | None = None

    def labels(self, role: str = "") -> dict[str, str]:
        """The labels of this job's objects (with ``job-role`` for a container of ``role``)."""
        out = {JOB_LABEL: self.key, JOB_NAME_LABEL: self.plan.name}
        return {**out, JOB_ROLE_LABEL: role} if role else out

    def list(self, role: str = "") -> list:
        """This job's containers (all, or one role), stopped ones included."""
        labels = [f"{JOB_LABEL}={self.key}"] + ([f"{JOB_ROLE_LABEL}={role}"] if role else [])
        return self.client.containers.list(all=True, filters={"label": labels})

    def networks(self) -> list:
        """This job's networks (one, or none)."""
        return self.client.networks.list(filters={"label": f"{JOB_LABEL}={self.key}"})

    def workers(self) -> list:
        """The Worker containers that exist, freshly inspected, in the plan's order."""
        found = {c.name: c for c in self.list("worker")}
        for c in found.values():
            c.reload()
        return [found[s.name] for s in self.plan.workers if s.name in found]

    def source(self, m: Mount) -> str:
        """The host path bound for mount ``m`` (PVC folder, hostPath, workspace part)."""
        base = {"pvc": lambda: self.pvc_dirs[m.source], "hostPath": lambda: m.source,
                "emptyDir": lambda: str(self.workspace / "emptydir" / m.source),
                "ssh": lambda: str(self.workspace / "ssh"),
                "config": lambda: str(self.workspace / "config")}[m.kind]()
        return os.path.join(base, m.sub_path) if m.sub_path else base

    def check_volumes(self) -> None:
        """Raises ValueError for a PVC without a folder or a missing PVC/hostPath folder."""
        for spec in (*self.plan.workers, self.plan.launcher):
            for m in spec.mounts:
                if m.kind == "pvc" and m.source not in self.pvc_dirs:
                    raise ValueError(f"{spec.name}: PVC {m.source!r} has no local folder; "
                                     f"pass pvc_dirs={{{m.source!r}: '/some/dir'}} (CLI: "
                                     f"--pvc {m.source}=DIR)")
                if m.kind in ("pvc", "hostPath") and not Path(self.source(m)).exists():
                    raise ValueError(f"{spec.name}: {m.kind} folder {self.source(m)} for "
                                     f"{m.target} does not exist")

    def create_network(self) -> None:
        """The job's user-defined bridge network (names resolve like the headless Service)."""
        self.client.networks.create(self.plan.network, driver="bridge", labels=self.labels())

    def run(self, spec: ContainerSpec):
        """Start the container of ``spec`` (detached) on the job's network; returns it."""
        from docker.types import Mount as DockerMount

        mounts = [DockerMount(m.target, self.source(m), type="bind", read_only=m.read_only)
                  for m in spec.mounts if m.kind != "tmpfs"]
        tmpfs = {m.target: f"size={m.source}" + (",ro" if m.read_only else "")
                 for m in spec.mounts if m.kind == "tmpfs"}
        net = self.plan.network
        return self.client.containers.run(
            self.image or spec.image, entrypoint=list(spec.entrypoint or []) or None,
            command=list(spec.command) if spec.command else None, name=spec.name,
            hostname=spec.name, environment=dict(spec.environment), user=spec.security.user,
            group_add=list(spec.security.group_add) or None,
            cap_add=list(spec.security.cap_add) or None, shm_size=spec.resources.shm_size,
            mounts=mounts, tmpfs=tmpfs or None, working_dir=spec.working_dir,
            dns_search=list(spec.dns_search), labels=self.labels(spec.role), detach=True,
            cpu_shares=spec.resources.cpu_shares,
            network=net, networking_config={
                net: self.client.api.create_endpoint_config(aliases=list(spec.aliases))})

    def ready(self, workers: list) -> bool:
        """Every planned Worker runs and has a socket in LISTEN (its sshd).

        A Worker that exits between the state read and the exec (the engine answers
        409 Conflict "is not running") is not ready; the next reconcile step reads its
        exit code, as the kubelet would report it.
        """
        import docker

        if len(workers) != len(self.plan.workers):
            return False
        for c in workers:
            if state(c)[0] != "running":
                return False
            try:
                res = c.exec_run(["cat", "/proc/net/tcp", "/proc/net/tcp6"])
            except docker.errors.APIError as exc:
                if exc.status_code in (404, 409):
                    return False
                raise
            if not listening(res.output.decode(errors="replace")):
                return False
        return True

    def remove_all(self) -> None:
        """Remove every container and network of this job (idempotent)."""
        import docker

        for c in self.list():
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
        for net in self.networks():
            with contextlib.suppress(docker.errors.NotFound):
                net.remove()
