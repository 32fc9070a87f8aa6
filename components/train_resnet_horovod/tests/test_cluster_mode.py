"""train_resnet_horovod in cluster execution, end to end against the Kubernetes API double.

The component's own Python function runs (``train_resnet_horovod.python_func``, the body a
KFP launcher pod runs) with ``execution="cluster"`` and a ``dsl.TaskConfig`` as the KFP
driver hands it with ``task_config_passthroughs``. It stages the Datasets under
``work_dir`` (a local directory standing in for a shared PVC), builds the MPIJob, creates it
through the real ``kubernetes`` client over HTTP (tests/doubles/k8s_api.py), follows it to
a terminal condition and produces its outputs. The scripted MPI Operator also plays rank 0
of the trainer: it reads the posted MPIJob's mpirun argv and writes a real ``model.keras``
where the trainer would (``kfp_gpu.training.horovod_train``: ``<output-dir>/model``), and the
launcher pod's log ends with the trainer's ``METRICS {json}`` line.

The only seam replaced is ``kfp_gpu.mpi.launch.launcher.api_client`` (in a pod it loads the in-cluster
config): it returns a client for the double.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate
import numpy as np
import pytest
from kfp import dsl

from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.components.train_resnet_horovod.component import train_resnet_horovod
from kfp_gpu.mpi.launch import launcher
from kfp_gpu.mpi.spec import crd, mpijob, names, ssh, volumes
from kfp_gpu.training import datasets, horovod_config, horovod_metrics, horovod_runtime
from tests.doubles.k8s_api import FakeKube, ScriptedController

NS = "ml"
RUN_ID = "run-7f3c"
TASK = "train-resnet-horovod"
MPIJOBS = "/mpijobs"
SINGLE_GPU_IMG_PER_SEC = 400.0

CLAIM = "resnet-shared"
#: The Secret volume of :func:`task_config` (``kfp-gpu compile --secret-volume
#: gcs-key:/secrets/gcs:key.json``) and the key file GOOGLE_APPLICATION_CREDENTIALS names.
SECRET, SECRET_DIR = "gcs-key", "/secrets/gcs"
KEY_FILE = f"{SECRET_DIR}/key.json"


def task_config(pvc_mount: Path | None) -> dsl.TaskConfig:
    """What the pipeline sets on the task (set_cpu_limit, set_memory_limit,
    add_toleration, add_node_selector_constraint, set_env_variable, kubernetes.mount_pvc,
    kubernetes.use_secret_as_volume) as the KFP driver passes it through: Kubernetes JSON
    (the GPU request is the ``worker_gpu`` text, :data:`WORKER_GPU`). The PVC volume is named after the claim, as the driver does
    (backend driver/k8s.go makeVolumeMountPatch); the Secret volume after the Secret, with
    ``optional: false`` and a mount without readOnly, as the 2.17 driver writes them
    (driver/k8s.go extendPodSpecPatch, "Get secret mount information"); ``pvc_mount`` = the
    PVC's mount path (a local directory standing in for the shared volume), None = no
    PVC."""
    volumes = [{"name": SECRET, "secret": {"secretName": SECRET, "optional": False}}]
    mounts = [{"name": SECRET, "mountPath": SECRET_DIR}]
    if pvc_mount is not None:
        volumes.append({"name": CLAIM, "persistentVolumeClaim": {"claimName": CLAIM}})
        mounts.append({"name": CLAIM, "mountPath": str(pvc_mount)})
    return dsl.TaskConfig(
        resources={"limits": {"cpu": "32", "memory": "256Gi"},
                   "requests": {"cpu": "32", "memory": "256Gi"}},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu-training",
                      "effect": "NoSchedule"}],
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        env=[{"name": "NCCL_DEBUG", "value": "WARN"},
             {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": KEY_FILE},
             {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        volumes=volumes, volume_mounts=mounts,
    )


TASK_CONFIG = task_config(None)
#: The Workers' request as the compiled pipeline passes it (``worker_gpu``).
WORKER_GPU = "gpu:8"


def trainer_metrics_line(world_size: int, batch: int = 32) -> tuple[dict, str]:
    """Rank 0's metrics as kfp_gpu.training.horovod_train writes them to ``metrics.json`` (with the
    per-rank ``ranks`` figures) and its METRICS line (``ranks`` left out) with mpirun's
    ``--tag-output`` prefix."""
    rates = [380.0 - 2.5 * r for r in range(world_size)]
    ranks = [{"rank": r, "img_per_sec": v, "checksum": {"sha256": "ab" * 32, "sum": 12.5}}
             for r, v in enumerate(rates)]
    metrics = {"mode": "train", "model": "small", "global_batch_size": batch * world_size,
               "final_loss": 0.61, "final_accuracy": 0.78, "test_loss": 0.66,
               "test_accuracy": 0.76, "global_step": 40, "epochs_run": 1,
               **horovod_metrics.summarize(ranks, batch)}
    return {**metrics, "ranks": ranks}, "[1,0]<stdout>:METRICS " + json.dumps(metrics)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else ""


def launcher_argv(job: dict) -> list[str]:
    return job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "command"]


@dataclass
class RankZeroController(ScriptedController):
    """The MPI Operator double, plus what rank 0 of the trainer leaves on the shared volume.

    Before the job runs it waits for the component's MPIJob record (``record``) and notes
    whether the record existed then and the Model output did not (``record_first``).
    ``model`` (a keras.Model) is saved with the trainer's own writer at the model directory
    the posted argv resolves to (``horovod_config.HorovodConfig``), unless the job fails; so is
    ``metrics`` (rank 0's full metrics dict) at the metrics path, when given.
    """

    model: object = None
    metrics: dict | None = None
    record: Path | None = None
    model_output: Path | None = None
    record_first: bool | None = None

    def run(self, kube: FakeKube, ns: str, name: str) -> None:
        job = kube.get_object("mpijobs", ns, name)
        if self.record is not None:
            end = time.monotonic() + 10
            while not self.record.exists() and time.monotonic() < end:
                time.sleep(0.01)
            self.record_first = self.record.exists() and not (
                self.model_output is not None and self.model_output.exists())
        if self.model is not None and self.outcome == "Succeeded":
            argv = launcher_argv(job)
            cfg = horovod_config.HorovodConfig(
                mode="train", output_dir=_flag(argv, "--output-dir"),
                model_dir=_flag(argv, "--model-dir"),
                metrics_path=_flag(argv, "--metrics-path")).resolved()
            horovod_runtime.save_model(self.model, cfg.model_dir)
            if self.metrics is not None:
                horovod_runtime.write_json(cfg.metrics_path, self.metrics)
        super().run(kube, ns, name)


@pytest.fixture(scope="module")
def keras_model():
    from kfp_gpu.training import resnet_models

    return resnet_models.build("small", (8, 8, 1), 3, blocks=1, width=4, seed=3)


@pytest.fixture()
def kube(monkeypatch):
    with FakeKube() as k:
        monkeypatch.setattr(launcher, "api_client", lambda kubeconfig=None: k.api_client())
        monkeypatch.delenv(rt.IN_CLUSTER_ENV, raising=False)
        yield k


@pytest.fixture()
def data(tmp_path):
    rng = np.random.default_rng(0)
    out = {}
    for split, n in (("train", 24), ("test", 9)):
        x = rng.integers(0, 256, size=(n, 8, 8, 1), dtype=np.uint8)
        y = rng.integers(0, 3, size=n).astype(np.int32)
        datasets.save(x, y, tmp_path / "in" / split)
        out[split] = (x, y)
    return out


class Outputs:
    """The component's input and output artifacts of one task attempt, as the KFP v2 driver
    provisions them: URIs ``<pipeline root>/<run>/<task>/<salt>/<output>``, the salt made
    once per task execution (kubeflow/pipelines backend/src/v2/driver/container.go
    ``provisionOutputs(..., uuid.NewString(), ...)``), so a retry of the task (a new pod)
    gets the SAME URIs and a ParallelFor iteration other ones; each attempt writes them
    under its own local ``root`` (its pod's filesystem: ``custom_path``)."""

    def __init__(self, root: Path, inputs: Path, salt: str = "5b1c0d7e"):
        self.train = dsl.Dataset(uri=str(inputs / "train"))
        self.test = dsl.Dataset(uri=str(inputs / "test"))
        for name, cls in (("model", dsl.Model), ("metrics", dsl.Metrics),
                          ("mpijob", dsl.Artifact), ("trainer_metrics", dsl.Artifact)):
            art = cls(uri=f"minio://mlpipeline/v2/artifacts/resnet/{RUN_ID}/{TASK}/{salt}/"
                          f"{name}")
            art.custom_path = str(root / name)
            setattr(self, name, art)


def job_name_of(out: Outputs) -> str:
    """The job name the component derives for ``out``'s task execution."""
    return names.job_name(RUN_ID, TASK, prefix="resnet", instance=out.model.uri)


def run_component(out: Outputs, work_dir: Path | str, **kw) -> None:
    """Run the component; by default the PVC is mounted at ``work_dir``'s parent."""
    args = {"execution": "cluster", "workers": 2, "epochs": 1, "batch_size": 32,
            "work_dir": str(work_dir), "namespace": NS, "image": "registry.test/horovod:1",
            "runtime_image": "registry.test/horovod:1",
            "single_gpu_img_per_sec": SINGLE_GPU_IMG_PER_SEC, "run_id": RUN_ID,
            "task_name": TASK, "task_config": task_config(Path(work_dir).parent),
            "worker_gpu": WORKER_GPU}
    args.update(kw)
    train_resnet_horovod.python_func(
        train_data=out.train, test_data=out.test, model=out.model, metrics=out.metrics,
        mpijob=out.mpijob, trainer_metrics=out.trainer_metrics, **args)


def test_cluster_mode_creates_the_mpijob_and_produces_every_output(kube, data, tmp_path,
                                                                   keras_model):
    import keras

    world = 2 * 8
    expected, metrics_line = trainer_metrics_line(world)
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    work = tmp_path / "pvc" / "resnet-work"
    log = ["[1,0]<stdout>:hvd.init: 16 ranks", "[1,0]<stdout>:epoch 1 loss 0.61",
           metrics_line, "[1,3]<stderr>:rank 3 done"]
    ctl = RankZeroController(outcome="Succeeded", log=log, step_s=0.02, model=keras_model,
                             record=Path(out.mpijob.path), model_output=Path(out.model.path))
    kube.controller = ctl

    run_component(out, work)

    # -- the MPIJob that was created (once), and what it asks for
    assert kube.count("POST", MPIJOBS) == 1
    name = job_name_of(out)
    job = kube.get_object("mpijobs", NS, name)
    posted = next(r.body for r in kube.requests if r.method == "POST")
    assert posted["spec"] == job["spec"]
    spec = job["spec"]
    assert spec["slotsPerWorker"] == 8
    worker = spec["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    wpod = worker["template"]["spec"]
    wres = wpod["containers"][0]["resources"]
    assert wres["limits"]["nvidia.com/gpu"] == "8" and wres["requests"]["nvidia.com/gpu"] == "8"
    assert wres["limits"]["cpu"] == "32" and wres["limits"]["memory"] == "256Gi"
    assert TASK_CONFIG.tolerations[0] in wpod["tolerations"]
    assert wpod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    wenv = {e["name"]: e.get("value") for e in wpod["containers"][0]["env"]}
    assert wenv["NCCL_DEBUG"] == "WARN" and "POD_IP" not in wenv
    lpod = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    lres = lpod["containers"][0]["resources"]
    assert not any(k.startswith("nvidia.com/") for part in lres.values() for k in part)
    assert "tolerations" not in lpod and "nodeSelector" not in lpod
    argv = launcher_argv(job)
    assert argv[argv.index("-np") + 1] == str(world)
    program = argv[argv.index("kfp-gpu"):]
    assert program[:4] == ["kfp-gpu", "train-resnet", "--mode", "train"]
    assert _flag(program, "--output-dir") == str(work)
    assert _flag(program, "--data") == str(work / rt.DATA_FILE)
    assert job["metadata"]["annotations"][crd.RUN_ID_ANNOTATION] == RUN_ID
    # -- the task's PVC is mounted on the Workers at the same path; fsGroup 1000 lets the
    #    non-root ranks write; its Secret on the Launcher AND the Workers at the same path,
    #    read-only, where the forwarded GOOGLE_APPLICATION_CREDENTIALS points
    pvc_root = str(work.parent)
    vols = {v["name"]: v for v in wpod["volumes"]}
    assert vols[f"pvc-{CLAIM}"] == {"name": f"pvc-{CLAIM}",
                                    "persistentVolumeClaim": {"claimName": CLAIM}}
    assert {"name": f"pvc-{CLAIM}", "mountPath": pvc_root} in wpod["containers"][0][
        "volumeMounts"]
    assert wpod["securityContext"]["fsGroup"] == ssh.MPI_USER_ID
    secret_vol = {"name": f"secret-{SECRET}", "secret": {"secretName": SECRET}}
    secret_mount = {"name": f"secret-{SECRET}", "mountPath": SECRET_DIR, "readOnly": True}
    assert lpod["volumes"] == [secret_vol]  # no PVC: the Launcher only runs mpirun
    assert lpod["containers"][0]["volumeMounts"] == [secret_mount]
    assert secret_vol in wpod["volumes"]
    assert secret_mount in wpod["containers"][0]["volumeMounts"]
    assert wenv["GOOGLE_APPLICATION_CREDENTIALS"] == KEY_FILE
    assert argv[argv.index("GOOGLE_APPLICATION_CREDENTIALS") - 1] == "-x"
    for role in ("Launcher", "Worker"):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
             "template": spec["mpiReplicaSpecs"][role]["template"]}, "1.30.0", strict=True)

    # -- the Datasets were staged as one npz the Workers read
    with np.load(work / rt.DATA_FILE) as z:
        np.testing.assert_array_equal(z["x_train"], data["train"][0])
        np.testing.assert_array_equal(z["y_test"], data["test"][1])

    # -- the record was written first, and names the object that exists
    assert ctl.record_first is True
    rec = json.loads(Path(out.mpijob.path).read_text())
    assert rec == {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "namespace": NS,
                   "name": name, "uid": job["metadata"]["uid"]}

    # -- metrics parsed from the launcher log (not from a file: none was written)
    assert not (work / horovod_config.METRICS_FILE).exists()
    assert json.loads(Path(out.trainer_metrics.path).read_text())["metrics_source"] == "log"
    got = out.metrics.metadata
    assert got["img_per_sec_per_gpu"] == pytest.approx(expected["img_per_sec_per_gpu"])
    assert got["img_per_sec_total"] == pytest.approx(expected["img_per_sec_total"])
    assert got["world_size"] == world and got["weights_identical"] == 1.0
    assert got["scaling_efficiency"] == pytest.approx(
        expected["img_per_sec_total"] / (world * SINGLE_GPU_IMG_PER_SEC))
    assert got["test_accuracy"] == pytest.approx(0.76)
    full = json.loads(Path(out.trainer_metrics.path).read_text())
    assert full["reattached"] is False
    assert full["img_per_sec_per_gpu_ci95"] == pytest.approx(
        expected["img_per_sec_per_gpu_ci95"])

    # -- the model rank 0 wrote on the shared volume is now the Model artifact
    assert out.model.metadata["execution"] == "cluster"
    assert out.model.metadata["world_size"] == world
    loaded = keras.saving.load_model(Path(out.model.path) / "model.keras")
    x = data["test"][0][:4].astype("float32")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), keras_model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_cluster_mode_failure_carries_reason_and_last_log_lines(kube, data, tmp_path):
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    log = [f"[1,0]<stdout>:step {i}" for i in range(70)] + [
        "[1,5]<stderr>:Traceback (most recent call last):",
        "[1,5]<stderr>:tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM",
        "Primary job  terminated normally, but 1 process returned a non-zero exit code."]
    kube.controller = ScriptedController(
        outcome="Failed", reason="BackoffLimitExceeded",
        message="Job has reached the specified backoff limit", log=log, step_s=0.002)

    with pytest.raises(launcher.MPIJobFailed) as e:
        run_component(out, tmp_path / "pvc" / "work")

    err = e.value
    assert err.reason == "BackoffLimitExceeded"
    assert err.log_tail[-1] == log[-1] and len(err.log_tail) == 50
    text = str(err)
    assert "ResourceExhaustedError: OOM" in text and "step 10" not in text
    # the record of what was created is there (a retry re-attaches to it); no outputs
    rec = json.loads(Path(out.mpijob.path).read_text())
    assert rec["name"] == job_name_of(out)
    assert not Path(out.model.path).exists()
    assert not Path(out.trainer_metrics.path).exists()
    assert "img_per_sec_total" not in out.metrics.metadata


def test_retried_task_reattaches_to_the_running_mpijob(kube, data, tmp_path, keras_model):
    """Attempt 1 creates the MPIJob and is still following it when attempt 2 (a retry: new
    pod, empty output paths, same run and task) starts: attempt 2 gets 409 on create,
    re-attaches, and both end with the same job's results; one MPIJob, one create."""
    world = 2 * 8
    expected, metrics_line = trainer_metrics_line(world)
    gate = threading.Event()
    kube.controller = RankZeroController(outcome="Succeeded", log=["start", metrics_line],
                                         gate=gate, model=keras_model)
    work = tmp_path / "pvc" / "work"
    first = Outputs(tmp_path / "attempt1", tmp_path / "in")
    second = Outputs(tmp_path / "attempt2", tmp_path / "in")
    errors: list[BaseException] = []

    def attempt1():
        try:
            run_component(first, work)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    t = threading.Thread(target=attempt1, daemon=True)
    t.start()
    name = job_name_of(first)
    assert job_name_of(second) == name  # a retry: same task execution, same output URIs
    end = time.monotonic() + 60
    while time.monotonic() < end and launcher.phase(
            kube.get_object("mpijobs", NS, name) or {}) != "Running":
        time.sleep(0.02)
    assert launcher.phase(kube.get_object("mpijobs", NS, name)) == "Running"

    threading.Timer(1.0, gate.set).start()  # the job finishes while attempt 2 follows it
    run_component(second, work)
    t.join(60)
    assert not t.is_alive() and not errors, errors

    assert [r.status for r in kube.requests if r.method == "POST"] == [201, 409]
    assert len([k for k in kube.objects if k[0] == "mpijobs"]) == 1
    uid = kube.get_object("mpijobs", NS, name)["metadata"]["uid"]
    for attempt, reattached in ((first, False), (second, True)):
        assert json.loads(Path(attempt.mpijob.path).read_text())["uid"] == uid
        full = json.loads(Path(attempt.trainer_metrics.path).read_text())
        assert full["reattached"] is reattached
        assert attempt.metrics.metadata["img_per_sec_total"] == pytest.approx(
            expected["img_per_sec_total"])
        assert (Path(attempt.model.path) / "model.keras").is_file()


def test_cluster_mode_reads_rank0_metrics_json_with_per_rank_figures(kube, data, tmp_path,
                                                                     keras_model):
    """Rank 0 wrote ``<work_dir>/metrics.json``: it is the source (per-rank ``ranks``
    figures included, which the log line leaves out), consistent with the log line."""
    world = 2 * 8
    expected, metrics_line = trainer_metrics_line(world)
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    work = tmp_path / "pvc" / "resnet-work"
    kube.controller = RankZeroController(outcome="Succeeded", log=["start", metrics_line],
                                         step_s=0.01, model=keras_model, metrics=expected)

    run_component(out, work)

    assert json.loads((work / horovod_config.METRICS_FILE).read_text()) == expected
    full = json.loads(Path(out.trainer_metrics.path).read_text())
    assert full["metrics_source"] == "file"
    assert [r["rank"] for r in full["ranks"]] == list(range(world))
    assert [r["img_per_sec"] for r in full["ranks"]] == [r["img_per_sec"]
                                                         for r in expected["ranks"]]
    assert out.metrics.metadata["img_per_sec_total"] == pytest.approx(
        expected["img_per_sec_total"])
    assert (Path(out.model.path) / "model.keras").is_file()


def test_stale_metrics_json_loses_to_the_log(kube, data, tmp_path, keras_model):
    """A metrics.json left in work_dir by an earlier run (another global_step) is not
    taken: the launcher log's METRICS line of this run contradicts it."""
    world = 2 * 8
    expected, metrics_line = trainer_metrics_line(world)
    stale = {**expected, "global_step": 7, "img_per_sec_total": 1.0}
    work = tmp_path / "pvc" / "resnet-work"
    work.mkdir(parents=True)
    (work / horovod_config.METRICS_FILE).write_text(json.dumps(stale))
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    kube.controller = RankZeroController(outcome="Succeeded", log=[metrics_line],
                                         step_s=0.01, model=keras_model)

    run_component(out, work)

    full = json.loads(Path(out.trainer_metrics.path).read_text())
    assert full["metrics_source"] == "log" and "ranks" not in full
    assert full["global_step"] == expected["global_step"]
    assert out.metrics.metadata["img_per_sec_total"] == pytest.approx(
        expected["img_per_sec_total"])


def test_default_work_dir_is_a_per_job_directory_on_the_pvc(kube, data, tmp_path,
                                                            keras_model):
    world = 2 * 8
    _, metrics_line = trainer_metrics_line(world)
    mount = tmp_path / "pvc"
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    kube.controller = RankZeroController(outcome="Succeeded", log=[metrics_line],
                                         step_s=0.01, model=keras_model)

    run_component(out, "", task_config=task_config(mount))

    name = job_name_of(out)
    argv = launcher_argv(kube.get_object("mpijobs", NS, name))
    assert _flag(argv, "--output-dir") == str(mount / name)
    assert (mount / name / rt.DATA_FILE).is_file()
    assert (Path(out.model.path) / "model.keras").is_file()


@pytest.mark.parametrize("case", ["outside", "no-pvc", "read-only", "relative", "checkpoint"])
def test_unreachable_local_work_dir_is_refused_before_anything_is_created(kube, data,
                                                                          tmp_path, case):
    mount = tmp_path / "pvc"
    work = str(mount / "work")
    kw: dict = {"task_config": task_config(mount)}
    if case == "outside":
        work = str(tmp_path / "elsewhere" / "work")
    elif case == "no-pvc":
        kw["task_config"] = task_config(None)
    elif case == "read-only":
        cfg = task_config(mount)
        cfg.volume_mounts[-1]["readOnly"] = True
        kw["task_config"] = cfg
    elif case == "relative":
        work = "pvc/work"
    else:
        kw["checkpoint_dir"] = str(tmp_path / "ckpt")
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")

    with pytest.raises(ValueError, match="kfp.kubernetes.mount_pvc") as e:
        run_component(out, work, **kw)

    assert ("checkpoint_dir" if case == "checkpoint" else "work_dir") in str(e.value)
    assert kube.count("POST", MPIJOBS) == 0
    assert not Path(out.mpijob.path).exists()
    assert not list(tmp_path.rglob(rt.DATA_FILE))


def test_no_metrics_anywhere_is_an_error():
    with pytest.raises(RuntimeError, match="no METRICS line"):
        rt.choose_metrics(None, None)


def test_pvc_mounts_from_task_config():
    cfg = task_config(Path("/mnt/shared"))
    cfg.volumes.append({"name": "ds", "persistentVolumeClaim": {"claimName": "datasets",
                                                                 "readOnly": True}})
    cfg.volume_mounts.append({"name": "ds", "mountPath": "/data", "subPath": "fmnist"})
    got = rt.pvc_mounts(cfg.volumes, cfg.volume_mounts)
    assert got == (volumes.PvcMount(CLAIM, "/mnt/shared"),
                   volumes.PvcMount("datasets", "/data", read_only=True, sub_path="fmnist"))
    with pytest.raises(ValueError, match="names no volume"):
        rt.pvc_mounts([], [{"name": "ghost", "mountPath": "/x"}])
    with pytest.raises(ValueError, match="mount_path"):
        rt.pvc_mounts(cfg.volumes, [{"name": CLAIM, "mountPath": "relative"}])


def test_secret_mounts_from_task_config_as_the_driver_passes_them():
    """The 2.17 driver's Secret volume (named after the Secret, ``optional`` written out)
    becomes one SecretMount; its PVC stays a PvcMount; a ConfigMap is neither."""
    cfg = task_config(Path("/mnt/shared"))
    cfg.volumes += [{"name": "tok", "secret": {"secretName": "tok", "optional": True}},
                    {"name": "cm", "configMap": {"name": "cm"}}]
    cfg.volume_mounts += [{"name": "tok", "mountPath": "/etc/tok"},
                          {"name": "cm", "mountPath": "/etc/cm"}]
    assert rt.secret_mounts(cfg.volumes, cfg.volume_mounts) == (
        volumes.SecretMount(SECRET, SECRET_DIR), volumes.SecretMount("tok", "/etc/tok", True))
    assert rt.pvc_mounts(cfg.volumes, cfg.volume_mounts) == (
        volumes.PvcMount(CLAIM, "/mnt/shared"),)
    settings = rt.worker_settings(cfg)
    assert settings["secret_volumes"] == (volumes.SecretMount(SECRET, SECRET_DIR),
                                          volumes.SecretMount("tok", "/etc/tok", True))
    assert settings["env"]["GOOGLE_APPLICATION_CREDENTIALS"] == KEY_FILE
    opts = rt.job_options(name="resnet-sec", namespace="ml", image="h:1", args=["--x"],
                          workers=2, settings=settings, rdma=False,
                          rdma_resource="rdma/rdma_shared_device_a", multus_networks="",
                          nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
                          shm_size="", run_id="r", task_name="t")
    assert opts.placement.secret_volumes == settings["secret_volumes"]
    with pytest.raises(ValueError, match="names no volume"):
        rt.secret_mounts([], [{"name": SECRET, "mountPath": SECRET_DIR}])
    with pytest.raises(ValueError, match="Secret mount_path"):
        rt.secret_mounts(cfg.volumes, [{"name": SECRET, "mountPath": "relative"}])
    assert rt.cpu_worker_settings()["secret_volumes"] == ()


def test_a_credentials_file_outside_every_mount_is_named(caplog):
    secret = (volumes.SecretMount(SECRET, SECRET_DIR),)
    pvc = (volumes.PvcMount(CLAIM, "/mnt/shared"),)
    env = {"GOOGLE_APPLICATION_CREDENTIALS": KEY_FILE}
    assert rt.unmounted_credentials(env, (), secret) is None
    assert rt.unmounted_credentials({"GOOGLE_APPLICATION_CREDENTIALS": "/mnt/shared/k.json"},
                                    pvc, ()) is None
    assert rt.unmounted_credentials({}, (), ()) is None
    assert rt.unmounted_credentials(env, pvc, ()) == KEY_FILE
    # a sibling folder whose name starts like the mount is not inside it
    assert rt.unmounted_credentials(env, (), (volumes.SecretMount(SECRET, "/secrets/gc"),)
                                    ) == KEY_FILE
    settings = {**rt.cpu_worker_settings(), "env": env}
    with caplog.at_level("WARNING"):
        rt.job_options(name="resnet-cred", namespace="ml", image="h:1", args=["--x"],
                       workers=2, settings=settings, rdma=False,
                       rdma_resource="rdma/rdma_shared_device_a", multus_networks="",
                       nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
                       shm_size="", run_id="r", task_name="t")
    assert f"GOOGLE_APPLICATION_CREDENTIALS={KEY_FILE} is under no Secret or PVC mount" in \
        caplog.text


def test_worker_cpu_memory_requests_and_limits_stay_separate():
    cfg = dsl.TaskConfig(resources={"requests": {"cpu": "4", "memory": "16Gi"},
                                    "limits": {"cpu": "32", "memory": "64Gi"}})
    s = rt.worker_settings(cfg, "gpu:8")
    opts = rt.job_options(name="resnet-res", namespace="ml", image="h:1", args=["--x"],
                          workers=2, settings=s, rdma=False, rdma_resource="rdma/rdma_shared_device_a",
                          multus_networks="",
                          nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
                          shm_size="", run_id="r", task_name="t")
    worker = mpijob.build(opts)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    res = worker["spec"]["containers"][0]["resources"]
    assert res["requests"]["cpu"] == "4" and res["limits"]["cpu"] == "32"
    assert res["requests"]["memory"] == "16Gi" and res["limits"]["memory"] == "64Gi"
    assert res["limits"]["nvidia.com/gpu"] == "8"
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                  "metadata": {"name": "t"}, "template": worker},
                                 "1.30.0", strict=True)
    # only a limit: the request follows it (as Kubernetes defaults it)
    only = rt.worker_settings(dsl.TaskConfig(resources={"limits": {"cpu": "32"}}))
    assert (only["worker_cpu"], only["worker_cpu_limit"]) == ("32", "32")


def test_scaling_efficiency_is_skipped_without_a_total():
    got = rt.kfp_scalar_metrics({"world_size": 2, "img_per_sec_per_gpu": 10.0}, 5.0)
    assert "scaling_efficiency" not in got and got["world_size"] == 2.0
    got = rt.kfp_scalar_metrics({"world_size": 2, "img_per_sec_total": 8.0}, 5.0)
    assert got["scaling_efficiency"] == pytest.approx(8.0 / 10.0)


def test_worker_settings_without_task_config_refuses_a_silent_cpu_fallback():
    """No task_config (KFP backend < 2.15) must not mean CPU Workers."""
    with pytest.raises(ValueError, match="task_config_passthroughs needs a KFP backend >= 2.15"):
        rt.worker_settings(None)
    assert rt.cpu_worker_settings()["gpu"] == "none"


def test_parallel_for_iterations_get_their_own_mpijob(kube, data, tmp_path, keras_model):
    """Two iterations of a dsl.ParallelFor run the same task of the same
    run; the driver gives each its own output URIs (another salt), so each gets its own
    MPIJob, while a retry (same URIs, test_retried_task_reattaches_to_the_running_mpijob)
    re-attaches."""
    _, metrics_line = trainer_metrics_line(2 * 8)
    made = []
    for i, salt in enumerate(("it0-4c1d", "it1-9e2f")):
        kube.controller = RankZeroController(outcome="Succeeded", log=[metrics_line],
                                             step_s=0.01, model=keras_model)
        out = Outputs(tmp_path / f"iteration{i}", tmp_path / "in", salt=salt)
        run_component(out, tmp_path / "pvc" / f"work{i}")
        made.append(json.loads(Path(out.mpijob.path).read_text())["name"])
    assert made[0] != made[1] and made == [
        job_name_of(Outputs(tmp_path, tmp_path, salt=s)) for s in ("it0-4c1d", "it1-9e2f")]
    assert [r.status for r in kube.requests if r.method == "POST"] == [201, 201]
    assert {k[2] for k in kube.objects if k[0] == "mpijobs"} == set(made)


def test_run_policy_and_gang_scheduling_parameters_reach_the_mpijob(kube, data, tmp_path,
                                                                    keras_model):
    """The component's runPolicy / schedulingPolicy parameters."""
    _, metrics_line = trainer_metrics_line(2 * 8)
    kube.controller = RankZeroController(outcome="Succeeded", log=[metrics_line],
                                         step_s=0.01, model=keras_model)
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")
    run_component(out, tmp_path / "pvc" / "work", active_deadline_seconds=7200,
                  backoff_limit=1, min_available=2, queue="gpu-queue",
                  priority_class="training-high", schedule_timeout_seconds=120,
                  min_resources={"nvidia.com/gpu": "16", "cpu": "64"}, pending_timeout_s=900)
    posted = next(r.body for r in kube.requests if r.method == "POST")
    assert posted["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 86400, "backoffLimit": 1,
        "activeDeadlineSeconds": 7200, "schedulingPolicy": {
            "minAvailable": 2, "queue": "gpu-queue", "priorityClass": "training-high",
            "scheduleTimeoutSeconds": 120, "minResources": {"cpu": "64", "nvidia.com/gpu": "16"}}}
    assert rt.policy_settings() == {
        "active_deadline_seconds": None, "backoff_limit": 0, "min_available": None,
        "queue": "", "priority_class": "", "schedule_timeout_seconds": None,
        "min_resources": {}, "kueue_queue": ""}


def test_kueue_queue_parameter_reaches_the_mpijob(kube, data, tmp_path, keras_model):
    """The component's kueue_queue -> queue label and suspend; the task
    still succeeds once the job runs (the double resumes it when the test plays Kueue)."""
    _, metrics_line = trainer_metrics_line(2 * 8)
    kube.controller = RankZeroController(outcome="Succeeded", log=[metrics_line],
                                         step_s=0.01, model=keras_model)
    out = Outputs(tmp_path / "attempt1", tmp_path / "in")

    def kueue_admits() -> None:
        for _ in range(500):
            jobs = [o for (p, _, _), o in list(kube.objects.items()) if p == "mpijobs"]
            if jobs:
                obj = jobs[0]
                with kube._lock:
                    obj["spec"]["runPolicy"]["suspend"] = False
                return
            time.sleep(0.02)

    threading.Thread(target=kueue_admits, daemon=True).start()
    run_component(out, tmp_path / "pvc" / "work", kueue_queue="team-a")
    posted = next(r.body for r in kube.requests if r.method == "POST")
    assert posted["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert posted["spec"]["runPolicy"]["suspend"] is True
