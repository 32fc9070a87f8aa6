"""Pipeline ``resnet-horovod``: prep_images -> train_resnet_horovod (MPIJob or TrainJob) ->
evaluate_classifier.

Data-parallel ResNet training with Horovod, the layout of the Mellanox deck: an MPIJob
(Kubeflow MPI Operator) with one Worker pod per node, each Worker holding the GPU request
given at compile time (default ``gpu:8``: eight whole GPUs, one Horovod rank each),
NCCL allreduce (over GPUDirect RDMA when ``rdma`` is on). The GPU request is set on the
training task and passed through to the Workers (KFP ``task_config_passthroughs``); the
task's own pod (the MPIJob launcher client) gets no GPU. Under ``kfp.local`` the same
trainer runs with ``mpirun -np 2`` on CPU. The ``backend`` parameter picks the job kind at
run time: ``mpijob`` (MPI Operator) or ``trainjob`` (Kubeflow Trainer v2 TrainJob on the
``kfp-gpu-horovod`` ClusterTrainingRuntime); see docs/distributed.md.
"""

from kfp import dsl

from kfp_gpu.components.prep_images.component import prep_images
from kfp_gpu.components.train_resnet_horovod.component import train_resnet_horovod
from kfp_gpu.gpu import parse
from kfp_gpu.pipelines.outputs import TrainingOutputs, evaluate_and_collect

NAME = "resnet-horovod"
DEFAULT_GPU = "gpu:8"
#: The parameter `kfp-gpu run --local --data-dir DIR` sets: (name, path under DIR).
LOCAL_DATA = ("source", "fashion-mnist")


def build(gpu: str = DEFAULT_GPU):
    """The ``resnet-horovod`` pipeline function; ``gpu`` is the request per MPIJob Worker.

    Args:
        gpu: GPU request text (kfp_gpu.gpu.parse), e.g. ``gpu:8``, ``gpu:1``,
            ``mig:3g.40gb``, ``none``.

    Raises:
        ValueError: invalid GPU request (raised here, before compilation).
    """
    request = parse(gpu)

    @dsl.pipeline(name=NAME, description="Horovod ResNet on Fashion-MNIST (or synthetic "
                  "images) as a Kubeflow MPIJob: prep_images -> train_resnet_horovod -> "
                  "evaluate_classifier.")
    def resnet_horovod(
        source: str = "fashion-mnist",
        max_rows_per_split: int = 0,
        execution: str = "auto",
        workers: int = 2,
        backend: str = "mpijob",
        local_processes: int = 2,
        epochs: int = 2,
        batch_size: int = 32,
        steps_per_epoch: int = 0,
        learning_rate: float = 0.0125,
        lr_warmup_steps: int = 100,
        optimizer: str = "sgd",
        model_name: str = "small",
        blocks: int = 2,
        width: int = 16,
        mixed_precision: bool = False,
        xla: bool = False,
        work_dir: str = "",
        rdma: bool = False,
        rdma_resource: str = "rdma/rdma_shared_device_a",
        multus_networks: str = "",
        nccl_ib_hca: str = "",
        nccl_socket_ifname: str = "",
        seed: int = 0,
        accuracy_threshold: float = 0.8,
    ) -> TrainingOutputs:
        prep = prep_images(source=source, max_rows_per_split=max_rows_per_split, seed=seed)
        prep.set_display_name("prep-images").set_cpu_limit("2").set_memory_limit("4G")
        train = train_resnet_horovod(
            train_data=prep.outputs["train_data"], test_data=prep.outputs["test_data"],
            execution=execution, workers=workers, backend=backend,
            local_processes=local_processes,
            epochs=epochs, batch_size=batch_size, steps_per_epoch=steps_per_epoch,
            learning_rate=learning_rate, lr_warmup_steps=lr_warmup_steps,
            optimizer=optimizer, model_name=model_name, blocks=blocks, width=width,
            mixed_precision=mixed_precision, xla=xla, work_dir=work_dir, rdma=rdma,
            rdma_resource=rdma_resource, multus_networks=multus_networks,
            nccl_ib_hca=nccl_ib_hca, nccl_socket_ifname=nccl_socket_ifname, seed=seed,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER)
        train.set_display_name("train-resnet-horovod")
        # Passed through to the MPIJob Workers (task_config), not applied to this pod.
        request.apply_to_task(train)
        train.set_caching_options(False)
        return evaluate_and_collect(train, prep.outputs["test_data"], accuracy_threshold)

    return resnet_horovod
