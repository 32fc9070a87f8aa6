"""`kfp-gpu compile --secret-env/--pvc/--secret-volume/--resources`: the settings reach the
compiled IR (platform spec and executor resources), bad forms are refused with exit 2, the
default build is unchanged, and the Secret env reaches the MPIJob/TrainJob pods."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kfp_gpu.catalog import params as catalog_params
from kfp_gpu.cli.app import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def _docs(path: Path) -> tuple[dict, dict]:
    docs = list(yaml.safe_load_all(path.read_text()))
    return docs[0], (docs[1] if len(docs) > 1 else {})


def _executor_of(spec: dict, display: str) -> tuple[str, dict]:
    """(executor label, container) of the task with display name ``display`` (any DAG)."""
    comps = spec["components"]
    dags = [spec["root"]["dag"]] + [c["dag"] for c in comps.values() if "dag" in c]
    for dag in dags:
        for task in dag["tasks"].values():
            if task.get("taskInfo", {}).get("name") == display:
                label = comps[task["componentRef"]["name"]]["executorLabel"]
                return label, spec["deploymentSpec"]["executors"][label]["container"]
    raise AssertionError(f"no task {display!r}")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("c") / "out"
    r = runner.invoke(app, ["compile", "-o", str(out), "--secret-env", "s3-creds",
                            "--secret-env", "minio:accesskey=AWS_ACCESS_KEY_ID",
                            "--pvc", "imdb-data:/mnt/data",
                            "--secret-volume", "gcp-sa:/var/secrets/google:key.json",
                            "--resources", "train-lstm=cpu:2,memory:6G",
                            "--resources", "evaluate=memory-limit:3G"])
    assert r.exit_code == 0, r.output
    return out


def test_every_container_task_gets_the_secret_env_pvc_and_secret_volume(compiled):
    for name in ("imdb_lstm", "resnet_horovod", "fractional_eval"):
        spec, platform = _docs(compiled / "pipelines" / f"{name}.yaml")
        executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        containers = {k for k, v in spec["deploymentSpec"]["executors"].items()
                      if "container" in v}  # importers run in KFP's driver: no pod
        assert set(executors) == containers, name
        for label, cfg in executors.items():
            envs = {(s["secretName"], k["secretKey"], k["envVar"], s.get("optional", False))
                    for s in cfg["secretAsEnv"] for k in s["keyToEnv"]}
            assert ("s3-creds", "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID", False) in envs
            assert ("s3-creds", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL", True) in envs
            assert ("minio", "accesskey", "AWS_ACCESS_KEY_ID", False) in envs
            assert [(m["constant"], m["mountPath"]) for m in cfg["pvcMount"]] == [
                ("imdb-data", "/mnt/data")], label
            assert [(v["secretName"], v["mountPath"]) for v in cfg["secretAsVolume"]] == [
                ("gcp-sa", "/var/secrets/google")]
            container = spec["deploymentSpec"]["executors"][label]["container"]
            assert {"name": "GOOGLE_APPLICATION_CREDENTIALS",
                    "value": "/var/secrets/google/key.json"} in container["env"]


def test_resources_override_one_task_and_keep_the_others(compiled):
    spec, _ = _docs(compiled / "pipelines" / "imdb_lstm.yaml")
    _, train = _executor_of(spec, "train-lstm")
    res = train["resources"]
    assert (res["cpuRequest"], res["cpuLimit"], res["memoryRequest"], res["memoryLimit"]) \
        == (2.0, 2.0, 6.0, 6.0)  # KFP's IR numbers (G), and the *Limit/*Request text forms
    assert res["resourceCpuLimit"] == "2" and res["resourceMemoryRequest"] == "6G"
    _, prep = _executor_of(spec, "prep-text")
    assert prep["resources"]["resourceCpuLimit"] == "2"
    assert prep["resources"]["resourceMemoryLimit"] == "4G"
    for name in ("imdb_lstm", "resnet_horovod"):
        spec, _ = _docs(compiled / "pipelines" / f"{name}.yaml")
        _, ev = _executor_of(spec, "evaluate")
        assert ev["resources"]["resourceMemoryLimit"] == "3G"  # both pipelines' evaluate
        assert ev["resources"]["resourceCpuLimit"] == "2"  # the default kept


def test_default_build_has_no_settings_and_the_documented_resources(tmp_path):
    r = runner.invoke(app, ["compile", "-o", str(tmp_path / "d"), "--only", "imdb-lstm"])
    assert r.exit_code == 0, r.output
    spec, platform = _docs(tmp_path / "d" / "pipelines" / "imdb_lstm.yaml")
    text = yaml.safe_dump(platform)
    assert "secretAsEnv" not in text and "pvcMount" not in text
    _, train = _executor_of(spec, "train-lstm")
    d = catalog_params.default_resources()["imdb-lstm"]["train-lstm"]
    assert train["resources"]["resourceCpuRequest"] == d.cpu_request == "4"
    assert train["resources"]["resourceMemoryLimit"] == d.memory_limit == "8G"
    assert "resourceCpuLimit" not in train["resources"]


def test_resnet_training_task_passes_env_to_its_own_pod_and_the_workers(compiled):
    spec, _ = _docs(compiled / "pipelines" / "resnet_horovod.yaml")
    label, _ = _executor_of(spec, "train-resnet-horovod")
    comp = next(c for c in spec["components"].values() if c.get("executorLabel") == label)
    passthroughs = {p["field"]: p.get("applyToTask", False)
                    for p in comp["taskConfigPassthroughs"]}
    assert passthroughs["ENV"] is True and passthroughs["KUBERNETES_VOLUMES"] is True
    assert passthroughs["RESOURCES"] is False


@pytest.mark.parametrize("args,msg", [
    (["--secret-env", "Bad_Name"], r"not a valid name"),
    (["--secret-env", "s3:accesskey"], r"is not KEY=ENV"),
    (["--secret-env", "s3:key=1BAD"], r"is not KEY=ENV"),
    (["--pvc", "data"], r"CLAIM:/mount/path"),
    (["--pvc", "data:relative/path"], r"absolute path"),
    (["--secret-volume", "gcp-sa"], r"SECRET:/dir\[:KEY\]"),
    (["--resources", "train-lstm"], r"TASK=KEY:QUANTITY"),
    (["--resources", "train-lstm=gpu:1"], r"KEY one of cpu, memory"),
    (["--resources", "train-lstm=cpu:two"], r"not a CPU quantity"),
    (["--resources", "train-lstm=memory:6GB"], r"not a memory quantity"),
    (["--resources", "train-lstm=cpu:0"], r"> 0"),
    (["--resources", "prep-text=cpu-request:4"], r"cpu request 4 is above its limit 2"),
    (["--resources", "no-such-task=cpu:1"],
     (r"no task 'no-such-task'.*accepted task names: combine-shards, evaluate, evaluate-shard,"
      r" plan-shards, prep-images, prep-text, train-lstm, train-resnet-horovod")),
    (["--only", "imdb-lstm", "--resources", "plan-shards=cpu:1"],
     r"accepted task names: evaluate, prep-text, train-lstm$"),
    (["--only", "prep_text", "--pvc", "d:/mnt/d"], r"apply to pipeline tasks"),
    (["--pvc", "a:/mnt/x", "--pvc", "b:/mnt/x"], r"given twice"),
])
def test_bad_forms_exit_2_with_one_line(tmp_path, args, msg):
    r = runner.invoke(app, ["compile", "-o", str(tmp_path / "o"), *args])
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert re.search(msg, flat, re.MULTILINE) or re.search(msg, r.output, re.MULTILINE), r.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args", [["--check", "--pvc", "d:/mnt/d"],
                                  ["--resources", "train-lstm=cpu:2"]])
def test_settings_need_an_output_dir_and_no_check(args):
    r = runner.invoke(app, ["compile", *args])
    assert r.exit_code == 2 and "--resources" in r.output, r.output


def test_docs_list_the_generated_defaults():
    text = (REPO / "docs" / "cluster.md").read_text()
    assert catalog_params.defaults_table() in text
    assert "| imdb-lstm | train-lstm | cpu-request:4,memory-request:8G,memory-limit:8G |" \
        in catalog_params.defaults_table()


def test_secret_env_reaches_mpijob_and_trainjob_pods():
    from types import SimpleNamespace

    from kfp_gpu.components.train_resnet_horovod import run_training as rt
    from kfp_gpu.mpi.spec import mpijob, trainjob

    # a dsl.TaskConfig as the 2.17 driver fills it (k8s.go extendPodSpecPatch)
    cfg = SimpleNamespace(
        resources={"limits": {"cpu": "1"}}, tolerations=[], node_selector={},
        volumes=[], volume_mounts=[], env=[{"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {
                   "name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}}},
               {"name": "AWS_ENDPOINT_URL", "valueFrom": {"secretKeyRef": {
                   "name": "s3-creds", "key": "AWS_ENDPOINT_URL", "optional": True}}},
               {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
               {"name": "PLAIN", "value": "1"}])
    settings = rt.worker_settings(cfg, "gpu:1")
    assert [e["name"] for e in settings["secret_env"]] == ["AWS_ACCESS_KEY_ID",
                                                           "AWS_ENDPOINT_URL"]
    assert settings["env"] == {"PLAIN": "1"}
    opts = rt.job_options(name="resnet-x", namespace="ns", image="img:1", args=["--x"],
                          workers=2, settings=settings, rdma=False, rdma_resource="rdma/a",
                          multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="",
                          nccl_socket_ifname="", shm_size="", run_id="", task_name="t")
    job = mpijob.build(opts)
    for role in ("Launcher", "Worker"):
        env = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "AWS_ENDPOINT_URL", "valueFrom": {"secretKeyRef": {
            "name": "s3-creds", "key": "AWS_ENDPOINT_URL", "optional": True}}} in env, role
        assert not any(e.get("value") and "s3-creds" in e["value"] for e in env)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    cmd = launcher["command"]
    assert "-x" in cmd and cmd[cmd.index("AWS_ACCESS_KEY_ID") - 1] == "-x"
    tj = trainjob.build(opts)
    names = {e["name"]: e for e in tj["spec"]["trainer"]["env"]}
    assert names["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["name"] == "s3-creds"
    assert "AWS_ENDPOINT_URL" in tj["spec"]["trainer"]["command"]
    # without Secret env the job is as before: no valueFrom anywhere
    plain = mpijob.build(opts.replace(secret_env=()))
    assert "valueFrom" not in yaml.safe_dump(plain)


def test_secret_env_entries_are_checked():
    from kfp_gpu.mpi.spec.options import MPIJobOptions

    base = MPIJobOptions(name="j", image="i", program=("p",))
    with pytest.raises(ValueError, match="EnvVar dicts"):
        base.replace(secret_env=({"name": "A", "value": "x"},)).validate()
    with pytest.raises(ValueError, match="set twice"):
        base.replace(env={"A": "1"}, secret_env=(
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},)).validate()


def test_work_dir_accepts_s3_and_checkpoints_stay_off_s3():
    from kfp_gpu.components.train_resnet_horovod import run_training as rt

    assert rt.resolve_work_dir("s3://b/w/", "minio://x/m", (), "job") == "s3://b/w"
    assert rt.resolve_work_dir("", "s3://b/run/model", (), "job") == "s3://b/run/model-work"
    with pytest.raises(ValueError, match="not on gs:// or s3://"):
        rt.resolve_work_dir("", "minio://b/run/model", (), "job")
    with pytest.raises(ValueError, match="no s3:// file system"):
        rt.resolve_work_dir("s3://b/ck", "s3://b/m", (), "job", what="checkpoint_dir")
    assert rt.checkpoint_dir_for("s3://b/w", "") == rt.POD_CHECKPOINTS
    assert rt.checkpoint_dir_for("gs://b/w", "") == ""
    assert rt.checkpoint_dir_for("s3://b/w", "/mnt/ck") == "/mnt/ck"


def test_imdb_checkpoint_dir_refuses_s3_before_any_task():
    from kfp_gpu.pipelines import imdb_lstm

    with pytest.raises(ValueError, match="checkpoint_dir.*s3://"):
        imdb_lstm.ENTRY.parameters["checkpoint_dir"].check("s3://b/ck")
    imdb_lstm.ENTRY.parameters["checkpoint_dir"].check("gs://b/ck")
