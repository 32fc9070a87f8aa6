"""Create the MPIJob (or TrainJob: the job's kind picks the :mod:`kfp_gpu.mpi.spec.backends`
backend), or re-attach to the one an earlier attempt created; record it.

Re-attach is the deterministic name plus ``409 AlreadyExists``: names are fixed per run and
task (:func:`kfp_gpu.mpi.spec.names.job_name`), so a retried task POSTs the same name, gets
409 and GETs the job its earlier attempt made. Never a second create. A Failed job found
this way is deleted and created again, so that a retry of the task trains again.

Not the record file: GCPC's remote runners re-read the record an earlier attempt wrote, but
a KFP retry (Argo ``retryStrategy``) runs a NEW pod whose output paths are empty
(argoproj/argo-workflows ``workflow/controller/operator.go`` ``processNodeRetries`` makes a
new child node, hence a new pod, per attempt; nothing of a failed attempt's outputs is
handed on), so the record never reaches the retry.
``{"apiVersion", "kind", "namespace", "name", "uid"}`` is still written atomically
(:func:`kfp_gpu.inputs.storage.write_text`) as the task's ``mpijob`` output, right after the
create or attach and before the watch.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping

from kfp_gpu.inputs import storage
from kfp_gpu.mpi.launch.jobs_api import MPIJobClient
from kfp_gpu.mpi.launch.records import ResourceRecord, phase
from kfp_gpu.mpi.spec import backends

log = logging.getLogger(__name__)


def job_identity(job: Mapping) -> tuple[str, str]:
    """``(namespace, name)`` of an MPIJob or TrainJob dict.

    Raises:
        ValueError: ``job`` is neither a ``kubeflow.org/v2beta1`` MPIJob nor a
            ``trainer.kubeflow.org/v1alpha1`` TrainJob, or has no name.
    """
    kind = backends.for_object(job).kind
    meta = job.get("metadata") or {}
    if not meta.get("name"):
        raise ValueError(f"the {kind} needs metadata.name (kfp_gpu.mpi.spec.names.job_name)")
    return meta.get("namespace") or "default", meta["name"]


def _create_or_get(jobs: MPIJobClient, job: Mapping, ns: str, name: str) -> tuple[dict, bool]:
    from kubernetes.client.exceptions import ApiException

    try:
        obj = jobs.create(ns, job)
        log.info("created %s %s/%s", jobs.kind, ns, name)
        return obj, False
    except ApiException as e:
        if e.status != 409:
            raise
    obj = jobs.get(ns, name)
    if obj is None:  # deleted between our POST and GET: try once more
        return jobs.create(ns, job), False
    log.info("%s %s/%s exists (409); re-attaching", jobs.kind, ns, name)
    return obj, True


def replace_failed(jobs: MPIJobClient, job: Mapping, ns: str, name: str, *,
                   timeout_s: float = 120.0, poll_s: float = 2.0,
                   already_deleting: bool = False) -> dict:
    """Delete the Failed MPIJob ``ns/name`` (Foreground), wait until it is gone (at most
    ``timeout_s``), then create ``job``. With ``already_deleting`` (the object carries a
    ``deletionTimestamp``: someone, e.g. a cancelled earlier attempt, is deleting it) no
    DELETE is sent; the wait and the create are the same.

    Raises:
        TimeoutError: the old MPIJob is still there after ``timeout_s``.
    """
    what = "is being deleted" if already_deleting else "has Failed; deleting it"
    log.warning("%s %s/%s of an earlier attempt %s; creating a new one once it is gone",
                jobs.kind, ns, name, what)
    if not already_deleting:
        jobs.delete(ns, name)
    end = time.monotonic() + timeout_s
    while jobs.get(ns, name) is not None:
        if time.monotonic() >= end:
            raise TimeoutError(f"the old {jobs.kind} {ns}/{name} is still "
                               f"there {timeout_s:.0f}s after its delete")
        jobs.sleep(poll_s)
    new_ns, new_name = job_identity(job)
    obj = jobs.create(new_ns, job)
    log.info("created %s %s/%s in place of the old one", jobs.kind, new_ns, new_name)
    return obj


def create_or_attach(jobs: MPIJobClient, job: Mapping, record_path: str | os.PathLike, *,
                     replace_timeout_s: float = 120.0, poll_s: float = 2.0
                     ) -> tuple[dict, bool]:
    """Return ``(job object, reattached)`` and write the record to ``record_path``.

    Raises:
        ValueError: ``job`` is not a job of ``jobs.backend``'s kind, or has no name.
        TimeoutError: a Failed MPIJob did not go within ``replace_timeout_s``.
        kubernetes.client.exceptions.ApiException: non-transient API errors (403, 422...).
    """
    ns, name = job_identity(job)
    if not jobs.backend.matches(job):
        raise ValueError(f"this client follows {jobs.backend.api_version} {jobs.kind}, got "
                         f"{job.get('apiVersion')} {job.get('kind')}")
    obj, reattached = _create_or_get(jobs, job, ns, name)
    meta = obj.get("metadata") or {}
    deleting = bool(meta.get("deletionTimestamp"))
    if reattached and (deleting or phase(obj) == "Failed"):
        # The name is deterministic per run and task and a finished MPIJob stays for
        # ttlSecondsAfterFinished: re-attaching to a Failed one would fail every retry, and
        # one being deleted (deletionTimestamp set) would vanish under the watch.
        obj = replace_failed(jobs, job, meta.get("namespace") or ns, meta.get("name") or name,
                             timeout_s=replace_timeout_s, poll_s=poll_s,
                             already_deleting=deleting)
        reattached = False
    storage.write_text(record_path, ResourceRecord.of(obj).to_json())
    return obj, reattached
