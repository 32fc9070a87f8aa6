"""Helpers of the tests that run pods on the plane's real node (test_real_pods.py and the
chaos scenarios): the placement that sends a pod there and only there, the ResNet job
train_resnet_horovod builds for it, and hostPath PersistentVolumes bound to a test's PVCs
(the ``pvs`` fixture of conftest.py deletes them)."""

from __future__ import annotations

import os
from pathlib import Path

from components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.spec import backends, network, volumes
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


def resnet_job(ns: str, name: str, image: str, backend=backends.MPIJOB, *, epochs: int = 1,
               steps: int = 6, checkpoint_dir: str = "", gpu: str = "",
               run_id: str = "real") -> dict:
    """The job train_resnet_horovod builds (MPIJob, or TrainJob through the project's
    ClusterTrainingRuntime) for 2 Workers training the small ResNet for ``epochs`` x
    ``steps`` steps on Fashion-MNIST from the PVC ``fashion`` (/data), writing to the PVC
    ``work`` (/work/run), checkpoints to ``checkpoint_dir`` when given; CPU Workers, or
    ``gpu`` (a request, e.g. ``gpu:1``) each. Every pod is pinned to the real node by the
    builder's own placement (the MPIJob's Launcher too)."""
    args = rt.trainer_args(
        "/data/fashion-mnist", "", "/work/run", epochs=epochs, batch_size=32,
        steps_per_epoch=steps, learning_rate=0.001, lr_warmup_steps=2, optimizer="adam",
        model="small", blocks=1, width=8, mixed_precision=False, xla=False, seed=7,
        checkpoint_dir=checkpoint_dir)
    settings = {**rt.cpu_worker_settings(), **ON_REAL_NODE, **({"gpu": gpu} if gpu else {}),
                "worker_cpu": "500m", "worker_memory": "1Gi",
                "volumes": (volumes.PvcMount("fashion", "/data", read_only=True),
                            volumes.PvcMount("work", "/work"))}
    opts = rt.job_options(
        name=name, namespace=ns, image=image, args=args, workers=2, settings=settings,
        rdma=False, rdma_resource=network.RDMA_SHARED_DEVICE_A, multus_networks="",
        nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="", shm_size="256Mi",
        run_id=run_id, task_name="train-resnet-horovod", policy=rt.policy_settings())
    job = rt.build_job(backend, opts, runtime_image=image)
    if backend is backends.MPIJOB:
        # The Launcher goes to the real node too (the placement options are the Workers').
        launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        launcher.update(pod_placement())
    return job


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
    """The two PVCs of :func:`resnet_job` (``fashion``, ``work``) bound to
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
