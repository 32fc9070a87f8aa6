"""Each command-line value is parsed once: the option callback (kfp_gpu.cli.checks) parses
it and its return value replaces the option's text (typer ``_TyperParameter.process_value``), so
the library receives parsed objects and parses no text again.

Each parser is wrapped with a counter (monkeypatch) and the command runs through the typer
app; the count must equal the number of values given, and the parsed values must have
reached what the command produced.
"""

from __future__ import annotations

import warnings

import pytest
import yaml
from typer.testing import CliRunner

from kfp_gpu.cli import run_local
from kfp_gpu.cli.app import app
from kfp_gpu.dsl import task_settings
from kfp_gpu.gpu import request as gpu_request
from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.spec import mpijob
from kfp_gpu.mpi.spec.options import MPIJobOptions


def counted(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` with a wrapper that records each call's first argument."""
    calls: list = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_compile_parses_each_option_value_once(monkeypatch, tmp_path):
    parsed = {name: counted(monkeypatch, task_settings, name) for name in (
        "parse_secret_env", "parse_pvc", "parse_secret_volume", "parse_resources")}
    # Every parse of GPU request text reads its options through this one module-level
    # function (kfp_gpu.gpu.request.parse), once per text; a GpuRequest passes through
    # parse without it. Modules that imported ``parse`` by name still reach it.
    gpu_texts = counted(monkeypatch, gpu_request, "_options")
    args = ["compile", "-o", str(tmp_path), "--only", "resnet-horovod", "--gpu", "gpu:2",
            "--secret-env", "s3-creds", "--secret-env", "other:token=API_TOKEN",
            "--pvc", "shared:/mnt/shared", "--secret-volume", "gcp-sa:/var/secrets/google:key.json",
            "--resources", "train-resnet-horovod=cpu:2,memory:6G"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output

    assert parsed["parse_secret_env"] == ["s3-creds", "other:token=API_TOKEN"]
    assert parsed["parse_pvc"] == ["shared:/mnt/shared"]
    assert parsed["parse_secret_volume"] == ["gcp-sa:/var/secrets/google:key.json"]
    assert parsed["parse_resources"] == ["train-resnet-horovod=cpu:2,memory:6G"]
    assert gpu_texts == ["gpu:2"]

    # ... and what was parsed is what was compiled
    ir, platform = yaml.safe_load_all((tmp_path / "pipelines" / "resnet_horovod.yaml")
                                      .read_text())
    task = ir["root"]["dag"]["tasks"]["train-resnet-horovod"]["inputs"]["parameters"]
    assert task["worker_gpu"]["runtimeValue"]["constant"] == "gpu:2"
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    train = k8s["exec-train-resnet-horovod"]
    assert [p["constant"] for p in (pv.get("pvcNameParameter", {}).get("runtimeValue", {})
                                    for pv in train["pvcMount"])] == ["shared"]
    assert {s["secretName"] for s in train["secretAsEnv"]} == {"s3-creds", "other"}
    assert [v["mountPath"] for v in train["secretAsVolume"]] == ["/var/secrets/google"]


def test_a_bad_value_is_still_refused_by_its_callback_with_exit_2(monkeypatch, tmp_path):
    calls = counted(monkeypatch, task_settings, "parse_pvc")
    r = CliRunner().invoke(app, ["compile", "-o", str(tmp_path), "--pvc", "shared"])
    assert r.exit_code == 2 and "CLAIM:/mount/path" in r.output
    assert calls == ["shared"]


def test_mpijob_run_local_parses_each_pvc_once(monkeypatch, tmp_path):
    """``--pvc CLAIM=DIR`` reaches the runner as ``{claim: folder}``, each item parsed once
    (kfp_gpu.cli.run_local.pvc_item)."""
    job = mpijob.build(MPIJobOptions.from_settings(
        name="cli-job", namespace="ci", image="img:1", program=("python", "-c", "0"),
        workers=2))
    f = tmp_path / "job.yaml"
    f.write_text(mpijob.to_yaml(job), encoding="utf-8")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    calls = counted(monkeypatch, run_local, "pvc_item")
    given: list = []

    class Stop(ValueError):
        pass

    def runner(job, *, pvc_dirs, **kwargs):
        given.append(pvc_dirs)
        raise Stop("stopped before Docker")

    monkeypatch.setattr(local_runner, "LocalMPIJobRunner", runner)
    r = CliRunner().invoke(app, ["mpijob", "run-local", str(f), "--pvc",
                                 f"scratch={tmp_path / 'a'}", "--pvc", f"data={tmp_path / 'b'}"])
    assert r.exit_code == 2 and "stopped before Docker" in r.output, r.output
    assert calls == [f"scratch={tmp_path / 'a'}", f"data={tmp_path / 'b'}"]
    assert given == [{"scratch": str(tmp_path / "a"), "data": str(tmp_path / "b")}]


@pytest.mark.parametrize("item, message", [
    ("scratch", "'scratch': accepted is CLAIM=DIR"),
    ("Scratch=/tmp", "claim of 'Scratch=/tmp'"),
    ("scratch=/nonexistent", "/nonexistent is not an existing folder"),
])
def test_the_standalone_entry_point_names_the_option(item, message, capsys, tmp_path):
    """``python -m kfp_gpu.cli.run_local`` parses its ``--pvc`` with the same rule, the
    message prefixed ``invalid --pvc``; exit 2."""
    assert run_local.main([str(tmp_path / "job.yaml"), "--pvc", item]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid --pvc ") and message in err
