"""kfp-gpu submit against a local KFP v2beta1 API double (real HTTP, tests/doubles/kfp_api.py).

Covers: upload + idempotent versions, experiment reuse, typed parameters, waiting with
progress, SUCCEEDED / FAILED / timeout exit codes, 401 / 403 refusals, token from the
environment or the ServiceAccount token file. The opt-in run against a real KFP:
tests/e2e/test_real_kfp.py.
Version content rules, --no-cache and what a finished run prints: tests/unit/test_submit_summary.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kfp_gpu.catalog import arguments as pipeline_params
from kfp_gpu.catalog import discover as registry
from kfp_gpu.cli import doctor as doctor_cli
from kfp_gpu.cli import submit as submit_cli
from kfp_gpu.cluster import kfp_api, submit, version_content
from kfp_gpu.compiler.compile import compiled_pipeline
from tests.doubles.kfp_api import FakeKfp

REPO = Path(__file__).resolve().parents[2]
PIPELINE = "imdb-lstm"


pytestmark = pytest.mark.usefixtures("kfp_client_env")


def cli(*args: str):
    app = typer.Typer()
    app.command()(submit_cli.submit_command)
    return CliRunner().invoke(app, list(args))


def _spec() -> dict:
    path, _ = compiled_pipeline(PIPELINE)
    return next(yaml.safe_load_all(path.read_text()))


def test_upload_run_wait_succeeded_and_rerun_is_idempotent(monkeypatch):
    spec_inputs = _spec()["root"]["inputDefinitions"]["parameters"]
    int_param = next(k for k, v in spec_inputs.items() if v["parameterType"] == "NUMBER_INTEGER")
    with FakeKfp(tokens={"s3cret"}) as kfp:
        monkeypatch.setenv(kfp_api.TOKEN_ENV, "s3cret")
        first = cli(PIPELINE, "--host", kfp.url, "--experiment", "ci", "--param",
                    f"{int_param}=3", "--version", "abc123", "--wait", "--timeout", "30",
                    "--poll", "0.05")
        assert first.exit_code == 0, first.output
        (run_id,) = kfp.runs
        assert f"{kfp.url}/#/runs/details/{run_id}" in first.output
        # Progress: each state change printed once, in order.
        states = [s for s in ("PENDING", "RUNNING", "SUCCEEDED") if f"] {s}" in first.output]
        assert states == ["PENDING", "RUNNING", "SUCCEEDED"]
        # Finished tasks counted among the component tasks only, not Argo/KFP's nodes.
        n = len(_spec()["root"]["dag"]["tasks"])
        assert f"] SUCCEEDED ({n}/{n} tasks finished)" in first.output, first.output
        assert kfp.runs[run_id]["runtime_config"]["parameters"] == {int_param: 3}
        # No kubeconfig: the outputs are the UI's to show, and the line says so.
        assert f"outputs and metrics: shown in the KFP UI at {kfp.url}/#/runs/details/" \
            f"{run_id} (no kubeconfig" in first.output
        names = sorted(v["display_name"] for v in kfp.versions.values())
        assert names == sorted([PIPELINE, "abc123"])  # first version is the server's default

        second = cli(PIPELINE, "--host", kfp.url, "--experiment", "ci", "--version", "abc123")
        assert second.exit_code == 0, second.output
        assert "already uploaded" in second.output
        assert len(kfp.pipelines) == 1 and len(kfp.versions) == 2
        assert len(kfp.experiments) == 1 and len(kfp.runs) == 2
        uploads = [r for r in kfp.requests if r["path"].endswith(("/upload", "/upload_version"))]
        assert len(uploads) == 2  # nothing uploaded the second time
        # Both runs point at the same named version.
        refs = {r["pipeline_version_reference"]["pipeline_version_id"] for r in kfp.runs.values()}
        assert len(refs) == 1 and kfp.versions[refs.pop()]["display_name"] == "abc123"


def test_new_commit_adds_a_version(monkeypatch):
    digest = version_content.content_hash(compiled_pipeline(PIPELINE)[0].read_text())
    with FakeKfp() as kfp:
        monkeypatch.setenv("GITHUB_SHA", "0123456789abcdef0123")
        assert cli(PIPELINE, "--host", kfp.url).exit_code == 0
        monkeypatch.setenv("GITHUB_SHA", "fedcba98765432100000")
        assert cli(PIPELINE, "--host", kfp.url).exit_code == 0
        names = sorted(v["display_name"] for v in kfp.versions.values())
        assert names == sorted([PIPELINE, f"0123456789ab-{digest[:10]}",
                                f"fedcba987654-{digest[:10]}"])


def test_failed_run_exits_nonzero_with_reason():
    """Without a kubeconfig the failed component task is named with the UI link and why;
    the run's own Argo/KFP nodes are not."""
    with FakeKfp(script=[("PENDING", 0.05), ("RUNNING", 0.1), ("FAILED", 0)]) as kfp:
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1", "--wait", "--poll", "0.05")
        assert res.exit_code == 1
        (run_id,) = kfp.runs
        url = f"{kfp.url}/#/runs/details/{run_id}"
        assert f"run {run_id} FAILED" in res.output
        failed = [ln for ln in res.output.splitlines() if ln.startswith("task ")]
        assert len(failed) == 1 and failed[0].startswith(f"task {kfp.failed_task}")
        assert failed[0].endswith(f"failed: see {url} (no kubeconfig to read the task logs)")
        assert not any(f"task {n} " in res.output for n in ("root", "executor", "root-driver"))


def test_timeout_exits_nonzero():
    with FakeKfp(script=[("RUNNING", 0)]) as kfp:
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1", "--wait", "--timeout", "0.4",
                  "--poll", "0.1")
        assert res.exit_code == 1
        assert "timed out after 0.4s with the run still RUNNING" in res.output


def test_wait_for_run_timeout_uses_the_clock():
    """The wait loop itself, with a fake clock: it stops at the timeout, not before."""
    class Client:
        calls = 0

        def get_run(self, run_id):
            Client.calls += 1
            return type("Run", (), {"state": "RUNNING", "run_details": None, "error": None})()

    now = [0.0]
    out = submit.wait_for_run(Client(), "r1", "u", timeout=60, poll=10, echo=lambda s: None,
                              clock=lambda: now[0],
                              sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert out.code == 1 and out.state == "RUNNING" and now[0] == 60
    assert Client.calls == 7  # t = 0, 10, ..., 60


def test_unauthenticated_is_refused_fast_with_reason():
    with FakeKfp(tokens={"right"}) as kfp:
        res = cli(PIPELINE, "--host", kfp.url)
        assert res.exit_code == 1
        assert "HTTP 401" in res.output and "Unauthenticated" in res.output
        assert not kfp.pipelines and not kfp.runs


def test_forbidden_write_is_reported(monkeypatch, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("viewer\n")
    monkeypatch.setenv(kfp_api.TOKEN_PATH_ENV, str(token_file))  # the SA token path
    with FakeKfp(read_only_tokens={"viewer"}) as kfp:
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1")
        assert res.exit_code == 1
        assert "HTTP 403" in res.output and "PermissionDenied" in res.output
        assert not kfp.pipelines


def test_bad_input_fails_before_any_request():
    with FakeKfp() as kfp:
        res = cli("no-such-pipeline", "--host", kfp.url)
        assert res.exit_code == 2 and all(n in res.output for n in registry.PIPELINES)
        res = cli(PIPELINE, "--host", kfp.url, "--param", "nope=1")
        assert res.exit_code == 2 and "unknown parameter 'nope'" in res.output
        res = cli(PIPELINE, "--host", kfp.url, "--param", "novalue")
        assert res.exit_code == 2
        assert kfp.requests == []


def test_yaml_path_and_typed_params(tmp_path):
    spec = _spec()
    params = spec["root"]["inputDefinitions"]["parameters"]
    for name, d in params.items():
        raw = {"NUMBER_INTEGER": "7", "NUMBER_DOUBLE": "0.5", "BOOLEAN": "true",
               "STRING": "x", "LIST": "[1, 2]", "STRUCT": '{"a": 1}'}[d["parameterType"]]
        value = pipeline_params.typed({name: raw}, pipeline_params.types_of_spec(spec))[name]
        assert type(value).__name__ == {"NUMBER_INTEGER": "int", "NUMBER_DOUBLE": "float",
                                        "BOOLEAN": "bool", "STRING": "str", "LIST": "list",
                                        "STRUCT": "dict"}[d["parameterType"]]
    ints = [n for n, d in params.items() if d["parameterType"] == "NUMBER_INTEGER"]
    if ints:
        with pytest.raises(ValueError, match="is not an integer"):
            pipeline_params.typed({ints[0]: "1.5"}, pipeline_params.types_of_spec(spec))
    copy = tmp_path / "mine.yaml"
    copy.write_text(compiled_pipeline(PIPELINE)[0].read_text())
    assert compiled_pipeline(str(copy)) == (copy, spec["pipelineInfo"]["name"])


def test_default_version_name(monkeypatch):
    monkeypatch.setenv("CI_COMMIT_SHA", "a" * 40)
    assert submit.default_version_name() == "a" * 12
    digest = version_content.content_hash("x: 1\n")
    assert submit.default_version_name(digest) == "a" * 12 + "-" + digest[:10]
    monkeypatch.delenv("CI_COMMIT_SHA")
    name = submit.default_version_name()
    assert name.startswith("v") or len(name.split("-")[0]) == 12


def test_example_ci_workflow_uses_real_options():
    """docs/ci/github-actions.yaml: valid YAML whose kfp-gpu calls use existing options and
    parameters of the pipeline it runs."""
    import re

    wf = yaml.safe_load((REPO / "docs" / "ci" / "github-actions.yaml").read_text())
    script = "\n".join(s.get("run", "") for s in wf["jobs"]["run-pipeline"]["steps"])
    script = script.replace("\\\n", " ")
    commands = {"submit": submit_cli.submit_command, "doctor": doctor_cli.doctor_command}
    seen = set()
    for line in script.splitlines():
        m = re.search(r"kfp-gpu (submit|doctor)\b(.*)", line)
        if not m:
            continue
        seen.add(m.group(1))
        app = typer.Typer()
        app.command()(commands[m.group(1)])
        known = {o for p in typer.main.get_command(app).params for o in p.opts}
        for flag in re.findall(r"(--[a-z-]+)", m.group(2)):
            assert flag in known, f"{m.group(1)} has no option {flag}"
        for name in re.findall(r"--param (\w+)=", m.group(2)):
            assert name in _spec()["root"]["inputDefinitions"]["parameters"]
    assert seen == {"submit", "doctor"}


def test_multi_user_kfp_needs_a_namespace():
    with FakeKfp(multi_user=True) as kfp:
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1")
        assert res.exit_code == 2 and "multi-user" in res.output and not kfp.pipelines
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1", "--namespace", "team-a")
        assert res.exit_code == 0, res.output
        (p,) = kfp.pipelines.values()
        (e,) = kfp.experiments.values()
        assert p["namespace"] == "team-a" and e["namespace"] == "team-a"
        # Idempotent within the namespace, too.
        assert cli(PIPELINE, "--host", kfp.url, "--version", "v1", "-n", "team-a").exit_code == 0
        assert len(kfp.pipelines) == 1 and len(kfp.versions) == 2


def test_backend_too_old_for_task_config_passthroughs_is_refused_before_upload(monkeypatch):
    """resnet-horovod needs KFP backend >= 2.15.0 (taskConfigPassthroughs); healthz says
    2.14.3 -> nothing is uploaded and the message names the version."""
    with FakeKfp(tokens={"s3cret"}, tag_name="2.14.3") as kfp:
        monkeypatch.setenv(kfp_api.TOKEN_ENV, "s3cret")
        res = cli("resnet-horovod", "--host", kfp.url, "--experiment", "ci")
        assert res.exit_code != 0
        assert "older than 2.15.0" in res.output, res.output
        assert not kfp.pipelines
