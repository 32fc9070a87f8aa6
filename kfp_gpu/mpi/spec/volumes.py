"""Volumes of the job's pods: shared PersistentVolumeClaims on the Workers
(:class:`PvcMount`) and Secrets on the Launcher and the Workers (:class:`SecretMount`).

Kubernetes form: core/v1 ``PersistentVolumeClaimVolumeSource`` / ``SecretVolumeSource``
(pod ``volumes``) and ``VolumeMount`` (container ``volumeMounts``), kubernetes/api
``core/v1/types.go``.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kfp_gpu.mpi.spec.names import DNS1123_LABEL, DNS1123_SUBDOMAIN

#: Mount paths a PVC may not take (nor sit above or below): the Memory-backed ``/dev/shm``
#: of the Workers and the operator's hostfile ConfigMap on the Launcher (``/etc/mpi``,
#: mpi-operator ``configMountPath``). ``ssh_auth_mount_path`` is checked per job.
RESERVED_MOUNT_PATHS = ("/dev/shm", "/etc/mpi")


def check_mount_path(path: str, what: str) -> str:
    """``path`` if it is a normalised absolute path other than ``/`` without ``:``.

    Raises:
        ValueError: naming ``what`` (e.g. ``PVC mount_path for claim 'x'``) and the form.
    """
    if (not isinstance(path, str) or not path.startswith("/") or path == "/"
            or ":" in path or posixpath.normpath(path) != path):
        raise ValueError(f"invalid {what} {path!r}: accepted are normalised absolute paths "
                         "other than '/' without ':' or '..', e.g. '/mnt/shared'")
    return path


def nested(a: str, b: str) -> bool:
    """True if ``a`` and ``b`` are the same path or one lies under the other."""
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _volume_name(prefix: str, name: str) -> str:
    """``<prefix><name>`` when that is a DNS-1123 label (63 characters), else ``<prefix>``
    + the first 12 hex of sha256(name)."""
    full = f"{prefix}{name}"
    if len(full) <= 63 and DNS1123_LABEL.match(full):
        return full
    return prefix + hashlib.sha256(name.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class PvcMount:
    """A PersistentVolumeClaim mounted into the Worker containers.

    The Kubernetes form is a pod ``volumes`` entry ``{name, persistentVolumeClaim:
    {claimName}}`` plus a container ``volumeMounts`` entry ``{name, mountPath[, readOnly]
    [, subPath]}`` (core/v1 ``PersistentVolumeClaimVolumeSource`` / ``VolumeMount``). This
    is what ``kfp.kubernetes.mount_pvc(task, pvc_name=..., mount_path=..., sub_path=...)``
    puts on a KFP task; :func:`kfp_gpu.components.train_resnet_horovod.run_training.pvc_mounts`
    reads it back from the task's ``dsl.TaskConfig``.

    Attributes:
        claim_name: name of an existing PVC in the MPIJob's namespace (DNS-1123 subdomain,
            at most 253 characters). Several Workers mount it at once, so it must be
            ``ReadWriteMany`` (or ``ReadOnlyMany`` for ``read_only``) unless ``workers=1``.
        mount_path: absolute, normalised path in the container (no ``..``, no ``:``).
        read_only: mount read-only (``volumeMounts[].readOnly``).
        sub_path: path inside the volume to mount instead of its root (relative, no ``..``);
            empty = the root.
    """

    claim_name: str
    mount_path: str
    read_only: bool = False
    sub_path: str = ""

    def volume_name(self) -> str:
        """Pod volume name: ``pvc-<claim>`` when that is a DNS-1123 label (63 characters),
        else ``pvc-<first 12 hex of sha256(claim)>``; never one of the names the builder or
        the operator use (``dshm``, ``ssh-auth``, ``mpi-job-config``)."""
        return _volume_name("pvc-", self.claim_name)

    def validate(self) -> PvcMount:
        """Check the claim name and paths; return ``self``.

        Raises:
            ValueError: naming the field and what is accepted.
        """
        claim = self.claim_name
        if not isinstance(claim, str) or len(claim) > 253 or not DNS1123_SUBDOMAIN.match(claim):
            raise ValueError(f"invalid PVC claim_name {claim!r}: accepted are DNS-1123 "
                             "subdomains (lower-case letters, digits, '-', '.'; at most 253 "
                             "characters), the metadata.name of an existing PVC")
        check_mount_path(self.mount_path, f"PVC mount_path for claim {claim!r}")
        sub = self.sub_path
        if not isinstance(sub, str) or sub.startswith("/") or ".." in sub.split("/"):
            raise ValueError(f"invalid PVC sub_path {sub!r} for claim {claim!r}: accepted are "
                             "relative paths without '..' (empty = the volume's root)")
        if not isinstance(self.read_only, bool):
            raise ValueError(f"PVC read_only must be a bool: {self.read_only!r}")  # noqa: TRY004
        return self

    def volume(self) -> dict:
        """The pod ``volumes`` entry."""
        return {"name": self.volume_name(),
                "persistentVolumeClaim": {"claimName": self.claim_name}}

    def volume_mount(self) -> dict:
        """The container ``volumeMounts`` entry."""
        out: dict[str, Any] = {"name": self.volume_name(), "mountPath": self.mount_path}
        if self.read_only:
            out["readOnly"] = True
        if self.sub_path:
            out["subPath"] = self.sub_path
        return out

    def covers(self, path: str) -> bool:
        """True if the absolute ``path`` lies at or under :attr:`mount_path`."""
        norm = posixpath.normpath(path)
        return norm == self.mount_path or norm.startswith(self.mount_path.rstrip("/") + "/")


@dataclass(frozen=True)
class SecretMount:
    """A Kubernetes Secret mounted, read-only, into the Launcher and every Worker container
    at the same path: each key of the Secret is a file under :attr:`mount_path`.

    The Kubernetes form is a pod ``volumes`` entry ``{name, secret: {secretName[,
    optional]}}`` (core/v1 ``SecretVolumeSource``; files mode 0644, the default
    ``defaultMode``, so the non-root ranks can read them) plus a container ``volumeMounts``
    entry ``{name, mountPath, readOnly: true}``. This is what
    ``kfp.kubernetes.use_secret_as_volume(task, secret_name=..., mount_path=...,
    optional=...)`` (kfp-kubernetes ``kfp/kubernetes/secret.py``; ``kfp-gpu compile
    --secret-volume``) puts on a KFP task; the KFP 2.17 driver hands it to the component as
    a volume named after the Secret (``backend/src/v2/driver/k8s.go``
    ``extendPodSpecPatch``), which
    :func:`kfp_gpu.components.train_resnet_horovod.run_training.secret_mounts` reads back.

    Attributes:
        secret_name: name of a Secret in the job's namespace (DNS-1123 subdomain, at most
            253 characters).
        mount_path: absolute, normalised path in the container (no ``..``, no ``:``).
        optional: the pods start even when the Secret does not exist
            (``secret.optional``); the folder is then empty.
    """

    secret_name: str
    mount_path: str
    optional: bool = False

    def volume_name(self) -> str:
        """Pod volume name: ``secret-<name>`` when that is a DNS-1123 label (63
        characters), else ``secret-<first 12 hex of sha256(name)>``; never one of the names
        the builders or the operators use (``dshm``, ``ssh-auth``, ``mpi-job-config``,
        ``mpi-ssh-auth``, ``mpi-hostfile``) nor a :class:`PvcMount`'s (``pvc-...``)."""
        return _volume_name("secret-", self.secret_name)

    def validate(self) -> SecretMount:
        """Check the Secret name and the path; return ``self``.

        Raises:
            ValueError: naming the field and what is accepted.
        """
        name = self.secret_name
        if not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            raise ValueError(f"invalid Secret name {name!r}: accepted are DNS-1123 subdomains "
                             "(lower-case letters, digits, '-', '.'; at most 253 characters), "
                             "the metadata.name of a Secret in the job's namespace")
        check_mount_path(self.mount_path, f"Secret mount_path for Secret {name!r}")
        if not isinstance(self.optional, bool):
            raise ValueError(f"Secret optional must be a bool: {self.optional!r}")  # noqa: TRY004
        return self

    def volume(self) -> dict:
        """The pod ``volumes`` entry."""
        source: dict[str, Any] = {"secretName": self.secret_name}
        if self.optional:
            source["optional"] = True
        return {"name": self.volume_name(), "secret": source}

    def volume_mount(self) -> dict:
        """The container ``volumeMounts`` entry (always read-only)."""
        return {"name": self.volume_name(), "mountPath": self.mount_path, "readOnly": True}


def secret_volumes(mounts: Sequence[SecretMount]) -> list[dict]:
    """The pod ``volumes`` entries of ``mounts`` (core/v1 ``SecretVolumeSource``): one per
    volume name, so a Secret mounted at two paths is one volume."""
    out: dict[str, dict] = {}
    for m in mounts:
        out.setdefault(m.volume_name(), m.volume())
    return list(out.values())
