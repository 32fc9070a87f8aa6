"""Helpers of the tests that run pods on the plane's real node (test_real_pods.py and the
chaos scenarios): the placement that sends a pod there and only there, and hostPath
PersistentVolumes bound to a test's PVCs (the ``pvs`` fixture of conftest.py deletes
them)."""

from __future__ import annotations

import os
from pathlib import Path

from testcluster import node_config

#: The uid the project's images run as: the owner of a work folder the pods write to.
UID = 1000
#: Tolerations and node selector that send a pod to the real node (and only there).
ON_REAL_NODE = {
    "tolerations": [{"key": node_config.REAL_NODE_TAINT["key"], "operator": "Exists",
                     "effect": "NoSchedule"}],
    "node_selector": {node_config.REAL_NODE_LABEL: "true"},
}


def pod_placement() -> dict:
    """:data:`ON_REAL_NODE` as the fields of a pod spec (``tolerations``,
    ``nodeSelector``)."""
    return {"tolerations": list(ON_REAL_NODE["tolerations"]),
            "nodeSelector": dict(ON_REAL_NODE["node_selector"])}


def host_pv(api, ns: str, claim: str, path: str) -> None:
    """A hostPath PersistentVolume on the real node bound to PVC ``claim`` in ``ns``
    (static binding: ``volumeName`` + ``storageClassName: ""``, kube-controller-manager's
    PV binder)."""
    from kubernetes import client

    pv = f"{ns}-{claim}"
    client.CoreV1Api(api).create_persistent_volume({
        "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                 "hostPath": {"path": path, "type": "Directory"},
                 "claimRef": {"namespace": ns, "name": claim}}})
    client.CoreV1Api(api).create_namespaced_persistent_volume_claim(ns, {
        "metadata": {"name": claim},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                 "resources": {"requests": {"storage": "1Gi"}}}})


def bind_pvcs(api, namespace: str, pvs: list, shared_data: Path, tmp_path: Path) -> Path:
    """The two PVCs of test_real_pods.py's ``resnet_job`` (``fashion``, ``work``) bound to
    hostPath PVs, whose names are added to ``pvs``: the real data read-only and a work
    folder owned by uid 1000 (returned)."""
    data = shared_data / "fashion-mnist"
    assert data.is_dir(), f"{data} missing"
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, UID, UID)
    # (the data is mounted read-only by the job's own PvcMount)
    for claim, path in (("fashion", str(data.parent)), ("work", str(work))):
        host_pv(api, namespace, claim, path)
        pvs.append(f"{namespace}-{claim}")
    return work
