"""What ``kfp-gpu submit`` tells about a finished run, and which pipeline version it runs.

- The failure summary of the recorded real KFP 2.17.0 FAILED run (api/26 of the data
  folder's ``kfp-2.17.0``): the failed component task ``prep-text`` with the error its
  component recorded in the pod log, never the Argo/KFP nodes around it; the log read
  through an injected reader and through a real-HTTP Kubernetes API double
  (tests/doubles/k8s_api.py: pods listed by label, ``pods/<name>/log``).
- The success summary: output URIs and metrics from the :mod:`kfp_gpu.task_outputs` record,
  whose line a component writes under kfp.local with the artifacts' real URIs.
- Versions follow content: same content reused, other content refused (exit 2) or
  replaced with ``--replace``; ``--no-cache`` uploads a spec with every task's caching off.
"""

# No ``from __future__ import annotations``: kfp reads the component's annotations as types.
import copy
import json
import time
from types import SimpleNamespace

import pytest
import typer
import yaml
from kfp import dsl, local
from kfp.dsl import Dataset, Metrics, Model, Output
from typer.testing import CliRunner

from kfp_gpu import task_outputs
from kfp_gpu.cli import submit as submit_cli
from kfp_gpu.cluster import run_report, run_tasks, submit, task_logs, version_content
from kfp_gpu.compiler.compile import compiled_pipeline
from kfp_gpu.inputs import datadir, errors
from tests.doubles.k8s_api import FakeKube
from tests.doubles.kfp_api import FakeKfp

PIPELINE = "imdb-lstm"
RECORDED_FAILED_RUN = "kfp-2.17.0/api/26-get_run-real-FAILED-imdb-keras.json"
#: fractional-eval whose plan-shards driver failed (a get_run answer: request, response).
RECORDED_DRIVER_FAILED = "kfp-2.17.0/api/24-get_run-after-45s.json"
#: resnet-horovod terminated mid-MPIJob, prep-images served from the cache.
RECORDED_CACHED_RUN = "kfp-2.17.0/api/27-get_run-real-terminated-resnet.json"
#: What a KFP/Argo run shows beside its component tasks (the recorded body's internals).
INTERNALS = ("root", "root-driver", "executor", "-driver")


pytestmark = pytest.mark.usefixtures("kfp_client_env")


def cli(*args: str):
    app = typer.Typer()
    app.command()(submit_cli.submit_command)
    return CliRunner().invoke(app, list(args))


def _docs(name: str = PIPELINE) -> list:
    return list(yaml.safe_load_all(compiled_pipeline(name)[0].read_text()))


def _failed_body() -> dict:
    return json.loads(datadir.find(RECORDED_FAILED_RUN).read_text())


def _recorded(relative: str) -> dict:
    """A recorded get_run body (api/24 holds it under ``response.body``)."""
    rec = json.loads(datadir.find(relative).read_text())
    return rec["response"]["body"] if "response" in rec else rec


def _workflow_of(body: dict) -> str:
    return _row(body, "root")["child_tasks"][0]["pod_name"].rsplit("-", 1)[0]


def _glog(severity: str, where: str, message: str) -> str:
    """A line as KFP's driver and launcher log it (github.com/golang/glog's header:
    ``Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg``)."""
    return f"{severity}1127 19:39:01.512345      18 {where}] {message}"


def _launcher_logged(executor_output: dict) -> list[str]:
    """What KFP 2.17's launcher adds to the pod's log after the component exited 0:
    ``glog.Infof("ExecutorOutput: %s", prettyPrint(...))`` of the SDK's executor output file
    (prettyPrint: Go's json.Indent with two spaces; kubeflow/pipelines
    backend/src/v2/component/launcher_v2.go ``getExecutorOutputFile``), then its publish."""
    return [_glog("I", "launcher_v2.go:1230",
                  "ExecutorOutput: " + json.dumps(executor_output, indent=2)),
            _glog("I", "launcher_v2.go:206", "publish success.")]


#: What follows a component that exited 1 in its pod's log: KFP's launcher publishes the
#: failed execution and exits through glog.Exit (launcher-v2 main.go), then Argo's
#: executor logs the sub-process and its cobra error (a real 2.x pod log's tail).
FAILED_TAIL = [_glog("I", "launcher_v2.go:206", "publish success."),
               _glog("I", "client.go:752", "Attempting to update DAG state"),
               _glog("F", "main.go:58", "failed to execute component: exit status 1"),
               ('time="2026-11-27T19:51:02.490Z" level=info msg="sub-process exited" '
                'argo=true error="<nil>"'),
               "Error: exit status 1"]


def _sdk_output(uris: dict[str, str], metadata: dict | None = None,
                values: dict | None = None) -> dict:
    """An executor output file as the kfp SDK writes it (kfp/dsl/executor.py
    ``write_executor_output``: ``artifacts`` name -> ``{artifacts: [{name, uri,
    metadata}]}``, ``parameterValues``); its shape is checked against a real one in
    test_the_launchers_executor_output_of_a_kfp_local_task_reads_back."""
    out: dict = {"artifacts": {n: {"artifacts": [{"name": n, "uri": u,
                                                   "metadata": (metadata or {}).get(n, {})}]}
                               for n, u in uris.items()}}
    if values:
        out["parameterValues"] = values
    return out


def _row(body: dict, name: str) -> dict:
    return next(t for t in body["run_details"]["task_details"] if t["display_name"] == name)


def _reader(logs: dict[str, str]):
    calls = []

    def read(run_id: str, node_id: str) -> str:
        calls.append((run_id, node_id))
        if node_id not in logs:
            raise task_logs.LogUnavailable(f"pod {node_id} not found")
        return logs[node_id]
    read.calls = calls
    return read


def _no_internals(lines: list[str], body: dict) -> None:
    workflow = _workflow_of(body)
    for line in lines:
        head = line.split(":", 1)[0]
        assert not any(f"task {n}" in head for n in ("root", "executor")), line
        assert "-driver" not in head and workflow not in head, line


# ---------------------------------------------------------------- failure summary
def test_failure_summary_of_the_recorded_run_names_prep_text_and_its_error():
    body = _failed_body()
    (node,) = [c["pod_name"] for c in _row(body, "prep-text")["child_tasks"]]
    exc = errors.MissingColumn("no column 'review' in the table; columns: text, label",
                               input="minio://mlpipeline/imdb/train.csv")
    log = "\n".join(["INFO prep: reading", errors.record(exc),
                     "Traceback (most recent call last):", "  ...", f"MissingColumn: {exc}", ""])
    read = _reader({node: log})
    url = run_report.ui_link("http://kfp.example", body["run_id"])
    rep = run_report.failure_report(body, _docs(), read, url)
    assert rep.lines == [f"task prep-text failed: {exc} (input: {exc.input}) (input error)"]
    assert rep.code == 2  # every failed task refused its input (kfp_gpu/cli/errors.py USAGE)
    assert read.calls == [(body["run_id"], node)]
    _no_internals(rep.lines, body)


def test_failed_tasks_without_the_spec_drop_the_internals_by_the_body_rule():
    """The recorded body alone: root, root-driver, executor, *-driver and the workflow
    node (imdb-lstm-xxxxx) are FAILED there too, and none is a component task."""
    body = _failed_body()
    failed_rows = {t["display_name"] for t in body["run_details"]["task_details"]
                   if t.get("state") == "FAILED"}
    assert {"root", "executor", "prep-text"} <= failed_rows and len(failed_rows) >= 4
    assert [t.name for t in run_tasks.failed_tasks(body)] == ["prep-text"]
    assert [t.name for t in run_tasks.failed_tasks(body, _docs())] == ["prep-text"]
    # A spec of another pipeline names none of these tasks: the body's rule applies.
    assert [t.name for t in run_tasks.failed_tasks(body, _docs("fractional-eval"))] \
        == ["prep-text"]


def test_failure_without_a_record_shows_the_last_log_line_and_exits_1():
    body = _failed_body()
    (node,) = [c["pod_name"] for c in _row(body, "prep-text")["child_tasks"]]
    read = _reader({node: "starting\nKilled: out of memory (cgroup)\n\n"})
    rep = run_report.failure_report(body, _docs(), read, "U")
    assert rep.lines == ["task prep-text failed: Killed: out of memory (cgroup)"]
    assert rep.code == 1


def test_an_unreadable_log_gives_the_ui_link_and_why():
    body = _failed_body()
    url = run_report.ui_link("http://ui.example/", body["run_id"])
    assert url == f"http://ui.example/#/runs/details/{body['run_id']}"
    rep = run_report.failure_report(body, _docs(), _reader({}), url)
    (node,) = [c["pod_name"] for c in _row(body, "prep-text")["child_tasks"]]
    assert rep.lines == [f"task prep-text failed: see {url} (pod {node} not found)"]
    assert rep.code == 1


def test_a_failed_driver_names_its_component_task_and_reads_the_drivers_own_pod():
    """A driver's ``child_tasks`` is its task's node, not its pod: the driver's own node
    id is Argo's hash of ``<workflow>.root.<task>-driver``, which the recorded body lists
    as a child of ``root``."""
    body = _failed_body()
    _row(body, "prep-text")["state"] = "SKIPPED"
    _row(body, "prep-text-driver")["state"] = "FAILED"
    wf = _workflow_of(body)
    own = run_tasks.argo_node_id(wf, f"{wf}.root.prep-text-driver")
    assert own in [c["pod_name"] for c in _row(body, "root")["child_tasks"]]
    assert [c["pod_name"] for c in _row(body, "prep-text-driver")["child_tasks"]] \
        == [run_tasks.argo_node_id(wf, f"{wf}.root.prep-text")]
    read = _reader({own: "\n".join([
        _glog("I", "main.go:119", "Setting log level to: '1'"),
        _glog("F", "main.go:127", "KFP driver: failed to resolve inputs: parent DAG "
              "input parameter 'source' not found")])})
    rep = run_report.failure_report(body, _docs(), read, "U")
    assert rep.lines == [("task prep-text failed before it ran (KFP driver): KFP driver: "
                         "failed to resolve inputs: parent DAG input parameter 'source' "
                         "not found")]
    assert rep.code == 1
    assert read.calls == [(body["run_id"], own)]


def test_the_recorded_failed_driver_of_fractional_eval_is_read_from_its_own_pod():
    """api/24: plan-shards' driver FAILED; its pod is the node ``importer-2`` (its
    dependency) lists, and the importers that succeeded are never read."""
    body = _recorded(RECORDED_DRIVER_FAILED)
    wf = _workflow_of(body)
    own = run_tasks.argo_node_id(wf, f"{wf}.root.plan-shards-driver")
    assert own in [c["pod_name"] for c in _row(body, "importer-2")["child_tasks"]]
    read = _reader({own: _glog("F", "main.go:127", "KFP driver: no such artifact")})
    rep = run_report.failure_report(body, _docs("fractional-eval"), read, "U")
    assert rep.lines == [("task plan-shards failed before it ran (KFP driver): KFP driver: "
                          "no such artifact")]
    assert read.calls == [(body["run_id"], own)]


def _refusal_log() -> tuple[str, list[str]]:
    """resnet-horovod's refusal of an empty work_dir on a cluster without a PVC, raised by
    the real check, and its pod log: the traceback kfp's executor lets through (no record:
    it fails before the component's body could write one), then KFP's and Argo's tail."""
    import traceback

    from kfp_gpu.components.train_resnet_horovod import places

    model = "minio://mlpipeline/v2/artifacts/resnet-horovod/r/train-resnet-horovod/model"
    with pytest.raises(ValueError) as caught:
        places.resolve_work_dir("", model, [], "resnet-r-train")
    trace = "".join(traceback.format_exception(caught.value)).splitlines()
    assert trace[-1] == f"ValueError: {caught.value}"  # what Python prints last
    return f"ValueError: {caught.value}", ["INFO kfp_gpu.mpi: cluster execution", *trace,
                                           *FAILED_TAIL]


def test_a_task_that_failed_before_its_record_shows_the_components_own_line():
    """The recorded resnet-horovod run (api/27): its train task's log ends with KFP's and
    Argo's lines (``Error: exit status 1``); the line shown is the component's."""
    body = _recorded(RECORDED_CACHED_RUN)
    (node,) = [c["pod_name"] for c in _row(body, "train-resnet-horovod")["child_tasks"]]
    line, log = _refusal_log()
    read = _reader({node: "\n".join(log)})
    rep = run_report.failure_report(body, _docs("resnet-horovod"), read, "U")
    assert rep.lines == [f"task train-resnet-horovod failed: {line}"]
    assert rep.code == 1  # no record: whether it refused its input is unknown
    assert read.calls == [(body["run_id"], node)]


@pytest.mark.parametrize(("own", "expected"), [
    # the CLI's one line (kfp_gpu/cli/errors.py) wins over what came before it
    (["Traceback (most recent call last):", "KeyError: 'x'", "error: no such column: text"],
     "error: no such column: text"),
    # a component that printed and exited 1 without an exception
    (["rows: 300", "stopping: 2 classes expected"], "stopping: 2 classes expected"),
    # nothing of the component's: the launcher's own failure (upload after success)
    ([], "failed to execute component: failed to upload output artifacts: i/o timeout"),
    # nothing at all but the bare status
    ([], "failed to execute component: exit status 1"),
])
def test_the_error_line_passes_over_kfps_and_argos_lines(own, expected):
    tail = list(FAILED_TAIL)
    if "upload" in expected:
        tail = [_glog("W", "launcher_v2.go:845", "Failed to upload output artifacts"),
                _glog("F", "main.go:58", expected), "Error: exit status 1"]
    assert task_logs.error_line_of("\n".join([*own, *tail])) == expected
    assert task_logs.message_of("\n".join([*own, *tail])) == (expected, None)


def test_failure_summary_reads_the_pod_log_through_the_kubernetes_api():
    """The API's pod_name is the Argo node id; the pod (named the POD_NAMES=v2 way, as the
    recorded pods are) is found by the run-id label and the node-id annotation, and its
    ``main`` container's log is read over HTTP."""
    body = _failed_body()
    (node,) = [c["pod_name"] for c in _row(body, "prep-text")["child_tasks"]]
    workflow, hash_ = node.rsplit("-", 1)
    pod = f"{workflow}-system-container-impl-{hash_}"
    exc = errors.EmptyInput("the train split has no rows", input="train.csv")
    with FakeKube() as kube:
        kube.create_pod("kubeflow", pod, {"pipeline/runid": body["run_id"],
                                          "workflows.argoproj.io/workflow": workflow},
                        container="main")
        kube.objects[("pods", "kubeflow", pod)]["metadata"]["annotations"] = {
            "workflows.argoproj.io/node-id": node}
        kube.create_pod("kubeflow", f"{workflow}-system-container-impl-1",
                        {"pipeline/runid": "another-run"}, container="main")
        for line in ("reading train.csv", errors.record(exc), "Traceback ..."):
            kube.append_log("kubeflow", pod, line)
        read = task_logs.kube_log_reader(kube.api_client(), "kubeflow")
        rep = run_report.failure_report(body, _docs(), read, "U")
        logs = [r for r in kube.requests if r.path.endswith("/log")]
    assert rep.lines == [f"task prep-text failed: {exc} (input: train.csv) (input error)"]
    assert [r.path for r in logs] == [f"/api/v1/namespaces/kubeflow/pods/{pod}/log"]
    assert logs[0].query.get("container") == ["main"]


def test_a_garbage_collected_pod_reads_as_not_found_through_the_kubernetes_api():
    body = _failed_body()
    (node,) = [c["pod_name"] for c in _row(body, "prep-text")["child_tasks"]]
    with FakeKube() as kube:
        read = task_logs.kube_log_reader(kube.api_client(), "team-a")
        rep = run_report.failure_report(body, _docs(), read, "U")
    assert rep.lines == [(f"task prep-text failed: see U (pod {node} not found in namespace "
                         "team-a (garbage-collected?))")]


# ---------------------------------------------------------------- success summary
def _succeeded_body() -> dict:
    """The recorded run's body as it reads once every component task SUCCEEDED."""
    body = copy.deepcopy(_failed_body())
    body["state"] = "SUCCEEDED"
    for t in body["run_details"]["task_details"]:
        t["state"] = "SUCCEEDED"
    _row(body, "evaluate-classifier").setdefault("child_tasks", [
        {"pod_name": _row(body, "root")["child_tasks"][0]["pod_name"].rsplit("-", 1)[0]
         + "-1234567890"}])
    return body


def _artifacts(root: str):
    model = Model(name="model", uri=f"{root}/train-text-classifier/model")
    metrics = Metrics(name="metrics", uri=f"{root}/train-text-classifier/metrics")
    metrics.log_metric("accuracy", 0.875)
    metrics.log_metric("seconds_per_epoch", 12.5)
    ev = Metrics(name="metrics", uri=f"{root}/evaluate-classifier/metrics")
    ev.log_metric("auc", 0.93)
    return model, metrics, ev


def test_success_summary_lists_each_tasks_artifacts_and_metrics():
    body = _succeeded_body()
    model, metrics, ev = _artifacts("minio://mlpipeline/v2/artifacts/imdb-lstm/r")
    train_node = _row(body, "train-text-classifier")["child_tasks"][0]["pod_name"]
    eval_node = _row(body, "evaluate-classifier")["child_tasks"][0]["pod_name"]
    logs = {train_node: "\n".join(["epoch 1 done", task_outputs.record(
                {"model": model, "metrics": metrics}), *_launcher_logged(_sdk_output(
                    {"model": model.uri, "metrics": metrics.uri}))]),
            eval_node: task_outputs.record({"metrics": ev}, {"passed": True})}
    # prep_text writes no outputs record: its outputs are what KFP's launcher logged, the
    # ones its component declares (not the launcher's own log artifact).
    declared = run_tasks.spec_tasks(_docs())["prep-text"]["outputs"]
    assert {"train_data", "test_data"} <= set(declared)
    uris = {name: f"minio://mlpipeline/v2/artifacts/imdb-lstm/r/prep-text/{name}"
            for name in declared}
    (prep_node,) = [c["pod_name"] for c in _row(body, "prep-text")["child_tasks"]]
    logs[prep_node] = "\n".join(["prep: 300 rows", *_launcher_logged(_sdk_output(
        {**uris, "executor-logs": "minio://mlpipeline/logs/prep-text"},
        {"train_data": {"rows": 300}}))])
    rep = run_report.outputs_report(body, _docs(), _reader(logs), "U")
    assert rep.code == 0
    assert rep.lines == [
        "task prep-text outputs:", *(f"  {name}: {uri}" for name, uri in uris.items()),
        "task train-text-classifier (train-lstm) outputs:",
        f"  model: {model.uri}", f"  metrics: {metrics.uri}",
        "  metrics: accuracy=0.875, seconds_per_epoch=12.5",
        "task evaluate-classifier (evaluate) outputs:",
        f"  metrics: {ev.uri}", "  metrics: auc=0.93", "  passed: True"]


def test_the_launchers_executor_output_of_a_kfp_local_task_reads_back(tmp_path):
    """The executor output file kfp's own executor writes (kfp.local runs it as the
    launcher does in a pod), logged the way KFP's launcher logs it, reads back as the
    task's URIs, its Metrics output's metrics and its returned value."""
    local.init(runner=local.SubprocessRunner(use_venv=False),
               pipeline_root=str(tmp_path / "root"), raise_on_error=True)
    task = _split()
    (written,) = (tmp_path / "root").rglob("executor_output.json")
    log = "\n".join(["rows: 3", *_launcher_logged(json.loads(written.read_text()))])
    declared = {"data": "system.Dataset", "metrics": "system.Metrics"}
    rec = task_logs.outputs_of(log, declared)
    assert rec["artifacts"] == {"data": task.outputs["data"].uri,
                                "metrics": task.outputs["metrics"].uri}
    assert rec["metrics"] == dict(task.outputs["metrics"].metadata) == {"accuracy": 0.75}
    assert rec["values"] == {"Output": task.outputs["Output"]} == {"Output": 3}
    # the Dataset's metadata is no metric; without the spec nothing is called one
    assert task_logs.outputs_of(log)["metrics"] == {}
    assert task_logs.outputs_of(log[:log.rfind("}")]) is None  # cut: nothing read


@dsl.component(base_image="python:3.11")  # the image is unused by the SubprocessRunner
def _split(data: Output[Dataset], metrics: Output[Metrics]) -> int:
    with open(data.path, "w") as f:
        f.write("a\nb\nc\n")
    data.metadata["rows"] = 3
    metrics.log_metric("accuracy", 0.75)
    return 3


def test_a_cached_task_of_the_recorded_run_is_told_by_its_skipped_step():
    """api/27: prep-images was served from the cache: SUCCEEDED, its ``executor`` SKIPPED,
    both at the same second. No pod ran, so no log is read for it."""
    body = _recorded(RECORDED_CACHED_RUN)
    docs = _docs("resnet-horovod")
    (task,) = run_tasks.succeeded_tasks(body, docs)
    assert (task.name, task.cached) == ("prep-images", True)
    (skipped,) = [t for t in body["run_details"]["task_details"]
                  if t.get("state") == "SKIPPED"]
    assert skipped["display_name"] == "executor"
    assert [c["pod_name"] for c in _row(body, "prep-images")["child_tasks"]] == [
        run_tasks.argo_node_id(_workflow_of(body), f"{_workflow_of(body)}.root.prep-images"
                                ".executor")]  # the skipped step is prep-images' own
    read = _reader({})
    rep = run_report.outputs_report(body, docs, read, "U")
    assert rep.lines == [run_report.cached_line(task, "U")]
    assert "served from KFP's cache" in rep.lines[0] and "U" in rep.lines[0]
    assert read.calls == []
    # A task that took seconds is no cached one, nor one without a skipped step.
    slow = copy.deepcopy(body)
    _row(slow, "prep-images")["end_time"] = _row(slow, "train-resnet-horovod")["end_time"]
    assert [t.cached for t in run_tasks.succeeded_tasks(slow, docs)] == [False]
    ran = copy.deepcopy(body)
    for t in ran["run_details"]["task_details"]:
        if t.get("state") == "SKIPPED":
            t["state"] = "SUCCEEDED"
    assert [t.cached for t in run_tasks.succeeded_tasks(ran, docs)] == [False]


def test_success_without_a_kubeconfig_points_at_the_ui():
    rep = run_report.outputs_report(_succeeded_body(), _docs(), None, "http://u/#/runs/x",
                                    "no kubeconfig to read the task logs")
    assert rep.lines == [("outputs and metrics: shown in the KFP UI at http://u/#/runs/x "
                         "(no kubeconfig to read the task logs)")]


@dsl.component(base_image="python:3.11")  # the image is unused by the SubprocessRunner
def _produce(model: Output[Model], metrics: Output[Metrics]):
    from kfp_gpu import task_outputs

    with open(model.path, "w") as f:
        f.write("weights")
    metrics.log_metric("accuracy", 0.75)
    task_outputs.emit({"model": model, "metrics": metrics}, {"passed": True})


def test_the_outputs_record_is_in_a_kfp_local_task_log_with_the_real_uris(tmp_path, capfd):
    """kfp.local runs the component body in a task process (as the launcher does in a pod):
    the record line reaches the task's log with the URIs KFP gave the artifacts."""
    local.init(runner=local.SubprocessRunner(use_venv=False),
               pipeline_root=str(tmp_path / "root"), raise_on_error=True)
    task = _produce()
    out = capfd.readouterr()
    recs = [r for r in map(task_outputs.record_of, (out.out + out.err).splitlines()) if r]
    assert len(recs) == 1
    assert recs[0]["artifacts"] == {"model": task.outputs["model"].uri,
                                    "metrics": task.outputs["metrics"].uri}
    assert str(tmp_path / "root") in recs[0]["artifacts"]["model"]
    assert recs[0]["metrics"] == dict(task.outputs["metrics"].metadata) == {"accuracy": 0.75}
    assert recs[0]["values"] == {"passed": True}


def test_outputs_record_round_trip_and_garbled_lines():
    model, metrics, ev = _artifacts("s3://b")
    line = task_outputs.record({"model": model, "metrics": metrics, "ev": ev, "none": None})
    rec = task_outputs.record_of("I1127 12:00 " + line)
    assert rec["artifacts"] == {"model": "s3://b/train-text-classifier/model",
                                "metrics": metrics.uri, "ev": ev.uri}
    # two Metrics outputs: keys are prefixed with the output's name
    assert rec["metrics"] == {"metrics.accuracy": 0.875, "metrics.seconds_per_epoch": 12.5,
                              "ev.auc": 0.93}
    assert task_outputs.record_of(line[:-5]) is None
    assert task_outputs.record_of("plain line") is None


# ---------------------------------------------------------------- versions and cache
def _uploads(kfp) -> list:
    return [r for r in kfp.requests if r["path"].endswith(("/upload", "/upload_version"))]


def test_same_content_under_the_same_version_name_is_reused():
    with FakeKfp() as kfp:
        assert cli(PIPELINE, "--host", kfp.url, "--version", "v1").exit_code == 0
        again = cli(PIPELINE, "--host", kfp.url, "--version", "v1")
        assert again.exit_code == 0, again.output
        assert "pipeline version v1 already uploaded with the same content" in again.output
        assert "reusing it" in again.output
        assert len(_uploads(kfp)) == 2 and len(kfp.runs) == 2


def test_other_content_under_a_taken_version_name_is_refused_with_exit_2(tmp_path):
    docs = _docs()
    with FakeKfp() as kfp:
        assert cli(PIPELINE, "--host", kfp.url, "--version", "v1").exit_code == 0
        changed = copy.deepcopy(docs)
        params = changed[0]["root"]["inputDefinitions"]["parameters"]
        name = next(n for n, p in params.items() if p["parameterType"] == "NUMBER_INTEGER")
        params[name]["defaultValue"] = int(params[name].get("defaultValue", 0)) + 1
        recompiled = tmp_path / "imdb_lstm.yaml"
        recompiled.write_text(yaml.safe_dump_all(changed, sort_keys=False))
        res = cli(str(recompiled), "--host", kfp.url, "--version", "v1")
        assert res.exit_code == 2, res.output
        (line,) = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
        assert "pipeline version v1 of imdb-lstm holds other content" in line
        assert "another --version" in line and "--replace" in line
        assert len(_uploads(kfp)) == 2 and len(kfp.runs) == 1  # nothing uploaded or run


class _Client:
    """A kfp.Client stand-in for ensure_pipeline_version: one pipeline, one version."""

    def __init__(self, version):
        self.version, self.calls = version, []

    def list_pipelines(self, **kw):
        return SimpleNamespace(pipelines=[SimpleNamespace(pipeline_id="p1")])

    def list_pipeline_versions(self, pipeline_id, **kw):
        return SimpleNamespace(pipeline_versions=[self.version])

    def get_pipeline_version(self, pipeline_id, version_id):
        self.calls.append(("get", version_id))
        return self.version

    def delete_pipeline_version(self, pipeline_id, version_id):
        self.calls.append(("delete", version_id))

    def upload_pipeline_version(self, path, name, pipeline_id, description=None):
        self.calls.append(("upload", name, description))
        return SimpleNamespace(pipeline_version_id="new")


def test_replace_deletes_the_clashing_version_and_uploads_anew(tmp_path):
    path = compiled_pipeline(PIPELINE)[0]
    text = path.read_text()
    digest = version_content.content_hash(text)
    old = SimpleNamespace(pipeline_version_id="old", pipeline_spec=None,
                          description=f"kfp-gpu 0.1.0; {version_content.CONTENT_MARK}{'0' * 64}")
    client = _Client(old)
    with pytest.raises(submit.VersionClash):
        submit.ensure_pipeline_version(client, path, PIPELINE, "v1", echo=lambda s: None)
    assert client.calls == []
    said = []
    ids = submit.ensure_pipeline_version(client, path, PIPELINE, "v1", said.append,
                                         replace=True)
    assert ids == ("p1", "new")
    assert client.calls == [("delete", "old"),
                            ("upload", "v1", f"kfp-gpu 0.1.0; {version_content.CONTENT_MARK}{digest}")]
    assert any("deleted pipeline version v1 (old)" in s for s in said)


def test_same_content_is_told_by_the_hash_or_by_the_servers_spec():
    path = compiled_pipeline(PIPELINE)[0]
    docs, digest = _docs(), version_content.content_hash(path.read_text())
    marked = SimpleNamespace(pipeline_version_id="v", pipeline_spec=None,
                             description=f"{version_content.CONTENT_MARK}{digest}")
    assert version_content.same_content(marked, docs, digest) is True
    # A version uploaded by hand: the v2beta1 server returns {pipeline_spec, platform_spec}
    # (recorded api/07) with its numbers as a protobuf Struct's doubles.
    server = json.loads(json.dumps({"pipeline_spec": docs[0], "platform_spec": docs[1]}),
                        parse_int=float)
    plain = SimpleNamespace(pipeline_version_id="v", pipeline_spec=server, description="")
    assert version_content.same_content(plain, docs, digest) is True
    server["pipeline_spec"]["pipelineInfo"]["name"] = "other"
    assert version_content.same_content(plain, docs, digest) is False
    bare = SimpleNamespace(pipeline_version_id="v", pipeline_spec=None, description=None)
    client = _Client(bare)
    assert version_content.same_content(bare, docs, digest) is None
    with pytest.raises(submit.VersionClash):  # asked for the version, still unknown
        submit.ensure_pipeline_version(client, path, PIPELINE, "v1", echo=lambda s: None)
    assert client.calls == [("get", "v")]


def _ir(version: dict) -> dict:
    """The pipeline IR of a stored version (``{"pipeline_spec", "platform_spec"}`` when the
    YAML had a platform document, as the v2beta1 server returns it)."""
    spec = version["pipeline_spec"]
    return spec.get("pipeline_spec", spec)


def test_no_cache_runs_a_version_with_every_tasks_caching_off(monkeypatch):
    monkeypatch.setenv("GITHUB_SHA", "0123456789abcdef0123")
    with FakeKfp(script=[("RUNNING", 0.05), ("SUCCEEDED", 0)],
                 cached_tasks={"train-text-classifier"}) as kfp:
        cached = cli(PIPELINE, "--host", kfp.url)
        uncached = cli(PIPELINE, "--host", kfp.url, "--no-cache")
        assert cached.exit_code == 0 and uncached.exit_code == 0, uncached.output
        assert "(task caching off)" in uncached.output
        assert "(task caching off)" not in cached.output
        versions = {}
        for out, run in zip((cached, uncached), kfp.runs.values(), strict=True):
            assert f"run {run['run_id']} started" in out.output
            versions[out is uncached] = kfp.versions[
                run["pipeline_version_reference"]["pipeline_version_id"]]
        tasks = _ir(versions[True])["root"]["dag"]["tasks"]
        assert tasks and all(t["cachingOptions"]["enableCache"] is False
                             for t in tasks.values())
        assert all(t["cachingOptions"]["enableCache"] is True
                   for t in _ir(versions[False])["root"]["dag"]["tasks"].values())
        # Different content, so a different default version name at the same commit.
        names = {v["display_name"] for v in versions.values()}
        assert len(names) == 2 and all(n.startswith("0123456789ab-") for n in names)
        # The double serves a task with caching on from its cache (its executor SKIPPED).
        time.sleep(0.1)
        skipped = [sum(t["display_name"] == "executor" and t.get("state") == "SKIPPED"
                       for t in kfp.view_run(rid)["run_details"]["task_details"])
                   for rid in kfp.runs]
        assert skipped == [1, 0]


def test_uncached_turns_caching_off_in_nested_dags_too():
    """fractional-eval's shards run inside a ParallelFor DAG, which kfp 2.17's own
    enable_caching override (root.dag only) would leave cached."""
    docs = _docs("fractional-eval")
    before = copy.deepcopy(docs)
    off = version_content.uncached(docs)
    assert docs == before  # a copy
    nested = [t for c in off[0]["components"].values() if c.get("dag")
              for t in c["dag"]["tasks"].values()]
    assert nested and all(t["cachingOptions"]["enableCache"] is False for t in nested)
    assert all(t["cachingOptions"]["enableCache"] is False
               for t in off[0]["root"]["dag"]["tasks"].values())
    assert off[1:] == docs[1:]


def test_kfp_2_17_drops_enable_caching_for_a_pipeline_version_run():
    """Why --no-cache goes into the uploaded spec: kfp.Client's job config for a run of a
    pipeline version carries no caching setting at all (kfp/client/client.py
    ``_create_job_config`` applies enable_caching to a package's spec only)."""
    import kfp

    cfg = kfp.Client._create_job_config(
        None, params={}, pipeline_package_path=None, pipeline_id="p", version_id="v",
        enable_caching=False, cache_key=None, pipeline_root=None)
    assert cfg.pipeline_spec is None
    assert "cach" not in json.dumps(cfg.runtime_config.to_dict()).lower()
    assert cfg.pipeline_version_reference.pipeline_version_id == "v"


# ---------------------------------------------------------------- through the CLI
def _kubeconfig(tmp_path, kube) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": kube.host}}],
        "users": [{"name": "me", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}]}))
    return str(path)


def _pods_when_the_run_starts(kfp, kube, logs_of_task: dict[str, list[str]]):
    """A thread that waits for the run, then makes its task pods in ``kubeflow`` as KFP's
    driver would (named, labelled and annotated like the recorded pods) with these logs."""
    import threading

    def make():
        for _ in range(400):
            if kfp.runs:
                break
            threading.Event().wait(0.01)
        (run_id,) = kfp.runs
        for task, lines in logs_of_task.items():
            pod = kfp.pod_of(run_id, task)
            kube.create_pod("kubeflow", pod, {"pipeline/runid": run_id}, container="main")
            kube.objects[("pods", "kubeflow", pod)]["metadata"]["annotations"] = {
                "workflows.argoproj.io/node-id": kfp.node_of(run_id, task)}
            for line in lines:
                kube.append_log("kubeflow", pod, line)

    t = threading.Thread(target=make, daemon=True)
    t.start()
    return t


def test_submit_wait_failed_prints_the_components_error_from_the_pod_log(tmp_path):
    exc = errors.NotBinaryLabels("label values {0, 1, 2}: expected two classes",
                                 input="train.csv")
    script = [("PENDING", 0.3), ("RUNNING", 0.3), ("FAILED", 0)]
    with FakeKfp(script=script, failed_task="train-text-classifier") as kfp, \
            FakeKube() as kube:
        maker = _pods_when_the_run_starts(kfp, kube, {
            "prep-text": ["prep: 300 rows"],
            "train-text-classifier": ["epoch 1", errors.record(exc), "Traceback"]})
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1", "--wait", "--poll", "0.05",
                  "--kubeconfig", _kubeconfig(tmp_path, kube))
        maker.join(5)
        (run_id,) = kfp.runs
    assert res.exit_code == 2, res.output  # the task refused its input
    tasks = [ln for ln in res.output.splitlines() if ln.startswith("task ")]
    assert tasks == [(f"task train-text-classifier (train-lstm) failed: {exc} (input: "
                     "train.csv) (input error)")]
    assert f"run {run_id} FAILED" in res.output
    assert res.output.rstrip().endswith(f"{kfp.url}/#/runs/details/{run_id}")


def test_submit_wait_succeeded_prints_outputs_from_the_pod_logs(tmp_path):
    model, metrics, ev = _artifacts("minio://mlpipeline/v2/artifacts/imdb-lstm/x")
    with FakeKfp(script=[("PENDING", 0.3), ("RUNNING", 0.3), ("SUCCEEDED", 0)]) as kfp, \
            FakeKube() as kube:
        maker = _pods_when_the_run_starts(kfp, kube, {
            "train-text-classifier": [task_outputs.record({"model": model,
                                                           "metrics": metrics})],
            "evaluate-classifier": [task_outputs.record({"metrics": ev}, {"passed": False})]})
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1", "--wait", "--poll", "0.05",
                  "--kubeconfig", _kubeconfig(tmp_path, kube))
        maker.join(5)
    assert res.exit_code == 0, res.output
    out = res.output.splitlines()
    at = out.index("task train-text-classifier (train-lstm) outputs:")
    assert out[at + 1:at + 4] == [f"  model: {model.uri}", f"  metrics: {metrics.uri}",
                                  "  metrics: accuracy=0.875, seconds_per_epoch=12.5"]
    at = out.index("task evaluate-classifier (evaluate) outputs:")
    assert out[at + 1:at + 4] == [f"  metrics: {ev.uri}", "  metrics: auc=0.93",
                                  "  passed: False"]
    # prep-text's pod was never made: named with the reason, after the outputs shown
    assert any(ln.startswith("outputs of prep-text: see ") and "not found" in ln for ln in out)


def test_submit_wait_all_cached_says_so_and_reads_no_pod(tmp_path):
    """Every task served from KFP's cache: one line per task saying so, nothing about
    pods not found (no executor pod ran; their drivers' pods say nothing of outputs)."""
    docs = _docs()
    tasks = set(run_tasks.component_tasks(docs))
    with FakeKfp(script=[("PENDING", 0.2), ("RUNNING", 0.2), ("SUCCEEDED", 0)],
                 cached_tasks=tasks) as kfp, FakeKube() as kube:
        res = cli(PIPELINE, "--host", kfp.url, "--version", "v1", "--wait", "--poll", "0.05",
                  "--kubeconfig", _kubeconfig(tmp_path, kube))
        (run_id,) = kfp.runs
        logs = [r for r in kube.requests if r.path.endswith("/log")]
    assert res.exit_code == 0, res.output
    url = f"{kfp.url}/#/runs/details/{run_id}"
    said = [ln for ln in res.output.splitlines() if ln.startswith("task ")]
    labels = run_tasks.component_tasks(docs)
    assert sorted(said) == sorted(
        run_report.cached_line(run_tasks.Task(t, "" if labels[t] == t else labels[t]), url)
        for t in tasks)
    assert "not found" not in res.output and "garbage-collected" not in res.output
    assert logs == []


def test_submit_wait_fractional_eval_prints_outputs_and_nothing_for_its_importers(tmp_path):
    """fractional-eval's importers have no outputs to tell (their artifact is the URI given)
    and their ``child_tasks`` are the tasks after them: no line names them or a missing
    pod. plan-shards writes no record: its returned shards come from the launcher's log."""
    docs = _docs("fractional-eval")
    kinds = {t: v["kind"] for t, v in run_tasks.spec_tasks(docs).items()}
    importers = sorted(t for t, k in kinds.items() if k == "importer")
    assert importers == ["importer", "importer-2"]
    root = "minio://mlpipeline/v2/artifacts/fractional-eval/x"
    metrics = Metrics(name="metrics", uri=f"{root}/combine-shards/metrics")
    metrics.log_metric("accuracy", 0.8125)
    with FakeKfp(script=[("PENDING", 0.3), ("RUNNING", 0.3), ("SUCCEEDED", 0)]) as kfp, \
            FakeKube() as kube:
        maker = _pods_when_the_run_starts(kfp, kube, {
            **{t: [_glog("I", "importer_launcher.go:120", "Artifact imported")]
               for t in importers},
            "plan-shards": _launcher_logged(_sdk_output({}, values={"Output": [0, 1, 2, 3]})),
            "combine-shards": [task_outputs.record({"metrics": metrics}, {"passed": True})]})
        res = cli("fractional-eval", "--host", kfp.url, "--version", "v1", "--wait",
                  "--poll", "0.05", "-p", f"model_uri={root}/model",
                  "-p", f"test_data_uri={root}/test", "--kubeconfig",
                  _kubeconfig(tmp_path, kube))
        maker.join(5)
    assert res.exit_code == 0, res.output
    out = res.output.splitlines()
    at = out.index("task plan-shards outputs:")
    assert out[at + 1] == "  Output: [0, 1, 2, 3]"
    at = out.index("task combine-shards outputs:")
    assert out[at + 1:at + 4] == [f"  metrics: {metrics.uri}", "  metrics: accuracy=0.8125",
                                  "  passed: True"]
    assert not [ln for ln in out if "importer" in ln or "not found" in ln
                or ln.startswith("outputs of")]


def test_submit_wait_failed_before_its_record_prints_the_components_line(tmp_path):
    line, log = _refusal_log()
    with FakeKfp(script=[("PENDING", 0.3), ("RUNNING", 0.3), ("FAILED", 0)],
                 failed_task="train-resnet-horovod") as kfp, FakeKube() as kube:
        maker = _pods_when_the_run_starts(kfp, kube, {"train-resnet-horovod": log})
        res = cli("resnet-horovod", "--host", kfp.url, "--version", "v1", "--wait",
                  "--poll", "0.05", "--kubeconfig", _kubeconfig(tmp_path, kube))
        maker.join(5)
    assert res.exit_code == 1, res.output
    tasks = [ln for ln in res.output.splitlines() if ln.startswith("task ")]
    assert tasks == [f"task train-resnet-horovod failed: {line}"]
    assert "Error: exit status 1" not in res.output
