"""DRA GPUs for the pods the suite writes itself (pure): the MPIJob's Workers and the
TrainJob's nodes claim their GPUs through a ResourceClaimTemplate
(:mod:`kfp_gpu.gpu.claim`) instead of an extended resource.

Wiring (k8s.io/api v0.36.3 core/v1/types.go): the pod template gets
``spec.resourceClaims: [{name: gpu, resourceClaimTemplateName: T}]`` and the GPU
container ``resources.claims: [{name: gpu}]``; Kubernetes' resourceclaim controller then
makes one ResourceClaim per pod from T (owned by the pod, so it goes with the pod), and the
scheduler allocates it on a node whose ResourceSlices satisfy it.

Who creates the template, and why the launcher: the claims name T in the job's own
namespace, and the request is known only when the component builds the job, so the
launcher (:mod:`kfp_gpu.mpi.launch.claims`) creates T beside the job, with an
ownerReference to the job: garbage collection removes it with the job, and nothing has to
be applied by hand. The job carries T's spec in the annotation
:data:`TEMPLATE_ANNOTATION` (``{"name": T, "spec": ResourceClaimTemplateSpec}``, JSON), so
a retried launcher that re-attaches to the job rebuilds the same template from the job.

- MPIJob: T = ``<job>-gpu``, one template per job (:func:`template_name`).
- TrainJob: Kubeflow Trainer v2.3.0 cannot set pod-level ``resourceClaims`` per job
  (``runtimePatches``' PodSpecPatch has no such field: trainer.kubeflow.org_trainjobs.yaml
  v2.3.0; ``resourceClaimsPerNode`` is kubeflow/trainer PR 4027, open), so the claim
  reference lives in the runtime: ClusterTrainingRuntime :data:`DRA_RUNTIME`
  (manifests/trainer-dra, the kfp-gpu-horovod runtime plus ``resourceClaims`` naming
  :data:`DRA_RUNTIME_TEMPLATE` in both replicated jobs), and the job's
  ``resourcesPerNode.claims`` names the claim. T is then one name per namespace: the
  launcher creates it owned by the TrainJob; a second TrainJob with the SAME request
  shares it and is added to its owners (:func:`kfp_gpu.mpi.launch.claims.ensure_template`),
  one with another request is refused until the jobs that own it are gone. Garbage
  collection deletes T when its LAST owner goes, so a sharing job that makes its pods
  later (suspended by Kueue) still finds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kfp_gpu.gpu import claim
from kfp_gpu.mpi.spec import crd

#: The job annotation that carries the claim template (name and spec) for the launcher.
TEMPLATE_ANNOTATION = "kfp-gpu.io/resource-claim-template"
#: ClusterTrainingRuntime of manifests/trainer-dra (kfp-gpu-horovod + the claim reference).
DRA_RUNTIME = "kfp-gpu-horovod-dra"
#: The ResourceClaimTemplate that runtime's pods name (one per namespace).
DRA_RUNTIME_TEMPLATE = "kfp-gpu-horovod-dra-gpu"
#: Suffix of an MPIJob's template name.
TEMPLATE_SUFFIX = "-gpu"


def is_dra(opts) -> bool:
    """True when the options' GPU request is a ``dra`` request."""
    return opts.gpu_request().kind == "dra"


def template_name(job_name: str) -> str:
    """The ResourceClaimTemplate of MPIJob ``job_name``: ``<job>-gpu`` (job names are DNS
    labels of at most 63 characters, so the result is a valid object name)."""
    return job_name + TEMPLATE_SUFFIX


def annotated(metadata: Mapping, opts, name: str) -> dict:
    """``metadata`` plus :data:`TEMPLATE_ANNOTATION` for template ``name`` when the request
    is ``dra`` (a copy; unchanged otherwise)."""
    out = dict(metadata)
    if not is_dra(opts):
        return out
    value = json.dumps({"name": name, "spec": {"spec": claim.claim_spec(opts.gpu_request())}},
                       sort_keys=True, separators=(",", ":"))
    out["annotations"] = dict(sorted({**out.get("annotations", {}),
                                      TEMPLATE_ANNOTATION: value}.items()))
    return out


def wire_pod(spec: dict, opts, name: str) -> None:
    """Add ``resourceClaims`` naming template ``name`` to a pod ``spec`` (in place), for
    ``dra`` requests; the container's ``resources.claims`` comes with
    :func:`container_claims`."""
    if is_dra(opts):
        spec["resourceClaims"] = claim.pod_claims(name)


def container_claims(opts) -> list[dict]:
    """``resources.claims`` of the GPU container ([] unless ``dra``)."""
    return claim.container_claims() if is_dra(opts) else []


def runtime_for(opts, runtime: str, default: str) -> str:
    """The ClusterTrainingRuntime of a TrainJob: :data:`DRA_RUNTIME` for a ``dra`` request
    when the caller left the default ``default``; else ``runtime``."""
    return DRA_RUNTIME if is_dra(opts) and runtime == default else runtime


def template_for(job: Mapping) -> dict | None:
    """The ResourceClaimTemplate a created job needs (from :data:`TEMPLATE_ANNOTATION`),
    owned by the job (``controller: false``, ``blockOwnerDeletion: false``: the operator
    stays the controller, no ``finalizers`` permission needed); None without the
    annotation.

    Raises:
        ValueError: the annotation is not the JSON :func:`annotated` writes, or the job has
            no ``metadata.uid`` yet (build the template from the created object).
    """
    meta = job.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(TEMPLATE_ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
        name, spec = value["name"], value["spec"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"annotation {TEMPLATE_ANNOTATION} of {meta.get('name')!r} is not "
                         f"{{'name', 'spec'}} JSON: {e}") from None
    if not meta.get("uid"):
        raise ValueError(f"{job.get('kind')} {meta.get('name')!r} has no uid: the claim "
                         "template is owned by the created job")
    owner = {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"),
             "name": meta["name"], "uid": meta["uid"], "controller": False,
             "blockOwnerDeletion": False}
    return {"apiVersion": claim.RESOURCE_API_VERSION, "kind": claim.KIND,
            "metadata": {"name": name, "namespace": meta.get("namespace") or "default",
                         "labels": {crd.MANAGED_BY_LABEL: crd.MANAGED_BY},
                         "ownerReferences": [owner]},
            "spec": spec}
