"""Where the MPIJob/TrainJob ranks read and write (cluster execution): the work_dir and
the checkpoint folder, from the component's parameters and the task's PVC mounts.

Re-exported by :mod:`.run_training` (``rt.resolve_work_dir`` ...).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kfp_gpu.inputs import storage

log = logging.getLogger(__name__)

#: Where rank 0 keeps its checkpoints when the work_dir is ``s3://`` and no checkpoint_dir
#: is given: TensorFlow 2.18 writes checkpoints through its own file systems and has none
#: for s3:// (it moved to tensorflow-io: "File system scheme 's3' not implemented"), so
#: they stay in rank 0's pod (not resumable across pods; give a PVC checkpoint_dir for that).
POD_CHECKPOINTS = "/tmp/kfp-gpu-checkpoints"


def resolve_work_dir(work_dir: str, model_uri: str, mounts: Sequence, default_name: str,
                     what: str = "work_dir") -> str:
    """Where the Workers read the staged data and rank 0 writes model, checkpoints and
    ``metrics.json`` (cluster execution); no trailing ``/``. ``what`` names the setting in
    errors (``checkpoint_dir`` is checked the same way when given).

    Accepted: a ``gs://`` or ``s3://`` URI (``s3://``: not for ``checkpoint_dir``, see
    :data:`POD_CHECKPOINTS`), or an absolute path at or under the ``mount_path`` of a
    writable PVC in ``mounts`` (mounted on this task's pod and on the Workers at the same
    path). Empty: ``<model_uri>-work`` when the model artifact is on ``gs://`` or
    ``s3://``, else ``<first writable PVC mount>/<default_name>`` (the MPIJob name: one
    directory per run and task). An ``s3://`` place needs the AWS credentials on this task
    (``kfp-gpu compile --secret-env SECRET``: they reach the MPIJob/TrainJob pods too,
    :func:`worker_settings`).

    Raises:
        ValueError: a local ``work_dir`` outside every writable PVC mount (it would exist
            only in this pod), no URI and no PVC to default to, or an ``s3://``
            checkpoint_dir; the message names the fix (``kfp-gpu compile --pvc`` /
            ``kfp.kubernetes.mount_pvc`` on the task, or a ``gs://``/``s3://`` work_dir).
    """
    fix = ("mount a ReadWriteMany PVC on the task (kfp-gpu compile --pvc CLAIM:/mnt/shared, "
           f"or kfp.kubernetes.mount_pvc) and set {what} under that path (or leave it "
           f"empty), or use a gs:// or s3:// {what}")
    writable = [m for m in mounts if not m.read_only]
    if what == "checkpoint_dir" and storage.is_s3(work_dir):
        raise ValueError(f"checkpoint_dir {work_dir!r}: TensorFlow writes checkpoints and has "
                         "no s3:// file system here; use a PVC path or gs://, or leave it "
                         "empty")
    if not work_dir:
        if storage.is_remote(model_uri):
            return model_uri.rstrip("/") + "-work"
        if writable:
            return f"{writable[0].mount_path.rstrip('/')}/{default_name}"
        raise ValueError(f"cluster execution needs a {what} the Workers can reach; the model "
                         f"artifact {model_uri!r} is not on gs:// or s3:// and no PVC is "
                         f"mounted: {fix}")
    if storage.is_remote(work_dir):
        return work_dir.rstrip("/")
    import posixpath

    if not work_dir.startswith("/"):
        raise ValueError(f"{what} {work_dir!r} is neither gs://, s3:// nor an absolute path: "
                         f"{fix}")
    norm = posixpath.normpath(work_dir)
    if not any(m.covers(norm) for m in writable):
        shown = ", ".join(f"{m.mount_path} ({m.claim_name}{', read-only' if m.read_only else ''})"
                          for m in mounts) or "none"
        raise ValueError(f"{what} {work_dir!r} is not under a writable PVC mounted on the "
                         f"task (mounted: {shown}), so the Workers cannot see it: {fix}")
    return norm


def checkpoint_dir_for(work_dir: str, checkpoint_dir: str) -> str:
    """The trainer's ``--checkpoint-dir``: ``checkpoint_dir`` when given; for an ``s3://``
    ``work_dir`` without one, :data:`POD_CHECKPOINTS` (TensorFlow cannot write the default
    ``<work_dir>/checkpoints`` there); else ``""`` (the trainer's default)."""
    if checkpoint_dir:
        return checkpoint_dir
    if storage.is_s3(work_dir):
        log.warning("work_dir %s is on s3://: checkpoints stay in rank 0's pod (%s), so a new "
                    "pod starts afresh; give checkpoint_dir on a PVC to resume", work_dir,
                    POD_CHECKPOINTS)
        return POD_CHECKPOINTS
    return ""
