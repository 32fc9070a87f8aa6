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
from kfp_gpu.dsl import k8s_rules, task_settings
from kfp_gpu.dsl.entry import PipelineEntry
from kfp_gpu.dsl.parameters import (
    check_signature,
    declare,
    documented,
    flag,
    integer,
    number,
    text,
)
from kfp_gpu.gpu import parse
from kfp_gpu.pipelines.outputs import EVALUATE_RESOURCES, TrainingOutputs, evaluate_and_collect

_NAME = "resnet-horovod"
_DEFAULT_GPU = "gpu:8"
#: The parameter `kfp-gpu run --local --data-dir DIR` sets: (name, path under DIR).
_LOCAL_DATA = ("source", "fashion-mnist")

#: Each task's default CPU/memory (display name -> Resources); `kfp-gpu compile
#: --resources TASK=cpu:Q,memory:Q` overrides them. The training task's own pod runs only
#: the MPIJob client: its CPU/memory (none by default) go to each Worker (passthrough).
_TASK_RESOURCES = {
    "prep-images": task_settings.Resources(cpu_limit="2", memory_limit="4G"),
    "train-resnet-horovod": task_settings.Resources(),
    "evaluate": EVALUATE_RESOURCES,
}

#: Every pipeline parameter: type, accepted values, meaning (kfp_gpu.dsl.parameters).
#: Checked before any task starts (`run --local`, `submit`) and against the signature at
#: compile time. Choices and ranges are the component's own checks made early
#: (components/train_resnet_horovod/run_training.py EXECUTIONS,
#: kfp_gpu/training/horovod_config.py OPTIMIZERS and resolved(), resnet_models.MODELS,
#: kfp_gpu/mpi/spec/backends.py BACKENDS, components/prep_images/prep.py); rdma_resource by
#: Kubernetes' rule for resource names (a qualified name, kfp_gpu.dsl.k8s_rules).
_PARAMETERS = declare(
    text("source", "images: fashion-mnist, synthetic, an IDX folder or .npz file (a PVC "
         "path), or a gs:// / s3:// .npz URI",
         required=True, path_keywords=("fashion-mnist", "synthetic"), schemes=("gs", "s3")),
    integer("max_rows_per_split", "rows kept per split (0 = all)", 0),
    text("execution", "where the trainer runs (auto: cluster inside a KFP pod, else local)",
         ("auto", "local", "cluster")),
    integer("workers", "MPIJob Workers (pods), each with the compile-time GPU request", 1),
    text("backend", "distributed job kind: MPI Operator MPIJob or Kubeflow Trainer TrainJob",
         ("mpijob", "trainjob")),
    integer("local_processes", "mpirun -np for local execution", 1),
    integer("epochs", "training epochs", 1),
    integer("batch_size", "images per step per GPU/process", 1),
    integer("steps_per_epoch", "steps per epoch (0 = the whole split)", 0),
    number("learning_rate", "learning rate per worker (scaled by the world size)", 0,
           low_open=True),
    integer("lr_warmup_steps", "linear learning-rate warm-up steps", 0),
    text("optimizer", "optimizer (sgd: momentum 0.9)", ("sgd", "adam")),
    text("model_name", "ResNet variant", ("small", "resnet50")),
    integer("blocks", "small model: residual blocks per stage", 1),
    integer("width", "small model: first-stage filters", 1),
    flag("mixed_precision", "GPU ranks: bfloat16 compute on compute capability >= 8.0, "
         "float16 + loss scaling below; CPU ranks stay float32 (false: float32 everywhere)"),
    flag("xla", "GPU ranks: XLA-compile the training step; CPU ranks stay uncompiled "
         "(false: off everywhere)"),
    text("work_dir", "shared folder (PVC path) or gs:// / s3:// URI the Workers read and "
         "write ('' = derived from the model artifact)", schemes=("gs", "s3"),
         bucket_root=True),
    flag("rdma", "NCCL over RDMA: each Worker requests rdma_resource and checks at start that "
         "its memlock limit (RLIMIT_MEMLOCK, set by the node's container runtime) is unlimited "
         "or >= 1 GiB; the Workers run as uid 1000, where IPC_LOCK lifts no limit, so none "
         "is added"),
    text("rdma_resource", "RDMA extended resource of the Workers (with rdma)", required=True,
         rule=k8s_rules.extended_resource, rule_words="an extended resource name DOMAIN/NAME (a "
         "Kubernetes qualified name, e.g. rdma/rdma_shared_device_a)"),
    text("multus_networks", "Multus network attachment annotation of the Workers ('' = none)"),
    text("nccl_ib_hca", "NCCL_IB_HCA for the Workers ('' = NCCL's default)"),
    text("nccl_socket_ifname", "NCCL_SOCKET_IFNAME for the Workers ('' = NCCL's default)"),
    integer("seed", "initialisation/shuffle seed", 0, 2**32 - 1),
    number("accuracy_threshold", "test accuracy the run must reach to pass", 0, 1),
)


def build(gpu: str = _DEFAULT_GPU, settings: task_settings.TaskSettings | None = None):
    """The ``resnet-horovod`` pipeline function; ``gpu`` is the request per MPIJob Worker.

    Args:
        gpu: GPU request text (kfp_gpu.gpu.parse), e.g. ``gpu:8``, ``gpu:1``,
            ``mig:3g.40gb``, ``dra:mig=1g.10gb`` (DRA claims on the Workers), ``none``.
        settings: credentials, volumes and CPU/memory overrides for every task
            (:mod:`kfp_gpu.dsl.task_settings`). The training task passes its Secret env,
            PVCs and CPU/memory through to the MPIJob/TrainJob pods (its
            ``task_config_passthroughs``): ``--resources train-resnet-horovod=...`` sizes
            each Worker.

    Raises:
        ValueError: invalid GPU request or settings (raised here, before compilation).
    """
    # The Workers' request goes to the component as its own text (worker_gpu), for every
    # kind: the component builds the Worker pods from it (kfp_gpu.mpi.spec.mpijob
    # worker_template: resource, claim, node selector, tolerations, annotations, env), and
    # this task's own pod (the MPIJob client) needs no GPU.
    worker_gpu = parse(gpu).to_text()

    @dsl.pipeline(name=_NAME, description="Horovod ResNet on Fashion-MNIST (or synthetic "
                  "images) as a Kubeflow MPIJob: prep_images -> train_resnet_horovod -> "
                  "evaluate_classifier.")
    @documented(_PARAMETERS)  # meanings and ranges into the compiled YAML
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
        mixed_precision: bool = True,
        xla: bool = True,
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
        task_settings.apply(prep, "prep-images", settings, _TASK_RESOURCES["prep-images"])
        train = train_resnet_horovod(
            train_data=prep.outputs["train_data"], test_data=prep.outputs["test_data"],
            execution=execution, workers=workers, backend=backend, local_processes=local_processes,
            epochs=epochs, batch_size=batch_size, steps_per_epoch=steps_per_epoch,
            learning_rate=learning_rate, lr_warmup_steps=lr_warmup_steps,
            optimizer=optimizer, model_name=model_name, blocks=blocks, width=width,
            mixed_precision=mixed_precision, xla=xla, work_dir=work_dir, rdma=rdma,
            rdma_resource=rdma_resource, multus_networks=multus_networks,
            nccl_ib_hca=nccl_ib_hca, nccl_socket_ifname=nccl_socket_ifname, seed=seed,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
            worker_gpu=worker_gpu)
        task_settings.apply(train, "train-resnet-horovod", settings,
                            _TASK_RESOURCES["train-resnet-horovod"])
        train.set_caching_options(False)
        return evaluate_and_collect(train, prep.outputs["test_data"], accuracy_threshold,
                                    settings=settings)

    check_signature(_PARAMETERS, resnet_horovod)
    return resnet_horovod


#: What the catalog reads (kfp_gpu.catalog.discover): this module's one export.
ENTRY = PipelineEntry(
    name=_NAME,
    build=build,
    parameters=_PARAMETERS,
    default_gpu=_DEFAULT_GPU,
    local_data=_LOCAL_DATA,
    task_resources=_TASK_RESOURCES,
)
