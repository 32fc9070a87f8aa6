"""The MPIJobOptions the tests build jobs from: one GPU request per kind
(:data:`REQUESTS`), the defaults (:func:`options`), every option group set
(:func:`every_option`), the golden job's options (:func:`golden_options`), and the local
runner's planner settings (:data:`SETTINGS`). Shared by the MPIJob, TrainJob, DRA,
local-runner and real-API-server tests."""

from __future__ import annotations

from kfp_gpu.mpi.spec import names, network, volumes
from kfp_gpu.mpi.spec.options import MPIJobOptions

#: One request per kind of kfp_gpu.gpu (text forms of gpu.parse).
REQUESTS = {
    "none": "none",
    "gpu": "gpu:8,product=NVIDIA-H100-80GB-HBM3",
    "mig": "mig:3g.40gb,model=H100-80GB",
    "shared": "shared:1,replicas=4,strategy=time-slicing",
    "fraction": "fraction:0.5,queue=team-a",
    "gpu-memory": "gpu-memory:8192",
    "metagpu": "metagpu:50",
    "hami": "hami:2,mem=8000,cores=30",
}


def options(**kw) -> MPIJobOptions:
    """The test job's options (two Workers in ``ml``, the horovod image, benchmark mode),
    with ``kw`` set over them."""
    base = {"name": names.job_name("run-0123", "train-resnet-horovod", prefix="resnet"),
            "image": "ghcr.io/kfp-gpu/kfp-gpu-horovod:0.1.0",
            "program": ("kfp-gpu", "train-resnet", "--mode", "benchmark"),
            "namespace": "ml", "workers": 2}
    base.update(kw)
    return MPIJobOptions.from_settings(**base)


#: The Secret volume of :func:`every_option` (a GCP key, as ``compile --secret-volume``).
SECRET_VOLUME = volumes.SecretMount("gcp-sa", "/var/secrets/google")


def every_option(kind: str, rdma: bool, **kw) -> MPIJobOptions:
    """Options that set every group: the request of ``kind`` (:data:`REQUESTS`), RDMA and
    NCCL settings, Multus, /dev/shm, Worker CPU/memory, a Secret volume
    (:data:`SECRET_VOLUME`), a toleration and a node selector (shared by the MPIJob,
    TrainJob and real-API-server tests)."""
    return options(gpu=REQUESTS[kind], rdma=rdma, nccl_ib_hca="mlx5_0,mlx5_1",
                   nccl_net_gdr_level="PHB", nccl_socket_ifname="eth0",
                   multus_networks="rdma-net" if rdma else "", shm_size="16Gi",
                   worker_cpu="8", worker_memory="64Gi", secret_volumes=(SECRET_VOLUME,),
                   tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml",
                                 "effect": "NoSchedule"}],
                   node_selector={"node.kubernetes.io/instance-type": "p5.48xlarge"}, **kw)


def golden_options() -> MPIJobOptions:
    """The options of the golden MPIJob (tests/golden/mpijob_rdma_gpu8.yaml)."""
    return options(gpu="gpu:8", workers=4, rdma=True,
                   rdma_resource=network.RDMA_HCA_SHARED_DEVICES_A,
                   multus_networks="ml/rdma-net@net1", nccl_ib_hca="mlx5_0,mlx5_1",
                   nccl_net_gdr_level="SYS", nccl_socket_ifname="^lo,docker0",
                   nccl_debug="WARN", env={"HOROVOD_FUSION_THRESHOLD": "67108864"},
                   shm_size="64Gi", worker_cpu="90", worker_memory="900Gi",
                   active_deadline_seconds=7200, ttl_seconds_after_finished=3600,
                   backoff_limit=1, run_id="run-0123", task_name="train-resnet-horovod",
                   service_account="horovod-ranks")


#: The program the local planner tests' jobs run.
PROGRAM = ("kfp-gpu", "train-resnet", "--mode", "train")
#: The options the local planner tests build from (tests/unit/test_mpi_local_plan.py and
#: tests/unit/test_mpi_local_plan_trainjob.py).
SETTINGS = {"name": "resnet-ab12", "namespace": "ml", "image": "reg.test/horovod:1",
            "program": PROGRAM, "workers": 3, "gpu": "gpu:2", "rdma": True, "shm_size": "2Gi",
            "fs_group": 1000,
            "volumes": (volumes.PvcMount("shared", "/mnt/shared"),
                        volumes.PvcMount("data", "/data", read_only=True, sub_path="fm"))}
