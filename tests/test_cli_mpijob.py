"""``kfp-gpu mpijob run-local`` through the typer app (no Docker needed for these)."""

from __future__ import annotations

from typer.testing import CliRunner

from kfp_gpu.cli.app import app
from kfp_gpu.mpi.spec import mpijob, volumes
from kfp_gpu.mpi.spec.options import MPIJobOptions


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

