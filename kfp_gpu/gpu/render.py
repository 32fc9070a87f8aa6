"""A GPU request rendered onto a KFP task, or into a pod-spec fragment.

KFP limits (kfp 2.17, kfp-kubernetes 2.17): a task carries ONE accelerator resource
(``PipelineTask.set_accelerator_type`` / ``set_accelerator_limit``, a non-negative integer)
and has no ``schedulerName``; tolerations, node selectors and pod annotations/labels come
from ``kfp.kubernetes`` (``add_toleration``, ``add_node_selector``, ``add_pod_annotation``,
``add_pod_label``). So HAMi's second and third resources are only written by
:func:`pod_fragment` (pod templates the suite writes itself, e.g. MPIJob Workers); on a
task ``hami:1,mem=M`` is carried as ``nvidia.com/gpumem: M`` alone.
"""

from __future__ import annotations

import dataclasses
import warnings

from kfp_gpu.gpu.kinds import REGISTRY
from kfp_gpu.gpu.names import FRACTION_CONTAINER_ANNOTATION, KFP_MAIN_CONTAINER, SHARE_ENV


class KfpCannotExpressWarning(UserWarning):
    """A part of the request that a KFP task cannot carry (see the message for what to do)."""


def _count_limit(r, count):
    """The accelerator limit for a ``count`` override; an int re-renders the request."""
    kind = REGISTRY[r.kind]
    if not kind.count_parameter:
        raise ValueError(f"a count parameter applies to gpu, shared and hami requests, "
                         f"not {r.kind!r}")
    if isinstance(count, int):
        if count < 1:
            raise ValueError(f"count must be an integer >= 1, got {count}")
        return None
    if r.kind == "shared" and r.sharing.replicas:
        raise ValueError(
            "a count parameter cannot carry the share of time-sliced/MPS replicas "
            "(count/replicas); give the count at compile time: 'shared:N,replicas=R'")
    return count


def apply_to_task(r, task, count=None):
    """Render the request ``r`` onto a KFP ``PipelineTask``; returns the task.

    Sets the accelerator type and integer limit (when the kind has a resource), the GPU
    toleration, node selectors, pod annotations/labels and the environment. KAI kinds also
    get ``gpu-fraction-container-name: main``: the component runs in Argo's ``main``
    container, which is not container 0 (see :data:`kfp_gpu.gpu.names.KFP_MAIN_CONTAINER`).

    Args:
        r: a :class:`kfp_gpu.gpu.request.GpuRequest`.
        task: a ``kfp.dsl.PipelineTask``.
        count: optional override of the resource count: an int or a pipeline parameter
            (``PipelineChannel``), so integer counts stay pipeline parameters. Only for
            kinds ``gpu``, ``shared`` and ``hami``; with a parameter, :data:`SHARE_ENV` is
            left out (whole devices: no cap is needed).

    A ``dra`` request uses kfp-kubernetes' ``add_resource_claim`` when the installed
    version has it (:data:`KFP_CLAIM_PR`), naming :func:`task_template_name`; otherwise
    it is refused.

    Raises:
        ValueError: ``count`` given for a kind without an integer count; a ``dra`` request
            without ``kfp.kubernetes.add_resource_claim``.
    Warns:
        KfpCannotExpressWarning: for ``hami`` except ``hami:1,mem=M`` (which the task
            carries as ``nvidia.com/gpumem: M``), see :mod:`kfp_gpu.gpu.kinds.hami`.
    """
    # kfp-kubernetes is only needed when a pipeline is compiled.
    from kfp import kubernetes

    if r.kind == "dra":
        return _apply_claim(r, task, kubernetes, count)
    if r.kind == "none":
        for key, value in r.labels().items():  # a queue on a CPU-only task
            kubernetes.add_pod_label(task, label_key=key, label_value=value)
        return task

    env = r.env()
    kind = REGISTRY[r.kind]
    name, limit = kind.task_resource(r)
    if count is not None:
        limit = _count_limit(r, count)
        if limit is None:
            return apply_to_task(dataclasses.replace(r, count=count), task)
        name = r.resource_name
        env.pop(SHARE_ENV, None)
    if name:
        task.set_accelerator_type(name).set_accelerator_limit(limit)
    lost = kind.task_warning(r, count_parameter=count is not None)
    if lost:
        warnings.warn(lost, KfpCannotExpressWarning, stacklevel=3)
    for tol in r.tolerations():
        kubernetes.add_toleration(task, key=tol["key"], operator=tol["operator"],
                                  effect=tol["effect"])
    for key, value in r.node_selector().items():
        kubernetes.add_node_selector(task, label_key=key, label_value=value)
    for key, value in _annotations(r, KFP_MAIN_CONTAINER).items():
        kubernetes.add_pod_annotation(task, annotation_key=key, annotation_value=value)
    for key, value in r.labels().items():
        kubernetes.add_pod_label(task, label_key=key, label_value=value)
    for key, value in env.items():
        task.set_env_variable(key, value)
    return task


#: The KFP SDK change that adds a claim API to kfp-kubernetes (merged, in no release up to
#: kfp-kubernetes 2.17.2): kubeflow/pipelines @00ab3871
#: kubernetes_platform/python/kfp/kubernetes/pod_resource_claim.py
#: ``add_resource_claim(task, resource_claim_template_name)`` (a pod-level claim from a
#: template in the run's namespace).
KFP_CLAIM_PR = "kubeflow/pipelines PR 14243"


def task_template_name(r) -> str:
    """The ResourceClaimTemplate a KFP task with ``dra`` request ``r`` names:
    ``kfp-gpu-dra-<first 10 hex of sha256 of the canonical text>`` (the same request, the
    same template; the platform team applies :func:`kfp_gpu.gpu.claim.template` with it)."""
    import hashlib

    return "kfp-gpu-dra-" + hashlib.sha256(r.to_text().encode()).hexdigest()[:10]


def _apply_claim(r, task, kubernetes, count):
    """A ``dra`` request on a KFP task: only through kfp-kubernetes' own claim API
    (``add_resource_claim``, :data:`KFP_CLAIM_PR`), never by patching the pod spec."""
    if count is not None:
        raise ValueError("a count parameter does not apply to dra requests (the claim "
                         "template fixes the count)")
    if not hasattr(kubernetes, "add_resource_claim"):
        raise ValueError(f"'{r.to_text()}' on a KFP task needs kfp-kubernetes with "
                         f"add_resource_claim ({KFP_CLAIM_PR}, in no release up to 2.17.2); "
                         "dra requests work today for MPIJob Workers and TrainJob nodes "
                         "(resnet-horovod), or use gpu:N / mig:P here")
    name = task_template_name(r)
    kubernetes.add_resource_claim(task, resource_claim_template_name=name)
    warnings.warn(f"'{r.to_text()}' on a KFP task names ResourceClaimTemplate {name!r}, which "
                  "must exist in the run's namespace: apply kfp_gpu.gpu.claim.template(request, "
                  f"{name!r}, namespace)", KfpCannotExpressWarning, stacklevel=4)
    for tol in r.tolerations():
        kubernetes.add_toleration(task, key=tol["key"], operator=tol["operator"],
                                  effect=tol["effect"])
    for key, value in r.labels().items():
        kubernetes.add_pod_label(task, label_key=key, label_value=value)
    for key, value in r.env().items():
        task.set_env_variable(key, value)
    return task


def _annotations(r, container: str) -> dict[str, str]:
    """The request's pod annotations, plus KAI's ``gpu-fraction-container-name: container``
    for kinds whose scheduler hands the GPU to one container (none when ``container`` is "")."""
    out = dict(r.annotations())
    if container and REGISTRY[r.kind].names_container:
        out[FRACTION_CONTAINER_ANNOTATION] = container
    return out


def pod_fragment(r, container: str = "") -> dict:
    """Pod-spec pieces for pod templates the suite writes itself (e.g. MPIJob workers).

    Args:
        r: a :class:`kfp_gpu.gpu.request.GpuRequest`.
        container: name of the container that uses the GPU. For KAI kinds it is written as
            the ``gpu-fraction-container-name`` annotation; "" leaves it out, which is
            right for one-container pods (KAI's default is container 0,
            NVIDIA/KAI-Scheduler pkg/binder/common/gpu_access.go).

    Returns:
        ``{"resources": {"limits": {name: qty}, "requests": {name: qty}},
        "annotations": {...}, "labels": {...}, "env": [{"name", "value"}...],
        "tolerations": [k8s toleration dicts], "nodeSelector": {...}}``; quantities are
        strings; extended resources have requests == limits (Kubernetes requires it).
        HAMi gets its full form here: ``nvidia.com/gpu`` + ``nvidia.com/gpumem`` (MiB)
        + ``nvidia.com/gpucores`` (percent). Empty containers for ``none``.
    """
    limits: dict[str, str] = {}
    if r.resource_name:
        limits[r.resource_name] = str(r.resource_count)
    limits.update(REGISTRY[r.kind].extra_limits(r))
    return {
        "resources": {"limits": dict(limits), "requests": dict(limits)},
        "annotations": _annotations(r, container),
        "labels": r.labels(),
        "env": [{"name": k, "value": v} for k, v in r.env().items()],
        "tolerations": r.tolerations(),
        "nodeSelector": r.node_selector(),
    }
