"""The backstop for a launcher that dies without its cancel path: the job it creates names
the component's pod as its owner, so Kubernetes garbage collection deletes the job (and,
through the job, its pods) when the component's pod is deleted.

Which pod: the KFP v2 backend sets ``KFP_POD_NAME`` and ``KFP_POD_UID`` (fieldRefs
``metadata.name`` / ``metadata.uid``) on the executor's main container, where the component
runs (kubeflow/pipelines ``backend/src/v2/compiler/argocompiler/common.go`` ``commonEnvs``,
used as ``Env`` of the container in ``container.go`` ``addContainerExecutorTemplate``).
Elsewhere the pod's name is ``HOSTNAME`` (the kubelet sets it to the pod name) and its uid
is read with one ``GET`` of the pod. The namespace is the service account's
(:data:`kfp_gpu.kube.NAMESPACE_FILE`); an ownerReference must name an object in the
dependent's own namespace (Kubernetes "Owners and Dependents"), so a job created in another
namespace gets none.

The reference is ``{apiVersion: v1, kind: Pod, name, uid, controller: false,
blockOwnerDeletion: false}`` (``controller: false``: the MPI Operator / Trainer stay the
controllers of their pods; ``blockOwnerDeletion: false``: no ``pods/finalizers`` update
permission needed, apimachinery OwnerReference).
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kfp_gpu import kube

log = logging.getLogger(__name__)

POD_NAME_ENV = "KFP_POD_NAME"
POD_UID_ENV = "KFP_POD_UID"


@dataclass(frozen=True)
class OwnerPod:
    """The component's pod: namespace, name and uid (``""`` = not known yet)."""

    namespace: str
    name: str
    uid: str = ""

    def reference(self) -> dict:
        """The ``metadata.ownerReferences`` entry naming this pod."""
        return {"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": self.uid,
                "controller": False, "blockOwnerDeletion": False}


def from_environment(environ: Mapping[str, str] | None = None,
                     namespace_file: str | os.PathLike = kube.NAMESPACE_FILE
                     ) -> OwnerPod | None:
    """The pod this process runs in, from ``KFP_POD_NAME``/``KFP_POD_UID`` (else
    ``HOSTNAME``, uid unknown) and the service-account namespace file; None outside a pod
    (no namespace file) or without a name."""
    env = os.environ if environ is None else environ
    try:
        namespace = Path(namespace_file).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    name = env.get(POD_NAME_ENV) or env.get("HOSTNAME", "")
    if not namespace or not name:
        return None
    uid = env.get(POD_UID_ENV, "") if env.get(POD_NAME_ENV) else ""
    return OwnerPod(namespace, name, uid)


def resolve(core, pod: OwnerPod | None) -> OwnerPod | None:
    """``pod`` with its uid (one ``GET`` of the pod when unknown; needs ``get`` on pods);
    None when there is no pod or the GET fails (logged: the job is then created without
    an owner, the cancel path still deletes it)."""
    if pod is None or pod.uid:
        return pod
    try:
        obj = core.read_namespaced_pod(pod.name, pod.namespace, _request_timeout=(10, 30))
    except Exception as e:  # noqa: BLE001 - the owner is a backstop, never a failure
        log.warning("no ownerReference: cannot read pod %s/%s (%s)", pod.namespace, pod.name,
                    getattr(e, "status", "") or e)
        return None
    uid = (obj.metadata.uid or "") if obj is not None and obj.metadata is not None else ""
    return OwnerPod(pod.namespace, pod.name, uid) if uid else None


def with_owner(job: Mapping, pod: OwnerPod | None) -> dict:
    """A copy of ``job`` whose ``metadata.ownerReferences`` also names ``pod``; ``job``
    unchanged (copied) when there is no pod (or no uid), or it goes to another namespace
    (logged)."""
    out = copy.deepcopy(dict(job))
    if pod is None or not pod.uid:
        return out
    meta = out.setdefault("metadata", {})
    ns = meta.get("namespace") or "default"
    if ns != pod.namespace:
        log.info("no ownerReference: the job goes to namespace %s, the component's pod %s "
                 "is in %s (owners must share the namespace)", ns, pod.name, pod.namespace)
        return out
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != pod.uid]
    meta["ownerReferences"] = [*refs, pod.reference()]
    return out


def handed_over(obj: Mapping, pod: OwnerPod | None) -> list[dict] | None:
    """The ``ownerReferences`` a re-attached job ``obj`` should carry so that ``pod`` (this
    attempt's pod) owns it instead of an earlier attempt's pod, or None when nothing is to
    change (no pod/uid, another namespace, or ``pod`` already an owner).

    Why: a KFP retry is a new pod that re-attaches to the job the first attempt created,
    whose owner is the first attempt's pod; when that pod is deleted (pod GC, a lost node's
    pod force-deleted) garbage collection would delete the job the retry is following.
    Other owners (not ``Pod``) are kept.
    """
    if pod is None or not pod.uid:
        return None
    meta = obj.get("metadata") or {}
    if (meta.get("namespace") or "default") != pod.namespace:
        return None
    refs = list(meta.get("ownerReferences") or [])
    if any(r.get("uid") == pod.uid for r in refs):
        return None
    return [*(r for r in refs if r.get("kind") != "Pod"), pod.reference()]
