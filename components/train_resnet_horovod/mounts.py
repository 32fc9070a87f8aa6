"""The task's volumes as the job's pods get them (cluster execution): its PVCs
(:func:`pvc_mounts`, on the Workers) and Secrets (:func:`secret_mounts`, on the Launcher and
every Worker), read from the Kubernetes JSON of the KFP ``TaskConfig`` (kfp 2.17,
``kfp/dsl/task_config.py``), and the check that ``GOOGLE_APPLICATION_CREDENTIALS`` names a
mounted file (:func:`unmounted_credentials`).

Re-exported by :mod:`.run_training` (``rt.pvc_mounts`` ...).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

#: Volume kinds the job's pods get from the task (:func:`pvc_mounts`, :func:`secret_mounts`).
PASSED_VOLUME_KINDS = ("persistentVolumeClaim", "secret")


def _mounted(volumes: Sequence[Mapping] | None,
             volume_mounts: Sequence[Mapping] | None) -> list[tuple[Mapping, Mapping]]:
    """(mount, volume) pairs of the task's mounts, in mount order.

    Raises:
        ValueError: a mount names no volume in ``volumes``.
    """
    by_name = {v.get("name"): v for v in volumes or []}
    out = []
    for m in volume_mounts or []:
        vol = by_name.get(m.get("name"))
        if vol is None:
            raise ValueError(f"volume mount {m!r} names no volume of the task; accepted: "
                             "mounts of volumes listed in TaskConfig.volumes")
        out.append((m, vol))
    return out


def pvc_mounts(volumes: Sequence[Mapping] | None,
               volume_mounts: Sequence[Mapping] | None) -> tuple:
    """The PVC mounts of a task, as ``kfp_gpu.mpi.spec.volumes.PvcMount`` tuples.

    ``volumes`` / ``volume_mounts`` are the task's Kubernetes Volume / VolumeMount lists as
    the KFP driver passes them through (``TaskConfig.volumes`` / ``.volume_mounts``; for
    ``kfp.kubernetes.mount_pvc`` the driver names the volume after the claim, backend
    ``driver/k8s.go`` ``makeVolumeMountPatch``). Each mount of a volume with a
    ``persistentVolumeClaim`` source becomes one ``PvcMount(claim, mountPath, readOnly,
    subPath)`` (read-only if the mount or the claim source says so). Secret volumes are
    :func:`secret_mounts`'; mounts of other kinds (ConfigMaps, emptyDirs) are left out,
    with a warning: the job's pods get only PVCs and Secrets.

    Raises:
        ValueError: a mount names no volume in ``volumes``, or a PvcMount is invalid.
    """
    from kfp_gpu.mpi.spec.volumes import PvcMount

    out = []
    for m, vol in _mounted(volumes, volume_mounts):
        pvc = vol.get("persistentVolumeClaim")
        if not pvc:
            if not any(k in vol for k in PASSED_VOLUME_KINDS):
                log.warning("volume %r (%s) is neither a PVC nor a Secret; not mounted on "
                            "the job's pods", vol.get("name"),
                            ", ".join(k for k in vol if k != "name"))
            continue
        out.append(PvcMount(
            claim_name=pvc.get("claimName", ""), mount_path=m.get("mountPath", ""),
            read_only=bool(m.get("readOnly") or pvc.get("readOnly")),
            sub_path=m.get("subPath", "") or "").validate())
    return tuple(out)


def secret_mounts(volumes: Sequence[Mapping] | None,
                  volume_mounts: Sequence[Mapping] | None) -> tuple:
    """The Secret mounts of a task, as ``kfp_gpu.mpi.spec.volumes.SecretMount`` tuples.

    ``volumes`` / ``volume_mounts`` as in :func:`pvc_mounts`. For
    ``kfp.kubernetes.use_secret_as_volume`` the KFP 2.17 driver names the volume after
    the Secret and passes ``{name, secret: {secretName, optional}}`` and ``{name,
    mountPath}`` (backend ``driver/k8s.go`` ``extendPodSpecPatch``). Each mount of a volume
    with a ``secret`` source becomes one ``SecretMount(secretName, mountPath, optional)``:
    the job mounts it, read-only, on the Launcher and every Worker at the same path.

    Raises:
        ValueError: a mount names no volume in ``volumes``, or a SecretMount is invalid.
    """
    from kfp_gpu.mpi.spec.volumes import SecretMount

    out = []
    for m, vol in _mounted(volumes, volume_mounts):
        source = vol.get("secret")
        if not source:
            continue
        out.append(SecretMount(secret_name=source.get("secretName", ""),
                               mount_path=m.get("mountPath", ""),
                               optional=bool(source.get("optional"))).validate())
    return tuple(out)


def unmounted_credentials(env: Mapping[str, str], volumes: Sequence, secret_volumes: Sequence
                          ) -> str | None:
    """The ``GOOGLE_APPLICATION_CREDENTIALS`` path in ``env`` when no mount of the job's
    pods holds it (no :class:`~kfp_gpu.mpi.spec.volumes.SecretMount` /
    :class:`~kfp_gpu.mpi.spec.volumes.PvcMount` at or above it), else None. google-auth
    reads the file it names (``google/auth/_default.py``
    ``_get_explicit_environ_credentials``); set on the task with ``compile --secret-volume
    SECRET:/dir:KEY`` it lies in that Secret's folder, which the job mounts."""
    from kfp_gpu.dsl.task_settings import GOOGLE_CREDENTIALS_ENV

    path = posixpath.normpath(env.get(GOOGLE_CREDENTIALS_ENV, "") or ".")
    if path == "." or any(path == v.mount_path or path.startswith(v.mount_path + "/")
                          for v in (*volumes, *secret_volumes)):
        return None
    return path
