"""train_resnet_horovod logic: run the Horovod trainer locally (mpirun) or as an MPIJob.

Pure helpers (:func:`execution_mode`, :func:`worker_settings`,
:func:`trainer_args`, :func:`job_options`; the mpirun line: :mod:`kfp_gpu.mpi.spec.mpirun`)
are separate from the two runners with I/O, :func:`run_local` and :func:`run_cluster`;
rank 0's metrics and the KFP scalars are in :mod:`.results`, the task's PVC and Secret
mounts in :mod:`.mounts` (both re-exported here).

KFP ``TaskConfig`` (kfp 2.17, ``kfp/dsl/task_config.py``): with ``task_config_passthroughs``
the task's resources, tolerations, node selector, env and volumes (Kubernetes JSON) are
not applied to the task's own pod but handed to the component; :func:`worker_settings`
turns them and the Workers' GPU request (the ``worker_gpu`` input: the request's own text,
the one channel for every kind) into the Worker settings. Volumes pass with ``apply_to_task=True``: a PVC from
``kfp.kubernetes.mount_pvc`` is on the task's pod AND on the Workers (:func:`pvc_mounts`); a
Secret from ``kfp.kubernetes.use_secret_as_volume`` (``kfp-gpu compile --secret-volume``)
is on the task's pod AND on the Launcher and every Worker (:func:`secret_mounts`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kfp_gpu.components.train_resnet_horovod.mounts import (
    pvc_mounts,
    secret_mounts,
    unmounted_credentials,
)
from kfp_gpu.components.train_resnet_horovod.places import (  # noqa: F401 - rt.<name>
    POD_CHECKPOINTS,
    checkpoint_dir_for,
    resolve_work_dir,
)
from kfp_gpu.components.train_resnet_horovod.results import (  # noqa: F401 - rt.<name>
    CONSISTENCY_KEYS,
    choose_metrics,
    kfp_scalar_metrics,
    read_metrics_file,
)
from kfp_gpu.inputs import storage
from kfp_gpu.mpi.spec import mpirun

log = logging.getLogger(__name__)

EXECUTIONS = ("auto", "local", "cluster")
#: Set in every pod by Kubernetes; absent under kfp.local on a workstation.
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
DATA_FILE = "data.npz"


def execution_mode(execution: str, environ: Mapping[str, str] | None = None) -> str:
    """``local`` or ``cluster``: ``auto`` is ``cluster`` inside a Kubernetes pod, else ``local``.

    Raises:
        ValueError: ``execution`` not one of auto, local, cluster.
    """
    if execution not in EXECUTIONS:
        raise ValueError(f"execution {execution!r}; accepted: {', '.join(EXECUTIONS)}")
    if execution != "auto":
        return execution
    env = os.environ if environ is None else environ
    return "cluster" if env.get(IN_CLUSTER_ENV) else "local"


#: The resources a Kubernetes container spec has besides extended resources
#: (kubernetes/kubernetes ``pkg/apis/core/types.go``: ``ResourceCPU``, ``ResourceMemory``,
#: ``ResourceEphemeralStorage``; ``hugepages-<size>`` by prefix). Anything else in the
#: task's passed-through resources is an extended resource such as an accelerator.
CORE_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def task_accelerators(resources: Mapping | None) -> list[str]:
    """The extended resources (accelerators) in Kubernetes ``resources`` passed through from
    the task (``{"limits": {...}, "requests": {...}}``; the KFP 2.17 driver writes a task's
    ``set_accelerator_type``/``_limit`` there as a limit, ``backend/src/v2/driver/driver.go``
    ``initPodSpecPatch``), sorted; [] when there are none (cpu, memory, ephemeral-storage
    and ``hugepages-*`` only)."""
    res = resources or {}
    names = {*(res.get("requests") or {}), *(res.get("limits") or {})}
    return sorted(n for n in names
                  if n not in CORE_RESOURCES and not n.startswith("hugepages-"))


def cpu_worker_settings() -> dict:
    """CPU-only Worker settings, keys as :func:`worker_settings` (asked for explicitly)."""
    return {"gpu": "none", "tolerations": [], "node_selector": {}, "env": {}, "secret_env": (),
            "worker_cpu": "", "worker_memory": "", "worker_cpu_limit": "",
            "worker_memory_limit": "", "volumes": (), "secret_volumes": ()}


def worker_settings(task_config, gpu: str = "none") -> dict:
    """MPIJob Worker settings from a ``dsl.TaskConfig`` (or None) and the Workers' GPU
    request text ``gpu`` (the component's ``worker_gpu``; "" = ``none``): a dict with
    ``gpu`` (the request's canonical text, :func:`kfp_gpu.gpu.parse`), ``tolerations``,
    ``node_selector``, ``env`` (name -> value),
    ``secret_env`` (the entries with ``valueFrom.secretKeyRef``, e.g. from ``kfp-gpu compile
    --secret-env``: the KFP 2.17 driver puts a task's Secret env into ``TaskConfig.env``
    when ENV is passed through, ``backend/src/v2/driver/k8s.go`` ``extendPodSpecPatch``;
    other ``valueFrom`` entries such as field refs are dropped), ``worker_cpu`` and ``worker_memory`` (requests; the
    limit when no request is set, as Kubernetes does) and ``worker_cpu_limit`` and
    ``worker_memory_limit`` (limits) (quantities or ""), ``volumes`` (tuple of
    :class:`kfp_gpu.mpi.spec.volumes.PvcMount`, :func:`pvc_mounts`) and ``secret_volumes``
    (tuple of :class:`kfp_gpu.mpi.spec.volumes.SecretMount`, :func:`secret_mounts`).

    The GPU request has one channel, its text: an accelerator set on the task
    (``set_accelerator_type``/``_limit``, passed through as a resource) is refused rather
    than translated back into a request.

    Raises:
        ValueError: ``task_config`` is None (a KFP backend too old to pass it); an
            extended resource among the task's resources (:func:`task_accelerators`); an
            invalid ``gpu`` (from :func:`kfp_gpu.gpu.parse`, naming the accepted forms).
    """
    from kfp_gpu import gpu as gpu_requests

    if task_config is None:
        raise ValueError("no task_config, so the Workers' GPUs and placement are unknown: "
                         "task_config_passthroughs needs a KFP backend >= 2.15.0 "
                         "(kubeflow/pipelines PR #12185); for CPU use cpu_worker_settings()")
    res = task_config.resources or {}
    accelerators = task_accelerators(res)
    if accelerators:
        raise ValueError(f"the task's resources name {', '.join(accelerators)}: the Workers' "
                         "GPU request is the worker_gpu input (GPU request text, e.g. gpu:8 "
                         "or mig:1g.10gb), not an accelerator set on the task; pass "
                         "worker_gpu and leave set_accelerator_type/limit off this task")
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    return {
        "gpu": gpu_requests.parse(gpu or "none").to_text(),
        "tolerations": list(task_config.tolerations or []),
        "node_selector": dict(task_config.node_selector or {}),
        "env": {e["name"]: str(e["value"]) for e in (task_config.env or [])
                if "value" in e and e.get("name")},
        "secret_env": tuple({"name": e["name"], "valueFrom": {"secretKeyRef": dict(
            e["valueFrom"]["secretKeyRef"])}} for e in (task_config.env or [])
            if e.get("name") and (e.get("valueFrom") or {}).get("secretKeyRef")),
        "worker_cpu": str(requests.get("cpu", limits.get("cpu", ""))),
        "worker_memory": str(requests.get("memory", limits.get("memory", ""))),
        "worker_cpu_limit": str(limits.get("cpu", "")),
        "worker_memory_limit": str(limits.get("memory", "")),
        "volumes": pvc_mounts(task_config.volumes, task_config.volume_mounts),
        "secret_volumes": secret_mounts(task_config.volumes, task_config.volume_mounts),
    }


def trainer_args(data: str, test_data: str, output_dir: str, *, epochs: int, batch_size: int,
                 steps_per_epoch: int, learning_rate: float, lr_warmup_steps: int,
                 optimizer: str, model: str, blocks: int, width: int, mixed_precision: bool,
                 xla: bool, seed: int, model_dir: str = "", metrics_path: str = "",
                 checkpoint_dir: str = "") -> list[str]:
    """The ``train-resnet`` flags (argv after the program) for train mode.

    Validates them through :class:`kfp_gpu.training.horovod_config.HorovodConfig` first.

    Raises:
        ValueError: an out-of-range setting (before anything is launched).
    """
    from kfp_gpu.training import horovod_config

    horovod_config.HorovodConfig(
        mode="train", model=model, data=data, test_data=test_data, batch_size=batch_size,
        epochs=epochs, steps=steps_per_epoch, lr=learning_rate, lr_warmup_steps=lr_warmup_steps,
        optimizer=optimizer, blocks=blocks, width=width).resolved()
    args = ["--mode", "train", "--data", data, "--epochs", str(epochs),
            "--batch-size", str(batch_size), "--steps", str(steps_per_epoch),
            "--lr", repr(float(learning_rate)), "--lr-warmup-steps", str(lr_warmup_steps),
            "--optimizer", optimizer, "--model", model, "--blocks", str(blocks),
            "--width", str(width), "--seed", str(seed), "--output-dir", output_dir]
    if test_data:
        args += ["--test-data", test_data]
    for flag, value in (("--model-dir", model_dir), ("--metrics-path", metrics_path),
                        ("--checkpoint-dir", checkpoint_dir)):
        if value:
            args += [flag, value]
    # True leaves the choice to the trainer's GPU default (on with a GPU, off on CPU:
    # horovod_config.precision_plan); False turns it off everywhere.
    if not mixed_precision:
        args.append("--no-mixed-precision")
    if not xla:
        args.append("--no-xla")
    return args


def run_local(args: Sequence[str], np_: int, metrics_path: str) -> dict:
    """Run the trainer with ``mpirun -np np_`` on this machine; return rank 0's metrics.

    The program is ``python -m kfp_gpu.cli.train_resnet`` of this interpreter, so the
    ranks use the same environment as the component.

    Raises:
        RuntimeError: mpirun exits non-zero (its last output lines in the message).
    """
    program = [sys.executable, "-m", "kfp_gpu.cli.train_resnet", *args]
    cmd = mpirun.mpirun_command(np_, program, mpirun=mpirun.find_mpirun(),
                                as_root=os.geteuid() == 0, local=True)
    log.info("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", check=False)
    lines = [ln for ln in proc.stdout.splitlines() if "GetPrototype" not in ln]
    for ln in lines:
        if ln.startswith(("[rank", "METRICS", "INFO kfp_gpu")) or "Error" in ln:
            print(ln, flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"mpirun exited {proc.returncode}:\n" + "\n".join(lines[-30:]))
    return json.loads(Path(metrics_path).read_text(encoding="utf-8"))


def stage_data(train_path: str, test_path: str, dest: str) -> str:
    """Write the train/test Datasets as one ``.npz`` (x_train, y_train, x_test, y_test) at
    ``dest`` (``gs://`` or a shared-PVC path the Workers see); returns ``dest``."""
    from kfp_gpu.training import datasets

    xtr, ytr = datasets.load_arrays(train_path)
    xte, yte = datasets.load_arrays(test_path)
    with tempfile.TemporaryDirectory(prefix="kfp-gpu-stage-") as tmp:
        f = Path(tmp) / DATA_FILE
        np.savez(f, x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
        storage.upload(f, dest)
    return dest


def job_options(*, name: str, namespace: str, image: str, args: Sequence[str], workers: int,
                settings: Mapping, rdma: bool, rdma_resource: str, multus_networks: str,
                nccl_ib_hca: str, nccl_net_gdr_level: str, nccl_socket_ifname: str,
                shm_size: str, run_id: str, task_name: str, gpu_override: str = "",
                policy: Mapping | None = None):
    """``kfp_gpu.mpi.spec.options.MPIJobOptions`` for the trainer, validated.

    The Worker GPU request is ``gpu_override`` if given, else ``settings["gpu"]`` (the
    component's ``worker_gpu`` text, :func:`worker_settings`); the ranks run ``kfp-gpu
    train-resnet <args>``.
    The task's PVCs (``settings["volumes"]``) are mounted on the Workers at the same paths,
    with pod ``fsGroup`` 1000 (``mpiuser``) so the non-root ranks can write to them; its
    Secrets (``settings["secret_volumes"]``) on the Launcher and the Workers, read-only.
    ``policy``: run-policy and scheduling options by name (:func:`policy_settings`).

    Raises:
        ValueError: from ``MPIJobOptions.validate`` (names the field and accepted values).
    """
    from kfp_gpu.mpi.spec import network, options, ssh

    volumes = tuple(settings.get("volumes") or ())
    secret_volumes = tuple(settings.get("secret_volumes") or ())
    missing = unmounted_credentials(settings["env"], volumes, secret_volumes)
    if missing:
        log.warning("GOOGLE_APPLICATION_CREDENTIALS=%s is under no Secret or PVC mount of "
                    "the task, so the job's pods do not get it unless their image holds it; "
                    "compile with --secret-volume SECRET:/dir:KEY to mount the key", missing)
    opts = options.MPIJobOptions(
        name=name, namespace=namespace, image=image,
        program=("kfp-gpu", "train-resnet", *args), env=dict(settings["env"]),
        replicas=options.Replicas(workers=workers, gpu=gpu_override or settings["gpu"]),
        network=network.Network(
            rdma=rdma, rdma_resource=rdma_resource, multus_networks=multus_networks,
            nccl_ib_hca=nccl_ib_hca, nccl_net_gdr_level=nccl_net_gdr_level,
            nccl_socket_ifname=nccl_socket_ifname),
        resources=options.Resources(
            worker_cpu=settings["worker_cpu"], worker_memory=settings["worker_memory"],
            worker_cpu_limit=settings.get("worker_cpu_limit", ""),
            worker_memory_limit=settings.get("worker_memory_limit", ""), shm_size=shm_size),
        placement=options.Placement(
            tolerations=list(settings["tolerations"]),
            node_selector=dict(settings["node_selector"]), volumes=volumes,
            secret_volumes=secret_volumes,
            secret_env=tuple(settings.get("secret_env") or ())),
        ssh=ssh.SshOptions(fs_group=ssh.MPI_USER_ID if volumes else None),
        metadata=options.JobMetadata(run_id=run_id, task_name=task_name))
    return opts.replace(**dict(policy or {})).validate()


def job_image(image: str, what: str = "image") -> str:
    """The MPIJob/TrainJob image: the ``image`` input as given (compiled default: the
    Horovod image of ``kfp-gpu compile --registry``; never this pod's environment).
    Raises ValueError when ``image`` is empty or blank."""
    if not image or not image.strip():
        raise ValueError(f"{what} is empty: leave the parameter unset for the compiled default "
                         "(the Horovod image of `kfp-gpu compile --registry`) or give an image "
                         "reference such as registry.example.com/ml/kfp-gpu-horovod:<version>")
    return image


def build_job(backend, opts, *, runtime_image: str) -> dict:
    """The job for ``opts`` from ``backend`` (:mod:`kfp_gpu.mpi.spec.backends`); a TrainJob
    is built against ``runtime_image``, the image its ClusterTrainingRuntime's nodes run.
    Raises ValueError from the builder, e.g. a TrainJob image other than ``runtime_image``.
    """
    if backend.name == "trainjob":
        return backend.build(opts, runtime_image=job_image(runtime_image, "runtime_image"))
    return backend.build(opts)


def policy_settings(active_deadline_seconds: int = 0, backoff_limit: int = 0,
                    min_available: int = 0, queue: str = "", priority_class: str = "",
                    schedule_timeout_seconds: int = 0,
                    min_resources: Mapping[str, str] | None = None,
                    kueue_queue: str = "") -> dict:
    """The component's run-policy and gang-scheduling parameters as
    ``MPIJobOptions.from_settings`` keywords: 0 means unset (None) for the optional
    numbers (``backoff_limit`` 0 is a value: no retry); empty strings and an empty
    ``min_resources`` stay unset."""
    return {"active_deadline_seconds": active_deadline_seconds or None,
            "backoff_limit": backoff_limit,
            "min_available": min_available or None, "queue": queue,
            "priority_class": priority_class,
            "schedule_timeout_seconds": schedule_timeout_seconds or None,
            "min_resources": dict(min_resources or {}), "kueue_queue": kueue_queue}


def run_cluster(job: Mapping, record_path: str, work_dir: str, model_path: str, *,
                pending_timeout_s: float = 600) -> dict:
    """Launch the MPIJob (kfp_gpu.mpi.launch.launcher), then fetch the model and the metrics.

    The job is owned by this pod (``kfp_gpu.mpi.launch.owner.from_environment``: KFP sets
    ``KFP_POD_NAME``/``KFP_POD_UID``), so it is garbage-collected if this pod goes without
    cancelling it; ``pending_timeout_s`` as in ``kfp_gpu.mpi.launch.launcher.launch``.

    Returns:
        rank 0's metrics: ``<work_dir>/metrics.json`` (with the per-rank ``ranks`` list)
        when readable, else the launcher log's ``METRICS {json}`` line
        (:func:`choose_metrics`); plus ``metrics_source`` (``file``/``log``) and
        ``reattached``.

    Raises:
        kfp_gpu.mpi.launch.launcher.MPIJobFailed / LaunchCancelled: from the launcher.
        RuntimeError: no metrics in either place.
        FileNotFoundError: no model under ``<work_dir>/model``.
    """
    from kfp_gpu.mpi.launch import launcher, owner
    from kfp_gpu.mpi.launch.metrics import metrics_from_log
    from kfp_gpu.training import horovod_config

    result = launcher.launch(job, record_path, pending_timeout_s=pending_timeout_s,
                             owner_pod=owner.from_environment())
    metrics, source = choose_metrics(
        read_metrics_file(f"{work_dir}/{horovod_config.METRICS_FILE}"),
        metrics_from_log(result.log_tail))
    storage.download_dir(f"{work_dir}/model", model_path)
    metrics["metrics_source"] = source
    metrics["reattached"] = bool(result.reattached)
    return metrics
