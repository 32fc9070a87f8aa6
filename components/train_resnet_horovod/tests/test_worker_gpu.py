"""The Workers' GPU request, from ``kfp-gpu compile --gpu`` to the MPIJob Worker pod, for
every kind: one channel, the request's own text.

resnet-horovod is compiled for a request of each kind (and ``--resources
train-resnet-horovod=cpu:4,memory:8G``); the compiled training task passes the request as
its ``worker_gpu`` constant and carries no accelerator itself. The KFP 2.17 driver
emulation (tests/support/kfp_driver.py) turns the compiled task into the ``TaskConfig`` the
component receives; the component's own helpers then build the MPIJob, whose Worker pod
must hold what the request asks for, in the device plugin's or scheduler's own names
(NVIDIA k8s-device-plugin ``nvidia.com/gpu``, ``nvidia.com/mig-<profile>``,
``nvidia.com/gpu.shared``; KAI Scheduler ``gpu-fraction`` / ``gpu-memory`` annotations;
cnvrg MetaGPU ``cnvrg.io/metagpu``; HAMi ``nvidia.com/gpumem`` / ``nvidia.com/gpucores``;
a DRA claim), next to the CPU/memory the task passed through.
"""

from __future__ import annotations

import pytest

from kfp_gpu import gpu
from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.dsl import task_settings
from kfp_gpu.mpi.spec import mpijob
from tests.support import kfp_driver

JOB = "resnet-w"
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SIZED = task_settings.from_options(resources=["train-resnet-horovod=cpu:4,memory:8G"])

#: kind -> (request text, Worker extended resources, Worker pod annotations beyond the
#: Istio opt-out, Worker nodeSelector, slotsPerWorker).
CASES = {
    "none": ("none", {}, {}, {}, 1),
    "gpu": ("gpu:2,product=NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": "2"}, {},
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, 2),
    "mig": ("mig:1g.10gb", {"nvidia.com/mig-1g.10gb": "1"}, {}, {}, 1),
    "shared": ("shared:1,replicas=4,renamed=true", {"nvidia.com/gpu.shared": "1"}, {}, {}, 1),
    "fraction": ("fraction:0.5", {}, {"gpu-fraction": "0.5",
                                      "gpu-fraction-container-name": "worker"}, {}, 1),
    "gpu-memory": ("gpu-memory:8192", {}, {"gpu-memory": "8192",
                                           "gpu-fraction-container-name": "worker"}, {}, 1),
    "metagpu": ("metagpu:50", {"cnvrg.io/metagpu": "50"}, {}, {}, 1),
    "hami": ("hami:1,mem=8000,cores=30", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000",
                                          "nvidia.com/gpucores": "30"}, {}, {}, 1),
    "dra": ("dra:gpu=1", {}, {}, {}, 1),
}


def test_every_kind_has_a_case():
    """A new kind of kfp_gpu.gpu gets its row here: nothing else to remember."""
    assert set(CASES) == set(gpu.KINDS)


def worker_of(request: str) -> tuple[dict, dict, dict]:
    """(compiled documents, the task's constants, the MPIJob built from them)."""
    docs = kfp_driver.compiled(SIZED, request)
    constants = kfp_driver.task_constants(docs)
    settings = rt.worker_settings(
        kfp_driver.driver_task_config(*kfp_driver.training_task(docs)),
        constants.get("worker_gpu", ""))
    opts = rt.job_options(
        name=JOB, namespace="ml", image="registry.test/horovod:1", args=["--mode", "train"],
        workers=2, settings=settings, rdma=False, rdma_resource="rdma/rdma_shared_device_a",
        multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
        shm_size="", run_id="r", task_name=kfp_driver.TASK)
    return docs, constants, mpijob.build(opts)


@pytest.mark.parametrize("kind", list(CASES))
def test_the_compiled_request_reaches_the_workers_as_text(kind):
    request, extended, annotations, selector, slots = CASES[kind]
    docs, constants, job = worker_of(request)

    # -- the compiled task: the request as text, no accelerator on the task itself
    assert gpu.parse(constants["worker_gpu"]) == gpu.parse(request)
    container, _, _ = kfp_driver.training_task(docs)
    assert "accelerator" not in (container.get("resources") or {})

    # -- the Worker pod: the request's resource (limit = request), CPU/memory passed through
    spec = job["spec"]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]
    res = worker["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"cpu": "4", "memory": "8G", **extended}
    assert res["requests"] == {"cpu": "4", "memory": "8G", **extended}
    meta = dict(worker["metadata"].get("annotations") or {})
    meta.pop("sidecar.istio.io/inject", None)
    assert meta == annotations
    assert worker["spec"].get("nodeSelector", {}) == selector
    tolerations = worker["spec"].get("tolerations") or []
    assert (GPU_TAINT in tolerations) == (kind != "none")
    assert spec["slotsPerWorker"] == slots
    if kind == "dra":
        assert res["claims"] == [{"name": "gpu"}]
        assert worker["spec"]["resourceClaims"] == [
            {"name": "gpu", "resourceClaimTemplateName": f"{JOB}-gpu"}]
    else:
        assert "claims" not in res and "resourceClaims" not in worker["spec"]

    # -- the Launcher (mpirun only) holds no GPU
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert not [n for part in (launcher.get("resources") or {}).values() for n in part
                if n not in ("cpu", "memory")]


def test_the_share_the_request_names_reaches_the_ranks():
    """Options the resource alone cannot say reach the Workers: ``shared:1,replicas=4``
    gives each rank a quarter of the device's memory (KFP_GPU_SHARE, the runtime cap)."""
    _, _, job = worker_of("shared:1,replicas=4,renamed=true")
    env = {e["name"]: e.get("value") for e in
           job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]}
    assert float(env["KFP_GPU_SHARE"]) == pytest.approx(0.25)


def test_an_accelerator_set_on_the_task_is_refused():
    """A pipeline of one's own that sets ``set_accelerator_limit`` on the task gets a
    ValueError naming worker_gpu (the driver passes the accelerator as a limit), not a
    request read back from the resource."""
    container, k8s, component = kfp_driver.compiled_task(SIZED, "gpu:1")
    container = {**container, "resources": {
        **container.get("resources", {}),
        "accelerator": {"resourceType": "nvidia.com/gpu", "resourceCount": "1"}}}
    cfg = kfp_driver.driver_task_config(container, k8s, component)
    assert cfg.resources["limits"]["nvidia.com/gpu"] == "1"
    with pytest.raises(ValueError, match="nvidia.com/gpu.*worker_gpu"):
        rt.worker_settings(cfg, "gpu:1")
