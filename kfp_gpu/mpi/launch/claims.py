"""The job's ResourceClaimTemplate (``dra`` GPU requests): checked before the job is created,
created beside it once it exists, owned by it (:mod:`kfp_gpu.mpi.spec.claims` says why
the launcher does this and what the job carries).

Requests (``resource.k8s.io/v1`` ``resourceclaimtemplates``, through ``CustomObjectsApi``,
which serves any group's namespaced objects; each with the client's request timeout and
retries, :class:`kfp_gpu.mpi.launch.jobs_api.MPIJobClient`): ``get`` before the job's
create, ``create`` after it, ``delete`` of a template an earlier incarnation of the same job
left (its owner is gone and garbage collection would delete it under the new job). RBAC:
manifests/rbac/role.yaml (``resourceclaimtemplates``: create, delete, get).

A cluster that does not serve ``resource.k8s.io/v1`` drops a pod's ``resourceClaims``
silently (the API server clears fields of disabled features) and the Workers would run
without a GPU, so the check before the create refuses that in one line.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping

from kfp_gpu.gpu import claim
from kfp_gpu.mpi.spec import claims

log = logging.getLogger(__name__)

GROUP, VERSION = claim.RESOURCE_API_VERSION.split("/")


class ClaimTemplateConflict(ValueError):
    """The namespace holds a template of that name for another request (one line)."""


def _api(jobs):
    from kubernetes import client

    return client.CustomObjectsApi(jobs.api_client)


def _get(jobs, ns: str, name: str) -> dict | None:
    """The template, or None when it does not exist.

    Raises:
        RuntimeError: the API server does not serve ``resource.k8s.io/v1`` (a 404 that is
            not a Status about this object).
    """
    from kubernetes.client.exceptions import ApiException

    try:
        return jobs._call("get resourceclaimtemplate", _api(jobs).get_namespaced_custom_object,
                          GROUP, VERSION, ns, claim.PLURAL, name)
    except ApiException as e:
        if e.status != 404:
            raise
        try:
            details = json.loads(e.body or "{}").get("details") or {}
        except ValueError:
            details = {}
        if details.get("name") == name:
            return None
        raise RuntimeError(
            f"the cluster does not serve {claim.RESOURCE_API_VERSION} (Dynamic Resource "
            "Allocation, Kubernetes >= 1.34): the job's resourceClaims would be dropped and "
            "its pods would run without a GPU; use a device-plugin request (gpu:N, mig:P) or "
            "a cluster with DRA and NVIDIA's DRA driver (kfp-gpu doctor --gpu dra:...)"
        ) from None


def _stale(have: Mapping, job: Mapping) -> bool:
    """True when ``have`` is owned by an earlier job of the same kind and name (another
    uid): a job that was replaced, whose template garbage collection is about to delete."""
    meta = job.get("metadata") or {}
    owners = (have.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == job.get("kind") and o.get("name") == meta.get("name")
               and o.get("uid") != meta.get("uid") for o in owners)


def _owned_by(have: Mapping, job: Mapping) -> bool:
    uid = (job.get("metadata") or {}).get("uid")
    return any(o.get("uid") == uid for o in (have.get("metadata") or {}).get(
        "ownerReferences") or [])


def _conflict(have: Mapping, want: Mapping) -> ClaimTemplateConflict:
    meta = have.get("metadata") or {}
    owners = ", ".join(f"{o.get('kind')} {o.get('name')}"
                       for o in meta.get("ownerReferences") or []) or "no owner"
    why = (f"the TrainJob runtime {claims.DRA_RUNTIME} names one template per namespace "
           "(Kubeflow Trainer v2.3 has no per-job resourceClaims, kubeflow/trainer PR 4027): "
           "wait for that job to end, use another namespace, the same request, or backend "
           "'mpijob'" if meta.get("name") == claims.DRA_RUNTIME_TEMPLATE
           else "delete it if nothing uses it, or rename the job")
    return ClaimTemplateConflict(
        f"ResourceClaimTemplate {meta.get('namespace')}/{meta.get('name')} exists for "
        f"another GPU request (owned by {owners}); {why}")


def check_before_create(jobs, job: Mapping) -> None:
    """Before a ``dra`` job is created: DRA is served, and the template name is free, held
    by the same request, or left by an earlier incarnation of this job. Nothing for jobs
    without the template annotation.

    Raises:
        RuntimeError: ``resource.k8s.io/v1`` is not served.
        ClaimTemplateConflict: a template of that name holds another request.
        kubernetes.client.exceptions.ApiException: 403 (no ``get``) and other API errors.
    """
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(
        claims.TEMPLATE_ANNOTATION)
    if raw is None:
        return
    value = json.loads(raw)
    ns = (job.get("metadata") or {}).get("namespace") or "default"
    have = _get(jobs, ns, value["name"])
    # The job has no uid yet: a template owned by a job of its kind and name is this job's
    # (a re-attach) or an earlier incarnation's; both are handled after the create.
    if have is not None and have.get("spec") != value["spec"] and not _stale(have, job):
        raise _conflict(have, value)


def _create(jobs, want: dict) -> dict:
    ns = want["metadata"]["namespace"]
    obj = jobs._call("create resourceclaimtemplate",
                     _api(jobs).create_namespaced_custom_object, GROUP, VERSION, ns,
                     claim.PLURAL, want)
    log.info("created ResourceClaimTemplate %s/%s owned by %s %s", ns,
             want["metadata"]["name"], want["metadata"]["ownerReferences"][0]["kind"],
             want["metadata"]["ownerReferences"][0]["name"])
    return obj


def _replace(jobs, have: Mapping, want: dict, timeout_s: float, poll_s: float) -> dict:
    """Delete ``have`` (an earlier incarnation's), wait until it is gone, create ``want``."""
    from kubernetes.client.exceptions import ApiException

    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    log.info("ResourceClaimTemplate %s/%s belongs to an earlier %s %s; replacing it", ns, name,
             want["metadata"]["ownerReferences"][0]["kind"], name)
    try:
        jobs._call("delete resourceclaimtemplate", _api(jobs).delete_namespaced_custom_object,
                   GROUP, VERSION, ns, claim.PLURAL, name)
    except ApiException as e:
        if e.status != 404:
            raise
    end = time.monotonic() + timeout_s
    while _get(jobs, ns, name) is not None:
        if time.monotonic() >= end:
            raise TimeoutError(f"ResourceClaimTemplate {ns}/{name} is still there "
                               f"{timeout_s:.0f}s after its delete")
        jobs.sleep(poll_s)
    return _create(jobs, want)


def ensure_template(jobs, job: Mapping, *, timeout_s: float = 60.0,
                    poll_s: float = 1.0) -> dict | None:
    """Create the template the created (or re-attached) ``job`` needs, owned by it
    (:func:`kfp_gpu.mpi.spec.claims.template_for`); keep one it already owns or one that
    holds the same request; replace one an earlier job of that name left. Returns the
    template, None for a job without one.

    Raises:
        ClaimTemplateConflict: the name holds another request.
        TimeoutError: an earlier incarnation's template did not go within ``timeout_s``.
        kubernetes.client.exceptions.ApiException: 403 (the Role lacks create/delete) and
            other API errors.
    """
    from kubernetes.client.exceptions import ApiException

    want = claims.template_for(job)
    if want is None:
        return None
    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    try:
        return _create(jobs, want)
    except ApiException as e:
        if e.status != 409:
            raise
    have = _get(jobs, ns, name)
    if have is None:
        return _create(jobs, want)
    if _owned_by(have, job):
        return have
    if _stale(have, job):
        return _replace(jobs, have, want, timeout_s, poll_s)
    if have.get("spec") != want["spec"]:
        raise _conflict(have, want)
    log.info("ResourceClaimTemplate %s/%s holds the same request; shared", ns, name)
    return have
