"""manifests/trainer: the Horovod ClusterTrainingRuntime renders (`kubectl kustomize`),
validates against the upstream Trainer v2.3.0 CRD (strict) and Kubernetes 1.30 pod
templates, and agrees with the MPIJob builder's image/ssh/user layout."""

from __future__ import annotations

import copy
import os
from functools import cache
from pathlib import Path

import kubernetes_validate
import yaml

from kfp_gpu.mpi.spec import ssh as mj
from kfp_gpu.release import images
from tests.support import upstream_crds
from tests.support.kustomize import kustomize

ROOT = Path(__file__).resolve().parents[2]
TRAINER_DIR = ROOT / "manifests" / "trainer"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


@cache
def runtime() -> dict:
    docs = kustomize(TRAINER_DIR)
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")]
    return docs[0]


def rjobs() -> dict[str, dict]:
    return {r["name"]: r for r in runtime()["spec"]["template"]["spec"]["replicatedJobs"]}


def pod(name: str) -> dict:
    return rjobs()[name]["template"]["spec"]["template"]


def test_runtime_validates_against_the_upstream_crd():
    upstream_crds.validate(runtime())
    for name in ("node", "launcher"):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
             "template": pod(name)}, "1.30.0", strict=True)


def test_upstream_crd_rejects_a_broken_runtime():
    bad = copy.deepcopy(runtime())
    bad["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "Intel"  # Trainer: OpenMPI only
    bad["spec"]["template"]["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Up"
    assert [e.json_path for e in upstream_crds.errors(bad)] == [
        "$.spec.mlPolicy.mpi.mpiImplementation",
        "$.spec.template.spec.replicatedJobs[1].dependsOn[0].status"]


def test_mpi_policy_matches_the_horovod_image_layout():
    spec = runtime()["spec"]
    assert runtime()["metadata"]["name"] == "kfp-gpu-horovod"
    assert spec["mlPolicy"]["mpi"] == {
        "numProcPerNode": 1, "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": mj.DEFAULT_SSH_AUTH_MOUNT_PATH, "runLauncherAsNode": True}
    assert list(rjobs()) == ["node", "launcher"]  # dependsOn needs node first
    for name in ("node", "launcher"):
        p = pod(name)
        (container,) = p["spec"]["containers"]
        # the MPI plugin mounts the ssh Secret / hostfile only into containers named "node"
        assert container["name"] == "node"
        assert container["image"] == images.ImageSet().image(images.HOROVOD)
        assert p["spec"]["securityContext"] == {"runAsUser": mj.MPI_USER_ID,
                                                "runAsGroup": mj.MPI_USER_ID,
                                                "fsGroup": mj.MPI_USER_ID}
        assert p["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
        assert p["metadata"]["labels"] == {"sidecar.istio.io/inject": "false"}
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in p["spec"]["volumes"]
        # GPUs, RDMA and IPC_LOCK are per job (resourcesPerNode / runtimePatches)
        assert "resources" not in container and "securityContext" not in container
        assert rjobs()[name]["template"]["spec"]["backoffLimit"] == 0
    node = pod("node")["spec"]["containers"][0]
    assert [*node["command"], *node["args"]] == list(mj.DEFAULT_WORKER_COMMAND)
    assert node["readinessProbe"]["tcpSocket"]["port"] == mj.SSH_PORT
    launcher = rjobs()["launcher"]
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert launcher["template"]["metadata"]["labels"] == {ANCESTOR: "trainer"}
    assert launcher["template"]["spec"]["template"]["spec"]["containers"][0]["command"][0] == \
        "mpirun"
    js = runtime()["spec"]["template"]["spec"]
    assert js["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    assert js["failurePolicy"] == {"maxRestarts": 0}


def test_another_registry_is_one_kustomize_images_entry(tmp_path):
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(TRAINER_DIR, overlay)],
        "images": [{"name": "ghcr.io/kfp-gpu/kfp-gpu-horovod",
                    "newName": "registry.example.com/ml/kfp-gpu-horovod"}]}))
    (doc,) = kustomize(overlay)
    found = [c["image"] for r in doc["spec"]["template"]["spec"]["replicatedJobs"]
             for c in r["template"]["spec"]["template"]["spec"]["containers"]]
    assert found == ["registry.example.com/ml/kfp-gpu-horovod:0.1.0"] * 2
