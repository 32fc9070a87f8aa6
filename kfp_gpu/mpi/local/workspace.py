"""The local runner's workspace folder: what the ConfigMap and the ssh Secret would hold.

:func:`write_workspace` writes, for a :class:`kfp_gpu.mpi.local.model.LocalPlan`:

- ``ssh/``: ``id_rsa``, ``id_rsa.pub``, ``authorized_keys`` from a fresh ECDSA P-521 key in
  the form both controllers generate (kubeflow/mpi-operator v0.8.2 ``newSSHAuthSecret``;
  kubeflow/trainer v2.3.0 ``pkg/runtime/framework/plugins/mpi/mpi.go`` buildSSHAuthSecret
  l. 279-310: ``x509.MarshalECPrivateKey`` as an ``EC PRIVATE KEY`` PEM,
  ``ssh.MarshalAuthorizedKey``), owned by the caller (root, as kubelet writes Secret
  volumes), group ``plan.ssh.gid`` (a pod's ``fsGroup``) when set, modes from the plan;
- ``config/``: the ``hostfile`` (0444) and, for an MPIJob, ``discover_hosts.sh`` (0555);
- ``emptydir/<pod>/<volume>``: one 0777 folder per ``emptyDir`` mount (kubelet's mode).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kfp_gpu.mpi.local import plan as lp
from kfp_gpu.mpi.local.model import LocalPlan


def ssh_key_pair() -> tuple[bytes, bytes]:
    """A new ECDSA P-521 key as (``EC PRIVATE KEY`` PEM, OpenSSH public key line), the form
    of newSSHAuthSecret (x509.MarshalECPrivateKey + ssh.MarshalAuthorizedKey)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH)
    return private, public + b"\n"


def write(path: Path, data: bytes | str, mode: int, gid: int | None = None) -> None:
    """Write ``data`` to ``path`` with ``mode`` (and group ``gid`` when given).

    Raises:
        PermissionError: ``gid`` set and the caller may not give the file that group
            (not root and not a member).
    """
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if gid is not None:
        os.chown(path, -1, gid)
    path.chmod(mode)


def write_discover_hosts(workspace: Path, plan: LocalPlan, running: list[str]) -> None:
    """(Re)write ``config/discover_hosts.sh`` listing the running Workers (MPIJob only)."""
    if not plan.controller.discover_hosts:
        return
    path = workspace / "config" / lp.DISCOVER_HOSTS
    if path.exists():
        path.chmod(0o755)
    write(path, lp.discover_hosts(plan.name, plan.namespace, running,
                                  plan.launcher_as_worker), 0o555)


def write_workspace(plan: LocalPlan) -> Path:
    """A new workspace folder (0755, under the system temp dir) for ``plan``; see the
    module docstring. The caller removes it."""
    ws = Path(tempfile.mkdtemp(prefix=f"kfp-gpu-{plan.kind.lower()}-{plan.name}-"))
    ws.chmod(0o755)
    (ws / "ssh").mkdir(mode=0o755)
    private, public = ssh_key_pair()
    data = {"id_rsa": private, "id_rsa.pub": public, "authorized_keys": public}
    for name, mode in plan.ssh.file_modes().items():
        write(ws / "ssh" / name, data[name], mode, plan.ssh.gid)
    (ws / "config").mkdir(mode=0o755)
    write(ws / "config" / lp.HOSTFILE, plan.hostfile, 0o444)
    write_discover_hosts(ws, plan, [])
    for spec in (*plan.workers, plan.launcher):
        for m in spec.mounts:
            if m.kind == "emptyDir":
                d = ws / "emptydir" / m.source
                d.mkdir(parents=True, exist_ok=True)
                d.chmod(0o777)  # kubelet creates emptyDir folders 0777
    return ws
