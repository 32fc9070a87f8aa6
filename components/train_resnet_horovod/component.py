"""KFP component ``train_resnet_horovod``: Horovod ResNet training as an MPIJob or a TrainJob (or
mpirun locally)."""

import dataclasses

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from kfp_gpu.release import images


@dsl.component(
    # The trainer image (TensorFlow + kfp-gpu + kubernetes client), not the slim launcher
    # image: cluster mode stages the Datasets (kfp_gpu.training.datasets.load_arrays imports
    # TensorFlow) and local mode runs the trainer in this container.
    base_image=images.image(images.TRAINER),
    install_kfp_package=False,
    # The GPU request, tolerations and node selector set on this task go to the MPIJob
    # Workers (through ``task_config``), not to this launcher pod; env goes to both. PVCs
    # mounted on the task (kfp.kubernetes.mount_pvc) go to the Workers AND stay on this pod
    # (apply_to_task): it stages the data on the shared volume and fetches the model.
    task_config_passthroughs=[
        dsl.TaskConfigField.RESOURCES,
        dsl.TaskConfigField.KUBERNETES_TOLERATIONS,
        dsl.TaskConfigField.KUBERNETES_NODE_SELECTOR,
        # env on this pod too: the Secret env (kfp-gpu compile --secret-env) gives it the
        # credentials to stage the data in an s3:// work_dir and fetch the model from it.
        dsl.TaskConfigPassthrough(field=dsl.TaskConfigField.ENV, apply_to_task=True),
        dsl.TaskConfigPassthrough(field=dsl.TaskConfigField.KUBERNETES_VOLUMES,
                                  apply_to_task=True),
    ],
)
def train_resnet_horovod(
    train_data: Input[Dataset],
    test_data: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
    mpijob: Output[Artifact],
    trainer_metrics: Output[Artifact],
    task_config: dsl.TaskConfig,
    execution: str = "auto",
    local_processes: int = 2,
    workers: int = 1,
    epochs: int = 1,
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
    seed: int = 0,
    work_dir: str = "",
    checkpoint_dir: str = "",
    worker_gpu: str = "",
    image: str = "",  # compiled default: the Horovod image (see the end of this module)
    namespace: str = "",
    backend: str = "mpijob",
    runtime_image: str = "",  # compiled default: the Horovod image
    rdma: bool = False,
    rdma_resource: str = "rdma/rdma_shared_device_a",
    multus_networks: str = "",
    nccl_ib_hca: str = "",
    nccl_net_gdr_level: str = "",
    nccl_socket_ifname: str = "",
    shm_size: str = "",
    single_gpu_img_per_sec: float = 0.0,
    run_id: str = "",
    task_name: str = "train-resnet-horovod",
    pending_timeout_s: int = 600,
    active_deadline_seconds: int = 0,
    backoff_limit: int = 0,
    min_available: int = 0,
    queue: str = "",
    priority_class: str = "",
    schedule_timeout_seconds: int = 0,
    min_resources: dict = {},  # noqa: B006 - KFP reads the literal as the default
    kueue_queue: str = "",
):
    """Data-parallel ResNet training with Horovod: an MPIJob or TrainJob on a cluster, mpirun
    locally.

    ``execution``: ``cluster`` builds a ``kubeflow.org/v2beta1`` MPIJob (kfp_gpu.mpi.spec.mpijob:
    ``workers`` Worker pods x the GPUs each, one rank per GPU; or a TrainJob, ``backend``)
    and follows it with
    kfp_gpu.mpi.launch.launcher (record first, re-attach on retry, delete on cancel); ``local`` runs
    the same trainer as ``mpirun -np local_processes`` in this container (CPU is fine);
    ``auto`` = cluster inside Kubernetes, local otherwise (kfp.local).

    The Worker GPU request is ``worker_gpu`` (kfp_gpu.gpu text, e.g. ``gpu:8``,
    ``mig:1g.10gb``, ``dra:gpu=1``; "" = CPU Workers): each Worker pod gets its resource or
    claim, node selector, tolerations, annotations and env. Tolerations, node selectors,
    env and CPU/memory set on THIS task are passed through ``task_config`` to the Workers,
    not applied to this pod; an accelerator set on this task (``set_accelerator_*``) is a
    ValueError: the request goes as text.

    Args:
        train_data, test_data: ``(uint8 [H, W, C], int32 label)`` Datasets (prep_images).
        epochs, batch_size (per GPU), steps_per_epoch (0 = whole shard), learning_rate
            (per worker; x world size after lr_warmup_steps linear warm-up), optimizer
            (sgd|adam), model_name (small|resnet50), blocks, width, seed: trainer settings
            (kfp_gpu.training.horovod_config).
        mixed_precision, xla: True (default) = the trainer's GPU default: GPU ranks compile
            the step with XLA in ``mixed_bfloat16`` (compute capability >= 8.0; float16
            with loss scaling below), CPU ranks stay float32 without XLA
            (kfp_gpu.training.horovod_config.precision_plan); False = off everywhere.
        work_dir: cluster: ``gs://`` / ``s3://`` URI or a path under a PVC mounted on this
            task with ``kfp.kubernetes.mount_pvc`` / ``kfp-gpu compile --pvc`` (passed
            through: the Workers mount it at the same path) where the Workers read the
            staged data and rank 0 writes model, checkpoints and ``metrics.json``; default
            ``<model URI>-work`` for gs:// and s3://, else ``<first PVC mount
            path>/<MPIJob name>``. A local path outside every mounted PVC is refused
            (ValueError). ``s3://`` needs the AWS variables on the task (``kfp-gpu compile
            --secret-env SECRET``), which reach the MPIJob/TrainJob pods too.
        checkpoint_dir: where checkpoints go (resumable); default ``<work_dir>/checkpoints``
            (local: beside the model output; an ``s3://`` work_dir: rank 0's pod, as
            TensorFlow writes no s3://); a PVC path or ``gs://``.
        image, namespace: image of the MPIJob Launcher/Workers (TrainJob: ``trainer.image``)
            and namespace (default this pod's). The compiled default of ``image`` is the
            Horovod image of the registry ``kfp-gpu compile --registry`` was given (a
            constant in the YAML; nothing is read from this pod's environment); an empty
            ``image`` is a ValueError in cluster mode.
        runtime_image: backend ``trainjob``: the image the ClusterTrainingRuntime
            ``kfp-gpu-horovod`` runs its nodes on (compiled default: the same Horovod image,
            which ``compile -o DIR`` also writes into DIR/manifests/trainer). Kubeflow
            Trainer v2.3 gives ``trainer.image`` to the launcher only, so an ``image``
            other than this is refused before anything is created.
        backend: ``mpijob`` (default: a ``kubeflow.org/v2beta1`` MPIJob, MPI Operator) or
            ``trainjob`` (a Kubeflow Trainer v2 ``trainer.kubeflow.org/v1alpha1`` TrainJob on
            the ``kfp-gpu-horovod`` ClusterTrainingRuntime of manifests/trainer; the launcher
            is node 0, so ``workers`` pods hold all ranks). Same options, same launcher
            (kfp_gpu.mpi.spec.backends); any other value is a ValueError, also in local mode.
        rdma, rdma_resource, multus_networks, nccl_*, shm_size: Worker networking
            (kfp_gpu.mpi.spec.options.MPIJobOptions). ``rdma``: the Workers request
            ``rdma_resource`` for NCCL and check at start that their memlock limit
            (``RLIMIT_MEMLOCK``, the node's container runtime sets it) is unlimited or at
            least 1 GiB; they run as uid 1000, where an added ``IPC_LOCK`` would lift no
            limit (Kubernetes gives no ambient capabilities), so none is added.
        single_gpu_img_per_sec: a 1-GPU baseline; adds ``scaling_efficiency``.
        run_id, task_name: make the MPIJob name deterministic per run and task (pass
            ``dsl.PIPELINE_JOB_ID_PLACEHOLDER`` / ``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``);
            the model output's URI is hashed in too (``kfp_gpu.mpi.spec.names.job_name``
            ``instance``): the driver makes it once per task execution, so each
            ``dsl.ParallelFor`` iteration gets its own job and a retry re-attaches.
        pending_timeout_s: seconds the job may take to reach Running; then it is deleted
            and the task fails with the pods' reason (``Unschedulable: 0/8 nodes are
            available: ...``, ``ImagePullBackOff``...); 0 = wait forever.
        active_deadline_seconds, backoff_limit: ``runPolicy`` (0 = unset / no retry;
            TrainJob: ``spec.activeDeadlineSeconds``, backoff_limit must stay 0).
        min_available, queue, priority_class, schedule_timeout_seconds, min_resources:
            gang scheduling, ``runPolicy.schedulingPolicy`` (MPIJob only; 0/""/{} = unset;
            kfp_gpu.mpi.spec.scheduling); ``min_resources`` maps resource names to quantities,
            e.g. ``{"nvidia.com/gpu": "16", "cpu": "64"}`` (the PodGroup's minResources,
            scheduler-plugins coscheduling). Under ``WaitForWorkersReady`` (the default)
            ``min_available`` defaults to ``workers`` (the Launcher is created after them).
        kueue_queue: the Kueue LocalQueue (label ``kueue.x-k8s.io/queue-name``); the job is
            created suspended and waits for quota (not counted against
            ``pending_timeout_s``), its Launcher waits for the Workers' sshd.

    Outputs:
        model: directory with ``model.keras`` (keras.saving.load_model).
        metrics: img_per_sec_per_gpu, img_per_sec_total, samples_per_sec, ms_per_step,
            world_size, final/test loss and accuracy, weights_identical (1/0), ...
        mpijob: JSON record of the MPIJob (apiVersion, kind, namespace, name, uid); local:
            the mpirun command.
        trainer_metrics: rank 0's full metrics JSON (cluster: ``<work_dir>/metrics.json``
            with per-rank img/sec and weight checksums when readable, else the launcher
            log's ``METRICS`` line; ``metrics_source`` says which).

    Raises:
        ValueError: bad settings, before anything is launched.
        RuntimeError / kfp_gpu.mpi.launch.launcher.MPIJobFailed: the training failed.
    """
    import json
    import logging

    from kfp_gpu.components.train_resnet_horovod import run_training as rt
    from kfp_gpu.inputs import storage
    from kfp_gpu.mpi.spec import backends

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    mode = rt.execution_mode(execution)
    job_backend = backends.get(backend)  # ValueError naming mpijob | trainjob
    hyper = {"epochs": epochs, "batch_size": batch_size, "steps_per_epoch": steps_per_epoch,
             "learning_rate": learning_rate, "lr_warmup_steps": lr_warmup_steps,
             "optimizer": optimizer, "model": model_name, "blocks": blocks, "width": width,
             "mixed_precision": mixed_precision, "xla": xla, "seed": seed}
    if mode == "local":
        out = model.path.rstrip("/") + ".run"
        metrics_path = f"{out}/metrics.json"
        args = rt.trainer_args(train_data.path, test_data.path, out, model_dir=model.path,
                               metrics_path=metrics_path,
                               checkpoint_dir=checkpoint_dir or f"{out}/checkpoints", **hyper)
        storage.write_text(mpijob.path, json.dumps(
            {"execution": "local", "processes": local_processes, "args": args}, indent=2))
        result = rt.run_local(args, local_processes, metrics_path)
    else:
        from kfp_gpu import kube
        from kfp_gpu.mpi.spec.names import job_name

        settings = rt.worker_settings(task_config, worker_gpu)
        name = job_name(run_id or model.uri, task_name, prefix="resnet", instance=model.uri)
        work_dir = rt.resolve_work_dir(work_dir, model.uri, settings["volumes"], name)
        if checkpoint_dir:
            checkpoint_dir = rt.resolve_work_dir(checkpoint_dir, model.uri, settings["volumes"],
                                                 name, what="checkpoint_dir")
        checkpoint_dir = rt.checkpoint_dir_for(work_dir, checkpoint_dir)
        data_uri = f"{work_dir}/{rt.DATA_FILE}"
        args = rt.trainer_args(data_uri, "", work_dir, checkpoint_dir=checkpoint_dir, **hyper)
        opts = rt.job_options(
            name=name,
            namespace=namespace or kube.pod_namespace(), image=rt.job_image(image), args=args,
            workers=workers, settings=settings, rdma=rdma,
            rdma_resource=rdma_resource, multus_networks=multus_networks,
            nccl_ib_hca=nccl_ib_hca, nccl_net_gdr_level=nccl_net_gdr_level,
            nccl_socket_ifname=nccl_socket_ifname, shm_size=shm_size, run_id=run_id,
            task_name=task_name, policy=rt.policy_settings(
                active_deadline_seconds, backoff_limit, min_available, queue,
                priority_class, schedule_timeout_seconds, min_resources, kueue_queue))
        # ValueError here, before anything is written/created
        job = rt.build_job(job_backend, opts, runtime_image=runtime_image)
        rt.stage_data(train_data.path, test_data.path, data_uri)
        result = rt.run_cluster(job, mpijob.path, work_dir, model.path,
                                pending_timeout_s=pending_timeout_s)
    storage.write_text(trainer_metrics.path, json.dumps(result, indent=2, sort_keys=True))
    for key, value in rt.kfp_scalar_metrics(result, single_gpu_img_per_sec).items():
        metrics.log_metric(key, value)
    model.metadata.update({"framework": "keras", "file": "model.keras",
                           "execution": mode, "world_size": result.get("world_size")})
    from kfp_gpu import task_outputs  # one record line for `kfp-gpu submit --wait`

    task_outputs.emit({"model": model, "metrics": metrics, "mpijob": mpijob,
                       "trainer_metrics": trainer_metrics})


# The compiled defaults of ``image`` and ``runtime_image``: the Horovod image of the default
# ImageSet, which ``kfp-gpu compile --registry R`` rewrites in the YAML
# (kfp_gpu.release.images.apply). Set on the component's spec, not in the signature: KFP embeds
# the function's source in the YAML, and a reference there would be one compile cannot
# rewrite (the signature's "" is never used on a cluster: KFP's driver passes the
# compiled default).
for _input in ("image", "runtime_image"):
    train_resnet_horovod.component_spec.inputs[_input] = dataclasses.replace(
        train_resnet_horovod.component_spec.inputs[_input],
        default=images.image(images.HOROVOD))
