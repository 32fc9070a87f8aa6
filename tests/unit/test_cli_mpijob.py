"""``kfp-gpu mpijob run-local`` through the typer app (no Docker needed for these)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kfp_gpu.cli.app import app
from kfp_gpu.mpi.local import fields
from kfp_gpu.mpi.spec import mpijob, trainjob, volumes
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.support import upstream_crds


def _job_file(tmp_path):
    job = mpijob.build(MPIJobOptions.from_settings(
        name="cli-job", namespace="ci", image="img:1", program=("python", "-c", "0"),
        workers=2, volumes=(volumes.PvcMount("scratch", "/scratch"),)))
    f = tmp_path / "job.yaml"
    f.write_text(mpijob.to_yaml(job), encoding="utf-8")
    return f


def test_run_local_is_a_subcommand_with_its_options():
    res = CliRunner().invoke(app, ["mpijob", "run-local", "--help"])
    assert res.exit_code == 0, res.output
    for opt in ("--pvc", "--image", "--replace", "--keep", "--ready-timeout"):
        assert opt in res.output


def test_run_local_bad_pvc_exits_2_naming_the_accepted_form(tmp_path):
    f = _job_file(tmp_path)
    res = CliRunner().invoke(app, ["mpijob", "run-local", str(f), "--pvc", "scratch"])
    assert res.exit_code == 2
    assert "CLAIM=DIR" in res.output



# ---------------------------------------------------------------- no Docker engine
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def _invoke(*args, env=None):
    res = CliRunner().invoke(app, ["mpijob", "run-local", *args], env=env)
    return res, [x for x in res.output.splitlines() if x.strip()]


def _mpijob():
    return mpijob.build(MPIJobOptions.from_settings(
        name="cli-job", namespace="ci", image="img:1", program=("python", "-c", "0"),
        workers=2))


def _write(tmp_path, obj, name="job.yaml"):
    f = tmp_path / name
    f.write_text(yaml.safe_dump(obj), encoding="utf-8")
    return f


def test_missing_file_is_one_line_exit_2(tmp_path):
    res, lines = _invoke(str(tmp_path / "nope.yaml"))
    assert res.exit_code == 2 and len(lines) == 1 and "no such file" in lines[0], res.output


def test_corrupt_yaml_is_one_line_exit_2(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("kind: MPIJob\nspec: [unclosed\n")
    res, lines = _invoke(str(f))
    assert res.exit_code == 2 and len(lines) == 1 and "line " in lines[0], res.output


WORKER_C0 = ("spec", "mpiReplicaSpecs", "Worker", "template", "spec", "containers", 0)


def _set(obj, path, key, value):
    for p in path:
        obj = obj[p]
    obj[key] = value


@pytest.mark.parametrize(("path", "key", "shown"), [
    (("spec",), "slotPerWorker", ".spec.slotPerWorker"),
    (("spec", "runPolicy"), "cleanupPolicy", ".spec.runPolicy.cleanupPolicy"),
    (WORKER_C0, "imagePullPolcy",
     ".spec.mpiReplicaSpecs.Worker.template.spec.containers[0].imagePullPolcy"),
    (("metadata",), "label", ".metadata.label"),
])
def test_unknown_field_refused_as_server_side_apply_does(tmp_path, path, key, shown):
    """The upstream CRD (strict) refuses the same object; the CLI says where, exit 2."""
    job = copy.deepcopy(_mpijob())
    _set(job, path, key, "x")
    assert fields.unknown_fields(job) == [shown]
    if path[0] != "metadata":  # the CRD leaves metadata to the API server's ObjectMeta
        with pytest.raises(upstream_crds.CRDValidationError):
            upstream_crds.validate(job)
    res, lines = _invoke(str(_write(tmp_path, job)), env=NO_ENGINE)
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and shown in lines[0] and "not declared" in lines[0], res.output


def test_builders_output_has_no_unknown_fields():
    assert fields.unknown_fields(_mpijob()) == []
    tj = trainjob.build(MPIJobOptions.from_settings(
        name="tj", namespace="ml", image="horovod:test", program=("python", "-c", "0"),
        workers=2))
    assert fields.unknown_fields(tj) == []
    runtime = yaml.safe_load_all(Path(__file__).resolve().parents[2].joinpath(
        "manifests", "trainer", "horovod-runtime.yaml").read_text())
    assert all(fields.unknown_fields(d) == [] for d in runtime if d)
    tj["spec"]["trainer"]["numNode"] = 2
    assert fields.unknown_fields(tj) == [".spec.trainer.numNode"]
    with pytest.raises(upstream_crds.CRDValidationError):
        upstream_crds.validate(tj)


def test_container_without_image_is_one_line_exit_2(tmp_path):
    job = copy.deepcopy(_mpijob())
    del job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]
    res, lines = _invoke(str(_write(tmp_path, job)), env=NO_ENGINE)
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert "Worker.template.spec.containers[0] has no image" in lines[0], res.output


def test_no_docker_engine_is_one_line_exit_3(tmp_path):
    res, lines = _invoke(str(_write(tmp_path, _mpijob())), env=NO_ENGINE)
    assert res.exit_code == 3, res.output
    assert len(lines) == 1 and "no Docker engine answers at unix:///nonexistent" in lines[0]
