"""Pure parts of the Horovod ResNet trainer and of train_resnet_horovod (no MPI needed)."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import typer
import yaml
from kfp import dsl

from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.spec import mpijob, mpirun
from kfp_gpu.training import horovod_config, horovod_metrics, resnet_data

REPO = Path(__file__).resolve().parents[2]


def _idx(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + \
        arr.astype(np.uint8).tobytes()


def test_parse_idx_round_trip_and_errors(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "f.gz").write_bytes(gzip.compress(_idx(a)))
    np.testing.assert_array_equal(resnet_data.read_idx(tmp_path / "f.gz"), a)
    with pytest.raises(ValueError, match="magic"):
        resnet_data.parse_idx(b"\x01\x00\x08\x01" + b"\0" * 8)
    with pytest.raises(ValueError, match="type code"):
        resnet_data.parse_idx(bytes([0, 0, 0x07, 1, 0, 0, 0, 1, 5]))
    with pytest.raises(ValueError, match="bytes"):
        resnet_data.parse_idx(_idx(a)[:-1])


def test_real_fashion_mnist_loads(shared_data):
    d = resnet_data.load_idx_dir(shared_data / "fashion-mnist")
    assert d.x_train.shape == (60000, 28, 28, 1) and d.x_test.shape == (10000, 28, 28, 1)
    assert d.x_train.dtype == np.uint8 and d.classes == 10
    assert np.bincount(d.y_test).tolist() == [1000] * 10  # the published balanced test set


def test_shard_is_disjoint_and_complete():
    x = np.arange(10)
    parts = [resnet_data.shard(x, x, r, 3)[0] for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    with pytest.raises(ValueError):
        resnet_data.shard(x, x, 3, 3)


def test_load_source_npz_and_errors(tmp_path):
    x = np.zeros((4, 8, 8), np.uint8)
    np.savez(tmp_path / "d.npz", x_train=x, y_train=[0, 1, 2, 1], x_test=x[:2], y_test=[0, 2])
    d = resnet_data.load_source(str(tmp_path / "d.npz"))
    assert d.x_train.shape == (4, 8, 8, 1) and d.classes == 3 and len(d.y_test) == 2
    with pytest.raises(ValueError, match="accepted"):
        resnet_data.load_source("")
    with pytest.raises(FileNotFoundError):
        resnet_data.load_source(str(tmp_path / "missing"))


def test_scaled_lr_warms_up_linearly_to_size_times_base():
    assert horovod_config.scaled_lr(0, 0.1, 4, 10) == pytest.approx(0.1)
    assert horovod_config.scaled_lr(5, 0.1, 4, 10) == pytest.approx(0.25)
    assert horovod_config.scaled_lr(10, 0.1, 4, 10) == pytest.approx(0.4)
    assert horovod_config.scaled_lr(0, 0.1, 4, 0) == pytest.approx(0.4)


def test_summarize_and_checksum():
    w = [np.ones((2, 2), np.float32), np.zeros(3, np.float32)]
    c = horovod_metrics.weights_checksum(w)
    assert c["sum"] == 4.0 and c == horovod_metrics.weights_checksum([a.copy() for a in w])
    w2 = [w[0] + np.float32(1e-7), w[1]]
    assert horovod_metrics.weights_checksum(w2)["sha256"] != c["sha256"]  # one ulp changes the digest
    s = horovod_metrics.summarize([{"img_per_sec": 100.0, "checksum": c},
                      {"img_per_sec": 300.0, "checksum": horovod_metrics.weights_checksum(w2)}], 32)
    assert s["img_per_sec_per_gpu"] == 200.0 and s["img_per_sec_total"] == 400.0
    assert s["ms_per_step"] == pytest.approx(160.0)
    assert s["weights_identical"] is False and s["weights_sum_spread"] > 0


@pytest.mark.parametrize("field,value,match", [
    ("mode", "eval", "mode"), ("model", "vgg", "model"), ("optimizer", "lamb", "optimizer"),
    ("batch_size", 0, "batch_size"), ("steps", -1, "steps"), ("lr", 0.0, "lr")])
def test_config_rejects_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        horovod_config.HorovodConfig(**{field: value}).resolved()


def test_config_defaults():
    b = horovod_config.HorovodConfig(mode="benchmark").resolved()
    assert (b.model, b.steps, b.image_size, b.batch_size) == ("resnet50", 100, 224, 32)
    t = horovod_config.HorovodConfig(output_dir="gs://b/x/").resolved()
    assert t.model == "small" and t.model_dir == "gs://b/x/model"
    assert t.checkpoint_dir == "gs://b/x/checkpoints"


def test_execution_mode():
    assert rt.execution_mode("auto", {}) == "local"
    assert rt.execution_mode("auto", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "cluster"
    assert rt.execution_mode("local", {"KUBERNETES_SERVICE_HOST": "x"}) == "local"
    with pytest.raises(ValueError, match="accepted"):
        rt.execution_mode("remote")


@pytest.mark.parametrize("gpu,text", [
    ("gpu:8", "gpu:8"), ("mig:3g.40gb", "mig:3g.40gb"),
    ("shared:1,renamed=true", "shared:1,renamed=true"), ("metagpu:50", "metagpu:50"),
    ("fraction:0.5", "fraction:0.5"), ("", "none"), ("none", "none")])
def test_worker_gpu_is_the_request_text(gpu, text):
    """The Workers' request is the worker_gpu text, canonical (kfp_gpu.gpu.parse)."""
    cfg = dsl.TaskConfig(resources={"limits": {"cpu": "4", "memory": "8Gi"}})
    assert rt.worker_settings(cfg, gpu)["gpu"] == text


@pytest.mark.parametrize("resources", [
    {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}},
    {"requests": {"cnvrg.io/metagpu": "50"}},
    {"limits": {"nvidia.com/mig-3g.40gb": "1"}}])
def test_an_accelerator_on_the_task_is_refused_not_translated(resources):
    """One channel: an accelerator set on the task (passed through as a resource) is a
    ValueError naming the resource and worker_gpu, never read back as a request."""
    name = next(iter({**resources.get("limits", {}), **resources.get("requests", {})}))
    with pytest.raises(ValueError, match=rf"{name}.*worker_gpu"):
        rt.worker_settings(dsl.TaskConfig(resources=resources), "gpu:8")


def test_core_resources_are_not_accelerators():
    assert rt.task_accelerators({"limits": {"cpu": "1", "memory": "1Gi",
                                            "ephemeral-storage": "1Gi",
                                            "hugepages-2Mi": "64Mi"}}) == []
    assert rt.task_accelerators(None) == []
    assert rt.task_accelerators({"limits": {"rdma/x": "1"}, "requests": {"a.b/c": "1"}}) == [
        "a.b/c", "rdma/x"]


def test_an_invalid_worker_gpu_is_refused_naming_the_accepted_forms():
    with pytest.raises(ValueError, match="accepted"):
        rt.worker_settings(dsl.TaskConfig(), "gpu:1.5")


def test_task_config_goes_to_workers_not_launcher():
    tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    cfg = dsl.TaskConfig(resources={"limits": {"memory": "64Gi"}},
                         tolerations=[tol], node_selector={"nvidia.com/gpu.product": "H100"},
                         env=[{"name": "KFP_GPU_SHARE", "value": "8.0"},
                              {"name": "S", "valueFrom": {"secretKeyRef": {}}}])
    s = rt.worker_settings(cfg, "gpu:8")
    assert s["gpu"] == "gpu:8" and s["env"] == {"KFP_GPU_SHARE": "8.0"}
    assert s["worker_memory"] == "64Gi"
    args = rt.trainer_args("gs://b/w/data.npz", "", "gs://b/w", epochs=1, batch_size=32,
                           steps_per_epoch=0, learning_rate=0.0125, lr_warmup_steps=100,
                           optimizer="sgd", model="small", blocks=2, width=16,
                           mixed_precision=True, xla=False, seed=0)
    opts = rt.job_options(name="resnet-abc", namespace="ml", image="img", args=args, workers=2,
                          settings=s, rdma=True, rdma_resource="rdma/rdma_shared_device_a",
                          multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="",
                          nccl_socket_ifname="", shm_size="", run_id="r", task_name="t")
    job = mpijob.build(opts)
    specs = job["spec"]["mpiReplicaSpecs"]
    worker = specs["Worker"]["template"]["spec"]
    launcher = specs["Launcher"]["template"]["spec"]
    assert job["spec"]["slotsPerWorker"] == 8 and specs["Worker"]["replicas"] == 2
    wres = worker["containers"][0]["resources"]["limits"]
    assert wres["nvidia.com/gpu"] in (8, "8") and "rdma/rdma_shared_device_a" in wres
    assert tol in worker["tolerations"]
    assert worker["nodeSelector"]["nvidia.com/gpu.product"] == "H100"
    assert "nvidia.com/gpu" not in str(launcher.get("containers", [{}])[0].get("resources"))
    cmd = " ".join(launcher["containers"][0].get("command", []) +
                   launcher["containers"][0].get("args", []))
    assert "-np 16" in cmd and "train-resnet" in cmd
    # mixed_precision=True leaves the GPU default to the trainer; xla=False turns XLA off.
    assert "--no-xla" in cmd and "mixed-precision" not in cmd


@pytest.mark.parametrize("mixed, xla, capability, expected", [
    # the GPU default (None): XLA + bfloat16 from Ampere (8.0) on, float16 + scaling below
    (None, None, (9, 0), ("mixed_bfloat16", False, True)),
    (None, None, (8, 0), ("mixed_bfloat16", False, True)),
    (None, None, (7, 5), ("mixed_float16", True, True)),
    (None, None, None, ("float32", False, False)),  # CPU: neither
    (False, None, (9, 0), ("float32", False, True)),  # explicit off wins on a GPU
    (None, False, (9, 0), ("mixed_bfloat16", False, False)),
    (True, True, None, ("mixed_float16", True, True)),  # explicit on wins on a CPU
])
def test_precision_plan_gpu_defaults(mixed, xla, capability, expected):
    from kfp_gpu.training.horovod_config import precision_plan

    p = precision_plan(mixed, xla, capability)
    assert (p.policy, p.loss_scaling, p.xla) == expected
    assert ("CPU" if capability is None else f"{capability[0]}.{capability[1]}") in p.reason


def test_train_resnet_flags_default_to_the_gpu_default(monkeypatch):
    """--mixed-precision/--xla unset reach the trainer as None (the GPU default); the
    component's False becomes --no-..., so a pipeline can still turn them off."""
    from typer.testing import CliRunner

    from kfp_gpu.cli import resnet

    seen = {}
    app = typer.Typer()
    app.command()(resnet.train_resnet_command)
    import kfp_gpu.training.horovod_train as ht

    monkeypatch.setattr(ht, "run", lambda cfg: seen.setdefault("cfg", cfg))
    for argv, expected in (([], (None, None)), (["--no-xla"], (None, False)),
                           (["--mixed-precision", "--xla"], (True, True))):
        seen.clear()
        res = CliRunner().invoke(app, ["--mode", "benchmark", *argv])
        assert res.exit_code == 0, res.output
        assert (seen["cfg"].mixed_precision, seen["cfg"].xla) == expected


def test_trainer_args_validate_before_launch():
    with pytest.raises(ValueError, match="optimizer"):
        rt.trainer_args("d", "", "o", epochs=1, batch_size=32, steps_per_epoch=0,
                        learning_rate=0.1, lr_warmup_steps=0, optimizer="rmsprop",
                        model="small", blocks=1, width=8, mixed_precision=False, xla=False,
                        seed=0)
    assert mpirun.mpirun_command(2, ["p"], as_root=True, local=True) == [
        "mpirun", "--allow-run-as-root", "-np", "2", "--oversubscribe", "-bind-to", "none",
        "-map-by", "slot", "p"]
    with pytest.raises(ValueError):
        mpirun.mpirun_command(0, ["p"], local=True)


def test_kfp_scalar_metrics_scaling():
    m = rt.kfp_scalar_metrics({"img_per_sec_total": 300.0, "world_size": 2,
                               "weights_identical": True, "final_loss": None}, 200.0)
    assert m["scaling_efficiency"] == pytest.approx(0.75) and m["weights_identical"] == 1.0
    assert "final_loss" not in m


def test_compiled_pipeline_gpu_goes_to_the_training_task_as_text():
    """The compiled default request reaches the component as its worker_gpu text; the
    task's own pod (the MPIJob client) carries no accelerator."""
    spec = yaml.safe_load_all((REPO / "pipelines" / "resnet_horovod.yaml").read_text())
    docs = list(spec)
    comps = docs[0]["components"]
    train = next(v for k, v in comps.items() if "train-resnet-horovod" in k)
    assert {p["field"] for p in train["taskConfigPassthroughs"]} >= {
        "RESOURCES", "KUBERNETES_TOLERATIONS", "KUBERNETES_NODE_SELECTOR"}
    tasks = docs[0]["root"]["dag"]["tasks"]
    worker_gpu = tasks["train-resnet-horovod"]["inputs"]["parameters"]["worker_gpu"]
    assert worker_gpu["runtimeValue"]["constant"] == "gpu:8"
    execs = docs[0]["deploymentSpec"]["executors"]
    train_exec = next(v for k, v in execs.items() if "train-resnet-horovod" in k)
    assert "accelerator" not in (train_exec["container"].get("resources") or {})
    assert "kfp-gpu-trainer" in train_exec["container"]["image"]


@pytest.mark.parametrize("name", ["small", "resnet50"])
def test_models_feed_their_rescaling_output_forward(name):
    """The Rescaling(1/255) output is what the first convolution reads,
    so the model takes raw 0..255 pixels as its docstring says (before, ``small``'s first
    convolution read the raw input and the layer's output went nowhere).

    Graph: the first Conv2D consumes the Rescaling layer's output. Behaviour: with the
    Rescaling scale set to 0 every input reaches the convolutions as zeros, so two different
    images give the same prediction; with the real scale they do not."""
    import keras

    from kfp_gpu.training import resnet_models

    shape = (28, 28, 1) if name == "small" else (32, 32, 3)
    model = resnet_models.build(name, shape, 10, blocks=1, width=4)
    rescale = next(la for la in model.layers if isinstance(la, keras.layers.Rescaling))
    first_conv = next(la for la in model.layers if isinstance(la, keras.layers.Conv2D))
    if name == "small":  # keras.applications.ResNet50 pads before its first convolution
        assert first_conv.input is rescale.output
    rng = np.random.default_rng(0)
    images = (255 * rng.random((2, *shape))).astype(np.float32)
    differ = np.asarray(model(images, training=False))
    assert not np.allclose(differ[0], differ[1], atol=1e-6)
    rescale.scale = 0.0
    blind = np.asarray(model(images, training=False))
    np.testing.assert_allclose(blind[0], blind[1], atol=1e-6)


def test_the_rdma_help_says_what_the_component_builds():
    """``rdma`` as `kfp-gpu params resnet-horovod` and docs/parameters.md describe it: the
    component's Workers (MPIJob and TrainJob) request the RDMA resource, run the memlock
    check at start (KFP_GPU_RDMA=1, kfp_gpu.training.worker_start) and, running as uid 1000,
    get no IPC_LOCK; a root Worker (not what the component builds) would get it."""
    from kfp_gpu.catalog import params
    from kfp_gpu.mpi.spec import backends, ssh, trainjob
    from kfp_gpu.training import worker_start

    meaning = params.declared("resnet-horovod")["rdma"].meaning
    assert "memlock" in meaning and "uid 1000" in meaning and "none is added" in meaning
    settings = {**rt.cpu_worker_settings(), "gpu": "gpu:8"}
    opts = rt.job_options(name="resnet-rdma", namespace="ml", image="h:1", args=["--x"],
                          workers=2, settings=settings, rdma=True,
                          rdma_resource="rdma/rdma_shared_device_a", multus_networks="",
                          nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
                          shm_size="", run_id="r", task_name="t")
    assert opts.ssh.run_as_user == ssh.MPI_USER_ID == 1000
    worker = mpijob.build(opts)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    (c,) = worker["containers"]
    assert "securityContext" not in c  # no IPC_LOCK
    assert c["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
    assert {"name": worker_start.RDMA_ENV, "value": "1"} in c["env"]
    tj = rt.build_job(backends.TRAINJOB, opts, runtime_image="h:1")
    assert {"name": worker_start.RDMA_ENV, "value": "1"} in tj["spec"]["trainer"]["env"]
    assert "IPC_LOCK" not in str(trainjob.runtime_patches(opts))
    # the capability is there for a root Worker only
    root = mpijob.build(opts.replace(ssh=ssh.ROOT_SSH))["spec"]["mpiReplicaSpecs"]["Worker"]
    assert root["template"]["spec"]["containers"][0]["securityContext"] == {
        "capabilities": {"add": ["IPC_LOCK"]}}
