"""The tests' own strategic merge patch, for modelling the pods Kubeflow Trainer makes from
a TrainJob (runtimePatches, resourcesPerNode merged into the runtime's): written from the
core types' declarations alone, independent of kfp_gpu.mpi.spec.strategic_merge."""

from __future__ import annotations

import copy

#: List field name -> merge key (the patchMergeKey of the core types' lists used here).
MERGE_KEYS = {"containers": "name", "volumes": "name", "env": "name",
              "volumeMounts": "name", "replicatedJobs": "name"}


def smp(base, patch, key: str = ""):
    """Strategic merge patch as the core types declare it: maps merge, lists with a
    patchMergeKey (containers, volumes, env, volumeMounts) merge by it, others replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = smp(base.get(k), v, k) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        mk = MERGE_KEYS[key]
        out = [copy.deepcopy(b) for b in base]
        for item in patch:
            idx = next((i for i, b in enumerate(out) if b.get(mk) == item.get(mk)), None)
            if idx is None:
                out.append(copy.deepcopy(item))
            else:
                out[idx] = smp(out[idx], item)
        return out
    return copy.deepcopy(patch)
