"""A strategic merge patch for the JobSet spec part of a runtime, as Trainer applies
``TrainJob.spec.runtimePatches``. Pure.

kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go`` mergeRuntimePatches
(l. 251-290) runs ``strategicpatch.StrategicMergePatch`` (k8s.io/apimachinery) of each
patch's ``trainingRuntimeSpec.template.spec`` onto the runtime's JobSet spec, then restores
the runtime's ``replicatedJobs`` order. The merge keys come from the Go struct tags
(``patchStrategy:"merge" patchMergeKey:...``): JobSet v0.12.0 ``api/jobset/v1alpha2/
jobset_types.go`` (``replicatedJobs``, ``dependsOn``: ``name``) and k8s.io/api core/v1
``types.go`` (listed in :data:`MERGE_KEYS`). Lists without a strategy (``tolerations``,
``command``, ``args``, ``envFrom`` ...) are replaced; maps merge key by key; a ``null``
value deletes the key; ``volumes`` also follow ``retainKeys`` (keys of an entry missing
from its patch are dropped, so a patch can switch the volume source).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

#: List field name -> merge key (patchStrategy merge).
MERGE_KEYS = {
    "replicatedJobs": "name", "dependsOn": "name",  # JobSet
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "volumeMounts": "mountPath", "ports": "containerPort",
    "imagePullSecrets": "name", "hostAliases": "ip", "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
}
#: List fields whose entries follow ``retainKeys`` (core/v1 PodSpec.Volumes).
RETAIN_KEYS = frozenset({"volumes"})


def merge(base: Any, patch: Any, field: str = "") -> Any:
    """``patch`` merged onto ``base`` (neither is changed); ``field`` is the name ``base``
    has in its parent (it picks the list strategy).

    Raises:
        ValueError: a ``$patch``/``$retainKeys``/``$setElementOrder`` directive (not
            supported here), or a merge-keyed list entry without its key.
    """
    if isinstance(patch, Mapping) and isinstance(base, Mapping):
        return _merge_map(base, patch)
    if isinstance(patch, list) and isinstance(base, list) and field in MERGE_KEYS:
        return _merge_list(base, patch, field)
    return copy.deepcopy(patch)


def _merge_map(base: Mapping, patch: Mapping) -> dict:
    out = copy.deepcopy(dict(base))
    for key, value in patch.items():
        if key.startswith("$"):
            raise ValueError(f"strategic merge directive {key!r} is not supported by the "
                             "local runner; accepted: plain values, null to delete")
        if value is None:
            out.pop(key, None)
        elif key in out:
            out[key] = merge(out[key], value, key)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_list(base: list, patch: list, field: str) -> list:
    key = MERGE_KEYS[field]
    out = [copy.deepcopy(item) for item in base]
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            raise ValueError(f"{field}: every patch entry needs its merge key {key!r}, got "
                             f"{item!r}")
        at = next((i for i, cur in enumerate(out) if cur.get(key) == item[key]), None)
        if at is None:
            out.append(copy.deepcopy(dict(item)))
            continue
        cur = out[at]
        if field in RETAIN_KEYS:
            cur = {k: v for k, v in cur.items() if k in item}
        out[at] = _merge_map(cur, item)
    return out
