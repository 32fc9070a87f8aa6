"""The job's ResourceClaimTemplate (``dra`` GPU requests): checked before the job is created,
created beside it once it exists, owned by it (:mod:`kfp_gpu.mpi.spec.claims` says why
the launcher does this and what the job carries).

Requests (``resource.k8s.io/v1`` ``resourceclaimtemplates``, through ``CustomObjectsApi``,
which serves any group's namespaced objects; each with the client's request timeout and
retries, :class:`kfp_gpu.mpi.launch.jobs_api.MPIJobClient`): ``get`` before the job's
create, ``create`` after it, ``delete`` of a template an earlier incarnation of the same job
left (its owner is gone and garbage collection would delete it under the new job), ``patch``
of ``metadata.ownerReferences`` when a job shares a template another job made. RBAC:
manifests/rbac/role.yaml (``resourceclaimtemplates``: create, delete, get, patch).

A cluster that does not serve ``resource.k8s.io/v1`` drops a pod's ``resourceClaims``
silently (the API server clears fields of disabled features) and the Workers would run
without a GPU, so the check before the create refuses that in one line.

Two ways a job could be orphaned, and what is done:

- **The template cannot be made** after the job exists (a 403, a template of another request
  that appeared since the check, a timeout): the job's pods would wait for claims that never
  come, and nobody follows them once the launcher fails. :func:`ensure_template_or_delete_job`
  deletes the job (``propagationPolicy: Foreground``, like the cancel and pending paths: the
  job stays readable with a ``deletionTimestamp`` until the garbage collector has deleted
  its pods, which mpi-operator / JobSet create with ``blockOwnerDeletion: true``, so a KFP
  retry that comes meanwhile re-attaches to a job being deleted and waits for it to go,
  :func:`kfp_gpu.mpi.launch.attach.replace_failed`, instead of creating pods beside
  terminating ones of the same names; Kubernetes "Garbage Collection", foreground cascading
  deletion) and raises :class:`ClaimTemplateFailed`, one line.
- **A shared template** (the TrainJob runtime's one-per-namespace
  :data:`~kfp_gpu.mpi.spec.claims.DRA_RUNTIME_TEMPLATE`): every job that uses it is added to
  its ``ownerReferences`` (:func:`_add_owner`), because the garbage collector deletes a
  dependent only when none of its owners is left (kubernetes/kubernetes
  ``pkg/controller/garbagecollector/garbagecollector.go`` ``attemptToDeleteItem``: "item has
  at least one existing owner, will not garbage collect"; a gone owner's reference is
  patched away instead). The first job's end then leaves the template to a second one (say,
  suspended by Kueue, whose pods are made later). Each reference has ``controller: false``
  and ``blockOwnerDeletion: false``: where the OwnerReferencesPermissionEnforcement
  admission plugin runs, changing ``ownerReferences`` needs ``delete`` on the template
  (granted) and setting ``blockOwnerDeletion: true`` would need ``update`` on the owner's
  ``finalizers`` subresource, which the Role does not grant (Kubernetes "Admission
  Control", OwnerReferencesPermissionEnforcement).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping

from kfp_gpu.gpu import claim
from kfp_gpu.mpi.spec import claims, crd

log = logging.getLogger(__name__)

GROUP, VERSION = claim.RESOURCE_API_VERSION.split("/")


#: Rounds of create / get / patch when the template changes under the launcher (another
#: launcher adding itself as an owner: a 409 on the resourceVersion precondition; the
#: garbage collector deleting it: a 404) before giving up.
ATTEMPTS = 8


class ClaimTemplateConflict(ValueError):
    """The namespace holds a template of that name for another request (one line)."""


class ClaimTemplateFailed(RuntimeError):
    """The template of a created (or re-attached) job could not be made; the job was
    deleted (or, if that failed too, the line says so). One line."""


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


def _earlier(ref: Mapping, job: Mapping) -> bool:
    """True when owner reference ``ref`` names an earlier job of ``job``'s kind and name
    (another uid): a job that was replaced."""
    meta = job.get("metadata") or {}
    return (ref.get("kind") == job.get("kind") and ref.get("name") == meta.get("name")
            and ref.get("uid") != meta.get("uid"))


def _stale(have: Mapping, job: Mapping) -> bool:
    """True when every owner of ``have`` is an earlier job of the same kind and name (another
    uid): a job that was replaced, whose template garbage collection is about to delete. A
    template that another job also owns (shared) is not stale: it stays for that job."""
    owners = (have.get("metadata") or {}).get("ownerReferences") or []
    return bool(owners) and all(_earlier(o, job) for o in owners)


def _same_request(have: Mapping, spec: Mapping) -> bool:
    """True when template ``have`` holds the ResourceClaimTemplateSpec ``spec``: the same
    ResourceClaimSpec and the same non-empty metadata (kube-apiserver answers the spec's
    ObjectMeta as ``metadata: {}`` when none was given, so a template read back from the
    server would otherwise never equal the one the job carries)."""
    def request(s: Mapping | None) -> tuple:
        s = s or {}
        return {k: v for k, v in (s.get("metadata") or {}).items() if v}, s.get("spec")
    return request(have.get("spec")) == request(spec)


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
           "wait for the jobs that own it to end, use another namespace, the same request, "
           "or backend 'mpijob'" if meta.get("name") == claims.DRA_RUNTIME_TEMPLATE
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
    if have is not None and not _same_request(have, value["spec"]) and not _stale(have, job):
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


def _add_owner(jobs, have: Mapping, owner: dict) -> dict | None:
    """Add ``owner`` to ``have``'s ``metadata.ownerReferences`` (references to earlier jobs
    of the owner's kind and name dropped): one JSON merge patch (RFC 7386, what
    ``patch_namespaced_custom_object`` sends; a list is replaced whole) that carries
    ``metadata.resourceVersion`` as a precondition, so a concurrent change is never
    overwritten: the API server answers 409 Conflict when the stored version differs
    (kubernetes/kubernetes ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
    store.go`` ``Update``: ``newResourceVersion != existingResourceVersion`` ->
    ``NewConflict(..., OptimisticLockErrorMsg)``). Returns the patched template, or None
    on 409 (changed meanwhile) or 404 (deleted meanwhile): the caller reads it again.

    Raises:
        kubernetes.client.exceptions.ApiException: 403 (the Role lacks ``patch``) and other
            API errors.
    """
    from kubernetes.client.exceptions import ApiException

    meta = have.get("metadata") or {}
    job = {"kind": owner["kind"], "metadata": {"name": owner["name"], "uid": owner["uid"]}}
    refs = [r for r in meta.get("ownerReferences") or [] if not _earlier(r, job)]
    patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                          "ownerReferences": [*refs, owner]}}
    try:
        out = jobs._call("patch resourceclaimtemplate",
                         _api(jobs).patch_namespaced_custom_object, GROUP, VERSION,
                         meta.get("namespace"), claim.PLURAL, meta.get("name"), patch)
    except ApiException as e:
        if e.status in (404, 409):
            log.info("ResourceClaimTemplate %s/%s changed while adding an owner (%s); "
                     "reading it again", meta.get("namespace"), meta.get("name"), e.status)
            return None
        raise
    log.info("ResourceClaimTemplate %s/%s holds the same request; shared, owned by %s",
             meta.get("namespace"), meta.get("name"),
             ", ".join(f"{r.get('kind')} {r.get('name')}" for r in [*refs, owner]))
    return out


def ensure_template(jobs, job: Mapping, *, timeout_s: float = 60.0,
                    poll_s: float = 1.0) -> dict | None:
    """Create the template the created (or re-attached) ``job`` needs, owned by it
    (:func:`kfp_gpu.mpi.spec.claims.template_for`); keep one it already owns; replace one
    only earlier jobs of that name own; share one that holds the same request, adding
    ``job`` to its owners when a launcher made it (:func:`_add_owner`; a template without
    the launcher's ``app.kubernetes.io/managed-by: kfp-gpu`` label was applied by someone
    else and is used as it is, never owned: the job's end must not delete it). Returns the
    template, None for a job without one.

    Raises:
        ClaimTemplateConflict: the name holds another request.
        TimeoutError: an earlier incarnation's template did not go within ``timeout_s``.
        RuntimeError: the template kept changing for :data:`ATTEMPTS` rounds.
        kubernetes.client.exceptions.ApiException: 403 (the Role lacks create/delete/patch)
            and other API errors.
    """
    from kubernetes.client.exceptions import ApiException

    want = claims.template_for(job)
    if want is None:
        return None
    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    have = None
    for _ in range(ATTEMPTS):
        if have is None:
            try:
                return _create(jobs, want)
            except ApiException as e:
                if e.status != 409:
                    raise
            have = _get(jobs, ns, name)
            if have is None:  # deleted between the POST and the GET: create again
                continue
        if _owned_by(have, job):
            return have
        if _stale(have, job):
            return _replace(jobs, have, want, timeout_s, poll_s)
        if not _same_request(have, want["spec"]):
            raise _conflict(have, want)
        if ((have.get("metadata") or {}).get("labels") or {}).get(
                crd.MANAGED_BY_LABEL) != crd.MANAGED_BY:
            log.info("ResourceClaimTemplate %s/%s holds the same request and was not made by "
                     "a launcher; used, not owned", ns, name)
            return have
        out = _add_owner(jobs, have, want["metadata"]["ownerReferences"][0])
        if out is not None:
            return out
        have = _get(jobs, ns, name)
    raise RuntimeError(f"ResourceClaimTemplate {ns}/{name} changed under each of {ATTEMPTS} "
                       f"tries to create or share it for {job.get('kind')} "
                       f"{(job.get('metadata') or {}).get('name')}")


def _why(e: BaseException) -> str:
    """One line about a failure: an API error's code, reason and the Status message."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiException):
        try:
            message = (json.loads(e.body or "{}") or {}).get("message") or ""
        except (ValueError, AttributeError):
            message = ""
        text = f"{e.status} {e.reason}" + (f": {message}" if message else "")
    else:
        text = str(e) or type(e).__name__
        if type(e).__name__ not in text:
            text = f"{type(e).__name__}: {text}"
    return " ".join(text.split())


def ensure_template_or_delete_job(jobs, job: Mapping, *, poll_s: float = 1.0
                                  ) -> dict | None:
    """:func:`ensure_template` for the created (or re-attached) ``job``; when it fails, the
    job is deleted (``propagationPolicy: Foreground``, see the module doc) so that no job is
    left whose pods wait for GPU claims with nobody following it.

    Raises:
        ClaimTemplateFailed: the template could not be made (any error: an API error such
            as 403, a :class:`ClaimTemplateConflict`, a timeout); one line with the reason
            and whether the job was deleted. The cause is chained.
    """
    try:
        return ensure_template(jobs, job, poll_s=poll_s)
    except Exception as e:  # any failure (re-raised below) leaves the job orphaned
        meta = job.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name")
        raw = (meta.get("annotations") or {}).get(claims.TEMPLATE_ANNOTATION) or "{}"
        try:
            template = json.loads(raw).get("name") or "?"
        except (ValueError, AttributeError):
            template = "?"
        try:
            jobs.delete(ns, name)
            done = (f"{jobs.kind} {ns}/{name} deleted (propagationPolicy Foreground): its "
                    "pods would wait for GPU claims with no launcher following them")
        except Exception as d:  # noqa: BLE001 - said in the line
            done = (f"deleting {jobs.kind} {ns}/{name} failed too ({_why(d)}): delete it "
                    f"by hand, kubectl delete {jobs.backend.plural} -n {ns} {name}")
        raise ClaimTemplateFailed(f"ResourceClaimTemplate {ns}/{template} for {jobs.kind} "
                                  f"{name} could not be made: {_why(e)}; {done}") from e
