"""Unknown fields in a job file, refused as ``kubectl apply --server-side`` refuses them.

The local runner takes what a user would ``kubectl apply``. A server-side apply patch is
converted to the object's structured schema and an undeclared field is an error, whatever
``fieldValidation`` says ("Apply Patch requests already require strict schemas and will
error on unknown fields": kubernetes/kubernetes PR #105916, KEP-2885 server-side field
validation; kubectl's ``--validate`` default is ``strict`` as well). The API server's text
is ``.spec.foo: field not declared in schema`` (structured-merge-diff, the typed patch
conversion); :func:`unknown_fields` returns those paths and :func:`check` raises with them.

Schemas walked:

- ``MPIJob`` (``kubeflow.org/v2beta1``): the fields of ``spec`` as mpi-operator v0.8.2
  declares them (``manifests/base/kubeflow.org_mpijobs.yaml``, the CRD under
  ``../shared/data/upstream/mpi-operator-v0.8.2``): :data:`MPIJOB_SPEC`; each replica's
  ``template`` is a core/v1 PodTemplateSpec.
- ``TrainJob``, ``ClusterTrainingRuntime``, ``TrainingRuntime`` and every core/v1 type
  (PodTemplateSpec, ObjectMeta): the published ``kubeflow-trainer-api==2.3.0`` models
  (generated from Kubeflow Trainer v2.3.0's OpenAPI, the same source as its CRDs), their
  field aliases being the JSON names.

tests/unit/test_cli_mpijob.py checks that every path refused here is refused by the upstream
CRD schema too (tests/support/upstream_crds.py, strict).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

#: ``MPIJob.spec`` field tree (mpi-operator v0.8.2 kubeflow.org_mpijobs.yaml,
#: ``spec.versions[v2beta1].schema.openAPIV3Schema.properties.spec``): a dict is an
#: object with those properties; ``"*"`` a map of such values; ``POD_TEMPLATE`` a core/v1
#: PodTemplateSpec; ``None`` a leaf (scalar or free map such as ``minResources``).
POD_TEMPLATE = "PodTemplateSpec"
MPIJOB_SPEC: dict = {
    "launcherCreationPolicy": None, "mpiImplementation": None, "runLauncherAsWorker": None,
    "slotsPerWorker": None, "sshAuthMountPath": None,
    "mpiReplicaSpecs": {"*": {"replicas": None, "restartPolicy": None,
                              "template": POD_TEMPLATE}},
    "runPolicy": {"activeDeadlineSeconds": None, "backoffLimit": None, "cleanPodPolicy": None,
                  "managedBy": None, "suspend": None, "ttlSecondsAfterFinished": None,
                  "schedulingPolicy": {"minAvailable": None, "minResources": None,
                                       "priorityClass": None, "queue": None,
                                       "scheduleTimeoutSeconds": None}},
}


def _models():
    from kubeflow_trainer_api import models

    return models


def _model_of(annotation) -> tuple[str, Any] | None:
    """(shape, model) for a pydantic field annotation: shape ``one``, ``list`` or ``map``;
    None for a leaf (no model inside)."""
    from pydantic import BaseModel

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _model_of(args[0])
    if origin in (typing.Union, types.UnionType):
        found = [m for a in args if a is not type(None) and (m := _model_of(a))]
        return found[0] if found else None
    if origin is list and args:
        inner = _model_of(args[0])
        return ("list", inner[1]) if inner and inner[0] == "one" else None
    if origin is dict and len(args) == 2:
        inner = _model_of(args[1])
        return ("map", inner[1]) if inner and inner[0] == "one" else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ("one", annotation)
    return None


def _walk_model(obj: Any, model, path: str, out: list[str]) -> None:
    if not isinstance(obj, Mapping):
        return
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    for key, value in obj.items():
        field = fields.get(key)
        if field is None:
            out.append(f"{path}.{key}")
            continue
        inner = _model_of(field.annotation)
        if inner is None:
            continue
        shape, sub = inner
        if shape == "one":
            _walk_model(value, sub, f"{path}.{key}", out)
        elif shape == "list" and isinstance(value, list):
            for i, item in enumerate(value):
                _walk_model(item, sub, f"{path}.{key}[{i}]", out)
        elif shape == "map" and isinstance(value, Mapping):
            for k, item in value.items():
                _walk_model(item, sub, f"{path}.{key}.{k}", out)


def _walk_tree(obj: Any, tree, path: str, out: list[str]) -> None:
    if tree is None or not isinstance(obj, Mapping):
        return
    if tree == POD_TEMPLATE:
        _walk_model(obj, _models().IoK8sApiCoreV1PodTemplateSpec, path, out)
        return
    if "*" in tree:
        for key, value in obj.items():
            _walk_tree(value, tree["*"], f"{path}.{key}", out)
        return
    for key, value in obj.items():
        if key not in tree:
            out.append(f"{path}.{key}")
        else:
            _walk_tree(value, tree[key], f"{path}.{key}", out)


def unknown_fields(obj: Mapping) -> list[str]:
    """Paths (``.spec.mpiReplicaSpecs.Worker.template.spec.containers[0].imagePull``) of the
    fields of ``obj`` its kind's schema does not declare; ``status`` is not looked at (the
    server ignores it in a main-resource apply). Kinds other than MPIJob, TrainJob,
    (Cluster)TrainingRuntime: [] (the planner refuses them)."""
    kind, out = obj.get("kind"), []
    models = _models()
    if kind == "MPIJob":
        for key, value in obj.items():
            if key in ("apiVersion", "kind", "status"):
                continue
            if key == "metadata":
                _walk_model(value, models.IoK8sApimachineryPkgApisMetaV1ObjectMeta,
                            ".metadata", out)
            elif key == "spec":
                _walk_tree(value, MPIJOB_SPEC, ".spec", out)
            else:
                out.append(f".{key}")
        return out
    model = {"TrainJob": models.TrainerV1alpha1TrainJob,
             "ClusterTrainingRuntime": models.TrainerV1alpha1ClusterTrainingRuntime,
             "TrainingRuntime": models.TrainerV1alpha1TrainingRuntime}.get(kind)
    if model is not None:
        _walk_model({k: v for k, v in obj.items() if k != "status"}, model, "", out)
    return out


def check(obj: Mapping, where: str) -> None:
    """Raise on the first unknown field, in the API server's words.

    Raises:
        ValueError: ``<where>: MPIJob .spec.foo: field not declared in schema (kubectl
            apply --server-side refuses it too); remove or rename it``.
    """
    bad = unknown_fields(obj)
    if bad:
        more = f" (and {len(bad) - 1} more: {', '.join(bad[1:4])})" if len(bad) > 1 else ""
        raise ValueError(f"{where}: {obj.get('kind')} {bad[0]}: field not declared in "
                         f"schema{more}; kubectl apply --server-side refuses it too: remove "
                         "or rename it")
