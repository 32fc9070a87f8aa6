"""The local runner's workspace folder: what the ConfigMap and the ssh Secret would hold.

:func:`write_workspace` writes, for a :class:`kfp_gpu.mpi.local.model.LocalPlan`:

- ``ssh/``: ``id_rsa``, ``id_rsa.pub``, ``authorized_keys`` from a fresh ECDSA P-521 key in
  the form both controllers generate (kubeflow/mpi-operator v0.8.2 ``newSSHAuthSecret``;
  kubeflow/trainer v2.3.0 ``pkg/runtime/framework/plugins/mpi/mpi.go`` buildSSHAuthSecret
  l. 279-310: ``x509.MarshalECPrivateKey`` as an ``EC PRIVATE KEY`` PEM,
  ``ssh.MarshalAuthorizedKey``), owned as kubelet owns a Secret volume's files
  (:func:`secret_file_stats`): user root, group the pod's ``fsGroup`` (``plan.ssh.gid``) or
  root, the plan's mode with group read added under an ``fsGroup``;
- ``config/``: the ``hostfile`` (0444) and, for an MPIJob, ``discover_hosts.sh`` (0555),
  root's like the ConfigMap volume's files;
- ``emptydir/<pod>/<volume>``: one 0777 folder per ``emptyDir`` mount (kubelet's mode).

A caller that is not root cannot give files to root: see :func:`secret_file_stats` for
what the runner does then.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from kfp_gpu.mpi.local import plan as lp
from kfp_gpu.mpi.local.model import LocalPlan

log = logging.getLogger(__name__)

#: Owner of the files of a Secret or ConfigMap volume: kubelet writes them itself, as root
#: (kubernetes ``pkg/volume/util/atomic_writer.go`` via ``pkg/volume/secret/secret.go``
#: SetUpAt), and an ``fsGroup`` changes only their group (``pkg/volume/volume_linux.go``
#: changeFilePermission: ``os.Chown(filename, int(stat.Uid), fsGroup)``).
SECRET_UID = 0
#: What kubelet ORs into the mode of every file of a read-only volume (Secret and ConfigMap
#: volumes report ``ReadOnly: true``, ``pkg/volume/secret/secret.go`` GetAttributes) when
#: the pod has an ``fsGroup``: ``roMask`` in ``pkg/volume/volume_linux.go``
#: changeFilePermission (``info.Mode()|mask``; ``rwMask`` 0660 for writable volumes).
#: mpi-operator's 0600 for ``/root/.ssh`` thus becomes 0640.
FS_GROUP_READ_ONLY_MASK = 0o440
#: The mode ssh and sshd accept for a private key that their own user owns: nobody else may
#: read it (openssh-portable ``authfile.c`` sshkey_perm_ok: ``st_uid == getuid()`` and
#: ``st_mode & 077`` -> "UNPROTECTED PRIVATE KEY FILE", the key is ignored).
OWNER_ONLY = 0o600


def secret_file_mode(mode: int, fs_group: int | None) -> int:
    """The mode a pod sees on a Secret volume file whose ``defaultMode``/``items[].mode`` is
    ``mode``: with an ``fsGroup``, group read is added (:data:`FS_GROUP_READ_ONLY_MASK`)."""
    return mode if fs_group is None else mode | FS_GROUP_READ_ONLY_MASK


def container_uids(plan: LocalPlan) -> set[int]:
    """The uids the plan's containers run as, where the pod spec names one (``runAsUser``:
    ``Security.user`` ``uid[:gid]``); a container left to its image's user is not counted."""
    users = (spec.security.user for spec in (*plan.workers, plan.launcher))
    return {int(u.split(":")[0]) for u in users if u is not None}


def secret_file_stats(plan: LocalPlan, euid: int) -> dict[str, tuple[int, int | None,
                                                                   int | None]]:
    """What :func:`write_workspace` gives each ssh file: name -> (mode, uid, gid), pure;
    ``None`` = left as created (the caller's).

    A caller running as root (``euid`` 0) gets kubelet's result: uid root
    (:data:`SECRET_UID`), gid the pod's ``fsGroup`` (``plan.ssh.gid``) or root, mode
    :func:`secret_file_mode` of the plan's. A caller that is not root cannot give files
    to root, so the files stay its own (gid ``fsGroup`` when set) and:

    - when a container runs as the caller's uid, ssh in it would own the key: ssh ignores
      the key and sshd refuses it as a host key unless nobody else may read it, so the files
      get :data:`OWNER_ONLY` (0600) instead; every other container then has to be root;
    - otherwise the plan's modes, as kubelet's (the containers' users read them as others).

    Raises:
        PermissionError: a non-root caller whose uid is one container's while another
            container runs as a second non-root uid (that one could not read 0600 files);
            the message names the fix (run the local runner as root).
    """
    gid = plan.ssh.gid
    modes = {n: secret_file_mode(m, gid) for n, m in plan.ssh.file_modes().items()}
    if euid == 0:
        return {n: (m, SECRET_UID, SECRET_UID if gid is None else gid)
                for n, m in modes.items()}
    uids = container_uids(plan)
    if euid in uids:
        others = sorted(uids - {euid, 0})
        if others:
            raise PermissionError(
                f"the local runner runs as uid {euid}, which a container of {plan.name} runs "
                f"as too, so the ssh files must be its own and mode 0600, which uid "
                f"{others[0]} (another container's user) cannot read; kubelet makes them "
                "root's: run the local runner as root (e.g. sudo), or as a uid no container "
                "uses")
        return {n: (OWNER_ONLY, None, gid) for n in modes}
    return {n: (m, None, gid) for n, m in modes.items()}


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


def write(path: Path, data: bytes | str, mode: int, uid: int | None = None,
          gid: int | None = None) -> None:
    """Write ``data`` to ``path`` with ``mode``, owner ``uid`` and group ``gid`` (``None``:
    left as created).

    Raises:
        PermissionError: ``uid``/``gid`` given and the caller may not give the file that
            owner or group (not root, and for ``gid`` not a member).
    """
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if uid is not None or gid is not None:
        os.chown(path, -1 if uid is None else uid, -1 if gid is None else gid)
    path.chmod(mode)


def _volume_owner() -> int | None:
    """:data:`SECRET_UID` for a root caller, else None (a non-root caller keeps its own)."""
    return SECRET_UID if os.geteuid() == 0 else None


def write_discover_hosts(workspace: Path, plan: LocalPlan, running: list[str]) -> None:
    """(Re)write ``config/discover_hosts.sh`` listing the running Workers (MPIJob only)."""
    if not plan.controller.discover_hosts:
        return
    path = workspace / "config" / lp.DISCOVER_HOSTS
    if path.exists():
        path.chmod(0o755)
    owner = _volume_owner()
    write(path, lp.discover_hosts(plan.name, plan.namespace, running,
                                  plan.launcher_as_worker), 0o555, owner, owner)


def write_workspace(plan: LocalPlan) -> Path:
    """A new workspace folder (0755, under the system temp dir) for ``plan``; see the
    module docstring. The caller removes it.

    Raises:
        PermissionError: see :func:`secret_file_stats` and :func:`write` (nothing is left
            behind then).
    """
    euid = os.geteuid()
    stats = secret_file_stats(plan, euid)
    if euid != 0:
        log.warning("not root: the ssh files of %s are owned by uid %d, not by root as "
                    "kubelet's (a non-root caller cannot chown to root); a container whose "
                    "image runs as uid %d will see its key refused", plan.name, euid, euid)
    ws = Path(tempfile.mkdtemp(prefix=f"kfp-gpu-{plan.kind.lower()}-{plan.name}-"))
    try:
        _fill(ws, plan, stats)
    except BaseException:
        shutil.rmtree(ws, ignore_errors=True)
        raise
    return ws


def _fill(ws: Path, plan: LocalPlan,
          stats: dict[str, tuple[int, int | None, int | None]]) -> None:
    ws.chmod(0o755)
    (ws / "ssh").mkdir(mode=0o755)
    private, public = ssh_key_pair()
    data = {"id_rsa": private, "id_rsa.pub": public, "authorized_keys": public}
    for name, (mode, uid, gid) in stats.items():
        write(ws / "ssh" / name, data[name], mode, uid, gid)
    (ws / "config").mkdir(mode=0o755)
    owner = _volume_owner()
    write(ws / "config" / lp.HOSTFILE, plan.hostfile, 0o444, owner, owner)
    write_discover_hosts(ws, plan, [])
    for spec in (*plan.workers, plan.launcher):
        for m in spec.mounts:
            if m.kind == "emptyDir":
                d = ws / "emptydir" / m.source
                d.mkdir(parents=True, exist_ok=True)
                d.chmod(0o777)  # kubelet creates emptyDir folders 0777
