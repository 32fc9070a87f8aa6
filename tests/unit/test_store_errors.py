"""Store errors by the exit-code rule (README "Exit codes"): a malformed ``s3://``/``gs://``
URI and a missing object are the input's (2, as a missing local file), a store endpoint
that does not answer is the environment's (3); one line each.

Against real servers, no mocks: moto's S3 server (tests/support/s3_server.py) and the GCS emulator
(tests/support/gcs_emulator.py), and a closed loopback port for an endpoint that does not answer.

- ``kfp-gpu run --local`` checks the form and, with one cheap request
  (:func:`kfp_gpu.inputs.storage.probe`), that an input exists, before any task starts: the
  real CLI in a process of its own.
- In a task (a run that skipped those checks: started from the KFP UI, or a store that
  changed meanwhile) the component's record carries the class
  (:func:`kfp_gpu.inputs.errors.record`): a real prep-text task under kfp.local, the
  records of the storage calls themselves, and ``kfp-gpu submit --wait`` reading such a
  record from the task pod's log (the KFP API and Kubernetes API doubles of tests/doubles).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kfp_gpu.catalog import params as catalog_params
from kfp_gpu.cli import errors as cli_errors
from kfp_gpu.cli import submit as submit_cli
from kfp_gpu.dsl import parameters as declared
from kfp_gpu.dsl import paths
from kfp_gpu.inputs import errors, storage, uris
from tests.doubles.k8s_api import FakeKube
from tests.doubles.kfp_api import FakeKfp
from tests.support import gcs_emulator, s3_server

REPO = Path(__file__).resolve().parents[2]
REVIEWS = b"review,sentiment\ngood film,positive\nbad film,negative\n"


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server with one bucket holding ``in/reviews.csv`` (the AWS variables point
    at it meanwhile); werkzeug's request log kept off the CLI output."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with s3_server.running() as (bucket, endpoint):
        import boto3

        boto3.client("s3", endpoint_url=endpoint).put_object(
            Bucket=bucket, Key="in/reviews.csv", Body=REVIEWS)
        yield bucket, endpoint


@pytest.fixture(scope="module")
def gcs():
    """The GCS emulator with one bucket holding ``in/reviews.csv``."""
    with gcs_emulator.running() as bucket:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage as gcs_storage

        client = gcs_storage.Client(project="test", credentials=AnonymousCredentials())
        client.bucket(bucket).blob("in/reviews.csv").upload_from_string(REVIEWS)
        yield bucket


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens (connection refused at once)."""
    return f"http://127.0.0.1:{s3_server.free_port()}"


def kfp_gpu(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real CLI in a process of its own (``python -m kfp_gpu``), this environment (the
    servers' variables) plus ``env``."""
    return subprocess.run([sys.executable, "-m", "kfp_gpu", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=120, check=False,
                          env={**os.environ, **(env or {})})


def one_line(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stdout + res.stderr
    return lines[0]


# ------------------------------------------------------------ run --local, before any task
def test_a_missing_s3_object_exits_2_before_any_task_as_a_missing_local_file(s3, tmp_path):
    bucket, endpoint = s3
    root = tmp_path / "root"
    res = kfp_gpu("run", "imdb-lstm", "--local", "--pipeline-root", str(root),
                  "-p", f"source=s3://{bucket}/in/missing.csv")
    assert res.returncode == 2
    assert one_line(res) == (f"error: parameter source: input not found: s3://{bucket}/in/"
                             f"missing.csv: no object or folder of that name at {endpoint} "
                             "(AWS_ENDPOINT_URL)")
    assert not root.exists()  # no task started: kfp.local never made the pipeline root
    local = kfp_gpu("run", "imdb-lstm", "--local", "--pipeline-root", str(root),
                    "-p", f"source={tmp_path / 'missing.csv'}")
    assert local.returncode == res.returncode == 2 and "no such file" in one_line(local)


def test_a_missing_s3_bucket_exits_2(s3):
    res = kfp_gpu("run", "imdb-lstm", "--local", "-p", "source=s3://no-such-bucket/r.csv")
    assert res.returncode == 2
    assert one_line(res).startswith("error: parameter source: input not found: "
                                    "s3://no-such-bucket/r.csv: ")


def test_an_s3_endpoint_that_does_not_answer_exits_3(s3):
    bucket, _ = s3
    dead = closed_port_url()
    res = kfp_gpu("run", "imdb-lstm", "--local", "-p", f"source=s3://{bucket}/in/reviews.csv",
                  env={"AWS_ENDPOINT_URL": dead})
    assert res.returncode == 3
    assert one_line(res) == (
        f"error: cannot connect: parameter source: s3://{bucket}/in/reviews.csv: the store "
        f"at {dead} (AWS_ENDPOINT_URL) does not answer (Could not connect to the endpoint "
        f'URL: "{dead}/{bucket}/in/reviews.csv")')


def test_a_missing_gcs_object_exits_2_and_a_dead_emulator_3(gcs):
    res = kfp_gpu("run", "imdb-lstm", "--local", "-p", f"source=gs://{gcs}/in/missing.csv")
    assert res.returncode == 2
    assert one_line(res).startswith(f"error: parameter source: input not found: gs://{gcs}/"
                                    "in/missing.csv: no object or folder of that name at "
                                    "http://127.0.0.1:")
    dead = closed_port_url()
    res = kfp_gpu("run", "imdb-lstm", "--local", "-p", f"source=gs://{gcs}/in/reviews.csv",
                  env={"STORAGE_EMULATOR_HOST": dead})
    assert res.returncode == 3
    assert one_line(res).startswith(f"error: cannot connect: parameter source: gs://{gcs}/in/"
                                    f"reviews.csv: the store at {dead} (STORAGE_EMULATOR_HOST) "
                                    "does not answer (")


@pytest.mark.parametrize("uri, form", [
    ("s3://", "names no bucket: accepted is s3://BUCKET/KEY"),
    ("gs:///x.csv", "names no bucket: accepted is gs://BUCKET/OBJECT"),
    ("s3://b", "names no object in bucket 'b': accepted is s3://BUCKET/KEY"),
    ("minio://b/x.csv",
     "is not a URI this reads: accepted is gs://BUCKET/OBJECT or s3://BUCKET/KEY"),
])
def test_a_malformed_uri_exits_2_naming_the_form_without_asking_the_store(uri, form):
    dead = closed_port_url()  # a store that does not answer: the form is refused first
    res = kfp_gpu("run", "imdb-lstm", "--local", "-p", f"source={uri}",
                  env={"AWS_ENDPOINT_URL": dead, "STORAGE_EMULATOR_HOST": dead})
    assert res.returncode == 2
    assert one_line(res) == f"error: parameter source: {uri!r} {form}"


def test_existing_objects_and_folders_pass_the_check(s3, gcs, tmp_path):
    bucket, _ = s3
    decl = catalog_params.declared("imdb-lstm")
    paths.check_remote_inputs(decl, {"source": f"s3://{bucket}/in/reviews.csv"})
    paths.check_remote_inputs(decl, {"source": f"gs://{gcs}/in/reviews.csv"})
    fe = catalog_params.declared("fractional-eval")  # a folder (a prefix) counts
    paths.check_remote_inputs(fe, {"model_uri": f"s3://{bucket}/in",
                                      "test_data_uri": f"gs://{gcs}/in/"})
    with pytest.raises(FileNotFoundError, match="parameter model_uri: input not found"):
        paths.check_remote_inputs(fe, {"model_uri": f"s3://{bucket}/out"})
    # not an input: a work_dir need not exist yet; minio:// is read by KFP's launcher
    paths.check_remote_inputs(catalog_params.declared("resnet-horovod"),
                                 {"work_dir": f"s3://{bucket}/new"})
    paths.check_remote_inputs(fe, {"model_uri": "minio://mlpipeline/v2/artifacts/m"})


def test_a_folder_may_be_a_bucket_root_an_object_may_not():
    declared.validate(catalog_params.declared("resnet-horovod"), {"work_dir": "s3://scratch"})
    declared.validate(catalog_params.declared("imdb-lstm"), {"checkpoint_dir": "gs://ckpt/"})
    with pytest.raises(errors.MalformedUri, match="names no object"):
        declared.validate(catalog_params.declared("resnet-horovod"), {"source": "s3://scratch"})
    assert uris.check_uri("s3://b/a/c.csv") == ("s3", "b", "a/c.csv")
    assert uris.check_uri("minio://b/k", ("minio",)) == ("minio", "b", "k")


# ------------------------------------------------------------ in the task: its record
def _record_line(uri: str, env: dict | None = None) -> str:
    """The record line :func:`errors.reported` writes when reading ``uri`` fails (with the
    environment variables ``env`` set meanwhile), as a component writes it (prep_text reads
    its source with ``storage.local_copy``)."""
    err = io.StringIO()
    try:
        with s3_server.patched_env(env or {}), contextlib.redirect_stderr(err), \
                errors.reported(input=uri), storage.local_copy(uri):
            pass
    except Exception:  # noqa: BLE001, S110 - whatever the store raised: its record is read
        pass
    else:
        raise AssertionError(f"reading {uri} succeeded")
    (line,) = err.getvalue().splitlines()
    return line


def _record_of(uri: str, env: dict | None = None) -> dict:
    return errors.record_of(_record_line(uri, env))


def dead_endpoint() -> dict:
    """AWS variables of an S3 endpoint that does not answer (one attempt: no retries)."""
    return {"AWS_ENDPOINT_URL": closed_port_url(), "AWS_MAX_ATTEMPTS": "1"}


def _status(rec: dict) -> int:
    return cli_errors.task_status(rec["input_error"], rec["environment"])


def test_records_of_real_store_failures_carry_their_class(s3, gcs):
    bucket, _ = s3
    for uri in (f"s3://{bucket}/in/missing.csv", "s3://no-such-bucket/x.csv",
                f"gs://{gcs}/in/missing.csv"):
        rec = _record_of(uri)
        assert (rec["type"], rec["input"], _status(rec)) == ("FileNotFoundError", uri, 2)
        assert rec["message"] == f"input not found: {uri}"
    rec = _record_of("s3://")
    assert (rec["type"], _status(rec)) == ("MalformedUri", 2)
    assert rec["message"] == "'s3://' names no bucket: accepted is s3://BUCKET/KEY"
    rec = _record_of(f"s3://{bucket}/in/reviews.csv", dead_endpoint())
    # botocore.exceptions.EndpointConnectionError, raised by aiobotocore under s3fs
    assert (rec["type"], rec["input"], _status(rec)) == (
        "EndpointConnectionError", f"s3://{bucket}/in/reviews.csv", 3)
    assert rec["message"].startswith("Could not connect to the endpoint URL: ")


def test_a_gcs_retry_that_gave_up_on_a_connection_is_the_environment_s():
    """google-cloud-storage retries a refused connection for 120 s, then raises
    ``google.api_core.exceptions.RetryError`` over the requests ``ConnectionError``; the
    refused connection here is a real one."""
    import requests
    from google.api_core.exceptions import RetryError

    try:
        try:
            requests.get(closed_port_url(), timeout=5)
        except requests.ConnectionError as cause:
            raise RetryError("Timeout of 120.0s exceeded", cause) from cause
    except RetryError as e:
        assert errors.is_environment(e) and not errors.is_input(e)
        assert cli_errors.classify(e)[0] == 3
    try:  # the same wrapper over something else stays the job's
        raise RetryError("Timeout of 120.0s exceeded", None) from KeyError("x")
    except RetryError as e:
        assert not errors.is_environment(e) and cli_errors.classify(e)[0] == 1


def test_in_process_and_in_a_record_the_same_exception_gets_the_same_status(s3):
    bucket, _ = s3
    for uri, env in ((f"s3://{bucket}/in/missing.csv", {}), ("s3://", {}),
                     (f"s3://{bucket}/in/reviews.csv", dead_endpoint())):
        with s3_server.patched_env(env):
            try:
                with storage.local_copy(uri):
                    pass
            except Exception as e:  # noqa: BLE001 - what a command would let through
                in_process = cli_errors.classify(e)[0]
                rec = errors.record_of(errors.record(e, uri))
        assert in_process == _status(rec), uri


@pytest.mark.timeout(240)
def test_a_real_task_records_a_missing_object_and_a_dead_endpoint(s3, tmp_path):
    """prep-text under kfp.local (its own process) with a source the CLI's check would have
    refused: the run ends in TaskFailed carrying the class of the task's record."""
    from kfp_gpu.local import run as local_run

    bucket, _ = s3
    cases = ((f"s3://{bucket}/in/missing.csv", {}, 2),
             (f"s3://{bucket}/in/reviews.csv", dead_endpoint(), 3))
    for i, (uri, env, code) in enumerate(cases):
        with s3_server.patched_env(env), pytest.raises(local_run.TaskFailed) as failed:
            local_run.run("imdb-lstm", {"source": uri}, pipeline_root=str(tmp_path / str(i)),
                          check_inputs=False)
        e = failed.value
        assert e.task == "prep-text" and e.input == uri, e.lines()
        assert cli_errors.task_status(e.input_error, e.environment) == code, e.lines()


# ------------------------------------------------------------ submit: the task's record
def _kubeconfig(tmp_path, kube) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": kube.host}}],
        "users": [{"name": "me", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}]}))
    return str(path)


def _pods_when_the_run_starts(kfp, kube, task: str, lines: list[str]) -> threading.Thread:
    """Make ``task``'s pod in ``kubeflow`` once the run exists, as KFP's driver names,
    labels and annotates it, with ``lines`` as its log."""
    def make():
        for _ in range(400):
            if kfp.runs:
                break
            threading.Event().wait(0.01)
        (run_id,) = kfp.runs
        pod = kfp.pod_of(run_id, task)
        kube.create_pod("kubeflow", pod, {"pipeline/runid": run_id}, container="main")
        kube.objects[("pods", "kubeflow", pod)]["metadata"]["annotations"] = {
            "workflows.argoproj.io/node-id": kfp.node_of(run_id, task)}
        for line in lines:
            kube.append_log("kubeflow", pod, line)

    t = threading.Thread(target=make, daemon=True)
    t.start()
    return t


@pytest.mark.usefixtures("kfp_client_env")
def test_submit_wait_exits_by_the_class_of_the_tasks_store_error(s3, tmp_path):
    bucket, _ = s3
    missing, there = f"s3://{bucket}/in/missing.csv", f"s3://{bucket}/in/reviews.csv"
    app = typer.Typer()
    app.command()(submit_cli.submit_command)
    for rec, code, tail in ((_record_line(missing), 2, " (input error)"),
                            (_record_line(there, dead_endpoint()), 3, " (unreachable)")):
        with FakeKfp(script=[("RUNNING", 0.3), ("FAILED", 0)],
                     failed_task="prep-text") as kfp, FakeKube() as kube:
            maker = _pods_when_the_run_starts(kfp, kube, "prep-text",
                                              ["prep: reading", rec, "Traceback ..."])
            res = CliRunner().invoke(app, [
                "imdb-lstm", "--host", kfp.url, "--version", "v1", "--wait", "--poll", "0.05",
                "-p", f"source={missing}", "--kubeconfig", _kubeconfig(tmp_path, kube)])
            maker.join(5)
        assert res.exit_code == code, res.output
        (line,) = [ln for ln in res.output.splitlines() if ln.startswith("task ")]
        message = errors.record_of(rec)["message"]
        assert line.startswith(f"task prep-text failed: {message}") and line.endswith(tail)


@pytest.mark.usefixtures("kfp_client_env")
def test_submit_refuses_a_malformed_uri_before_uploading_anything():
    app = typer.Typer()
    app.command()(submit_cli.submit_command)
    with FakeKfp() as kfp:
        res = CliRunner().invoke(app, ["imdb-lstm", "--host", kfp.url, "-p", "source=gs:///x"])
        assert res.exit_code == 2, res.output
        assert res.output.strip() == ("error: parameter source: 'gs:///x' names no bucket: "
                                      "accepted is gs://BUCKET/OBJECT")
        assert not kfp.pipelines and not kfp.runs
