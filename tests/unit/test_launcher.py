"""MPIJob launcher against the real-HTTP Kubernetes API double (tests/doubles/k8s_api.py),
plus the metrics/model helpers, plus an opt-in end-to-end test on a real cluster."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from kubernetes.client.exceptions import ApiException

from kfp_gpu.mpi.launch import launcher, retry
from kfp_gpu.mpi.launch import metrics as mpi_metrics
from kfp_gpu.mpi.spec import mpijob, options
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.doubles.pod_statuses import IMAGE_PULL, UNSCHEDULABLE
from tests.support.launcher_runs import FAST, cancel_while_running, launcher_process, run
from tests.support.waiting import wait_for

MPIJOBS = "/mpijobs"


def make_job(name: str = "resnet-test-1", ns: str = "ml") -> dict:
    return mpijob.build(options.MPIJobOptions.from_settings(
        name=name, namespace=ns, image="horovod:test", program=("kfp-gpu", "train-resnet"),
        gpu="gpu:2", workers=2, rdma=True))


@pytest.fixture()
def kube():
    with FakeKube() as k:
        yield k


def in_thread(fn, *args, **kwargs):
    out: dict = {}

    def target():
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


def test_success_records_first_streams_logs_and_returns(kube, tmp_path):
    metrics = {"img_per_sec_per_gpu": 101.5, "img_per_sec_total": 406.0, "world_size": 4}
    log = ["hvd.init: 4 ranks", "step 10 loss 6.9", "METRICS " + json.dumps(metrics)]
    kube.controller = ScriptedController(outcome="Succeeded", log=log)
    record = tmp_path / "out" / "mpijob.json"
    job = make_job()
    result, lines = run(kube, job, record)

    assert result.status == "Succeeded" and not result.reattached
    stored = kube.get_object("mpijobs", "ml", "resnet-test-1")
    rec = json.loads(record.read_text())
    assert rec == {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "namespace": "ml",
                   "name": "resnet-test-1", "uid": stored["metadata"]["uid"]}
    assert result.record.uid == stored["metadata"]["uid"]
    assert lines == log and result.log_tail == log
    assert [c["type"] for c in result.conditions if c["status"] == "True"] == [
        "Created", "Succeeded"]
    assert kube.count("POST", MPIJOBS) == 1
    # what was posted is the built MPIJob
    posted = next(r.body for r in kube.requests if r.method == "POST")
    assert posted["spec"] == job["spec"]
    assert mpi_metrics.metrics_from_log(result.log_tail) == metrics
    # the pods were found by the MPI Operator's labels
    pod_lists = [r for r in kube.requests if r.path.endswith("/pods")]
    assert pod_lists and all(r.query["labelSelector"] == [
        "training.kubeflow.org/job-name=resnet-test-1,training.kubeflow.org/job-role=launcher"]
        for r in pod_lists)


def test_failure_carries_reason_message_and_last_log_lines(kube, tmp_path):
    log = [f"step {i}" for i in range(80)] + ["Traceback (most recent call last):",
                                              "RuntimeError: NCCL error: unhandled system error"]
    kube.controller = ScriptedController(outcome="Failed", reason="BackoffLimitExceeded",
                                         message="Job has reached the specified backoff limit",
                                         log=log, step_s=0.002)
    with pytest.raises(launcher.MPIJobFailed) as e:
        run(kube, make_job(), tmp_path / "rec.json", tail_lines=20)
    err = e.value
    assert err.reason == "BackoffLimitExceeded"
    assert err.message == "Job has reached the specified backoff limit"
    assert err.log_tail == log[-20:]
    text = str(err)
    assert "BackoffLimitExceeded" in text and "NCCL error: unhandled system error" in text
    assert "step 59" not in text  # only the tail
    assert any("BackoffLimitExceeded" in ev for ev in err.events)
    assert (tmp_path / "rec.json").exists()


def test_watch_expiry_410_relists_and_continues(kube, tmp_path):
    gate = threading.Event()
    kube.controller = ScriptedController(outcome="Succeeded", log=["a", "b"], gate=gate)
    t, out = in_thread(run, kube, make_job(), tmp_path / "rec.json")
    wait_for(lambda: kube.active_watches >= 1 and launcher.phase(
        kube.get_object("mpijobs", "ml", "resnet-test-1") or {}) == "Running",
        what="a watch on the running job")
    lists_before = sum(1 for r in kube.requests if r.path.endswith(MPIJOBS)
                       and "watch" not in r.query and r.method == "GET")
    watches_before = kube.watch_count
    kube.expire_watches()
    # the launcher's resumed watch gets 410, it re-lists, then watches again
    wait_for(lambda: kube.gone_sent >= 1 and kube.watch_count >= watches_before + 2
             and kube.active_watches >= 1, what="a fresh watch after 410")
    gate.set()
    t.join(20)
    assert "error" not in out, out.get("error")
    result, _ = out["result"]
    assert result.status == "Succeeded"
    lists_after = sum(1 for r in kube.requests if r.path.endswith(MPIJOBS)
                      and "watch" not in r.query and r.method == "GET")
    assert lists_after == lists_before + 1
    assert kube.count("POST", MPIJOBS) == 1


def test_watch_timeout_resumes_from_last_version_without_relisting(kube, tmp_path):
    gate = threading.Event()
    kube.controller = ScriptedController(outcome="Succeeded", log=["a"], gate=gate)
    t, out = in_thread(run, kube, make_job(), tmp_path / "rec.json", watch_timeout_s=1)
    wait_for(lambda: kube.watch_count >= 3, timeout=15, what="watches ended by timeoutSeconds")
    gate.set()
    t.join(20)
    assert out["result"][0].status == "Succeeded"
    lists = [r for r in kube.requests if r.path.endswith(MPIJOBS) and r.method == "GET"
             and "watch" not in r.query]
    assert len(lists) == 1 and kube.gone_sent == 0
    watches = [r for r in kube.requests if "watch" in r.query]
    assert all(w.query["timeoutSeconds"] == ["1"] for w in watches)
    assert all(int(w.query["resourceVersion"][0]) > 0 for w in watches)


def test_api_500_then_recovery(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", log=["ok"])
    kube.fail_next(2, 500, method="POST")
    kube.fail_next(2, 503, method="GET", path_contains=MPIJOBS)
    result, lines = run(kube, make_job(), tmp_path / "rec.json")
    assert result.status == "Succeeded" and lines == ["ok"]
    posts = [r.status for r in kube.requests if r.method == "POST"]
    assert posts == [500, 500, 201]
    assert [r.status for r in kube.requests if r.method == "GET" and MPIJOBS in r.path][:2] == [
        503, 503]
    assert len([k for k in kube.objects if k[0] == "mpijobs"]) == 1


def test_connection_reset_then_recovery(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", log=["ok"])
    kube.reset_next(2, method="GET", path_contains=MPIJOBS)
    result, _ = run(kube, make_job(), tmp_path / "rec.json")
    assert result.status == "Succeeded"
    assert sum(1 for r in kube.requests if r.status == -1) == 2


def test_persistent_5xx_gives_up_after_bounded_retries(kube, tmp_path):
    kube.fail_next(100, 500, method="POST")
    t0 = time.monotonic()
    with pytest.raises(ApiException) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    assert e.value.status == 500
    assert kube.count("POST", MPIJOBS) == FAST.attempts
    assert time.monotonic() - t0 < 5
    assert not (tmp_path / "rec.json").exists()


def test_non_transient_error_is_not_retried(kube, tmp_path):
    kube.fail_next(5, 403, method="POST")
    with pytest.raises(ApiException) as e:
        run(kube, make_job(), tmp_path / "rec.json")
    assert e.value.status == 403 and kube.count("POST", MPIJOBS) == 1


def test_reattach_is_the_deterministic_name_and_409_not_the_record(kube, tmp_path):
    """A KFP retry runs in a new pod, which never sees the earlier
    attempt's record; the retry re-attaches through POST -> 409 -> GET even where a record
    happens to be at the path (it is not read, only overwritten)."""
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"], step_s=0.05)
    record = tmp_path / "rec.json"
    first = launcher.Launcher(kube.api_client(), backoff=FAST)
    obj, reattached = first.create_or_attach(make_job(), record)
    assert not reattached
    record.write_text(json.dumps({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                  "namespace": "ml", "name": "other-job", "uid": "stale"}))
    result, _ = run(kube, make_job(), record)
    assert result.reattached and result.record.uid == obj["metadata"]["uid"]
    assert [r.status for r in kube.requests if r.method == "POST"] == [201, 409]
    assert not [r for r in kube.requests if r.method == "GET" and "other-job" in r.path]
    assert json.loads(record.read_text())["uid"] == obj["metadata"]["uid"]


def test_relaunch_without_record_gets_409_and_reattaches(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"], step_s=0.05)
    first = launcher.Launcher(kube.api_client(), backoff=FAST)
    obj, _ = first.create_or_attach(make_job(), tmp_path / "lost.json")
    result, _ = run(kube, make_job(), tmp_path / "new.json")
    assert result.reattached and result.record.uid == obj["metadata"]["uid"]
    assert [r.status for r in kube.requests if r.method == "POST"] == [201, 409]
    assert len([k for k in kube.objects if k[0] == "mpijobs"]) == 1
    assert json.loads((tmp_path / "new.json").read_text())["uid"] == obj["metadata"]["uid"]


def test_record_of_a_deleted_job_leads_to_a_new_one(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"])
    record = tmp_path / "rec.json"
    record.write_text(json.dumps({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                  "namespace": "ml", "name": "resnet-test-1", "uid": "old"}))
    result, _ = run(kube, make_job(), record)
    assert not result.reattached and result.record.uid != "old"
    assert kube.count("POST", MPIJOBS) == 1


@pytest.mark.parametrize("with_record", [True, False])
def test_retry_after_a_failed_mpijob_replaces_it_and_trains_again(kube, tmp_path,
                                                                    with_record):
    # attempt 1: the MPIJob Failed (it stays, ttlSecondsAfterFinished); same name on retry
    kube.controller = ScriptedController(outcome="Failed", reason="BackoffLimitExceeded",
                                         step_s=0.002)
    record = tmp_path / "rec.json"
    with pytest.raises(launcher.MPIJobFailed):
        run(kube, make_job(), record)
    old_uid = kube.get_object("mpijobs", "ml", "resnet-test-1")["metadata"]["uid"]
    if not with_record:  # the record was lost: the retry meets a 409
        record.unlink()
    kube.controller = ScriptedController(outcome="Succeeded", log=["again"])
    result, lines = run(kube, make_job(), record)
    assert result.status == "Succeeded" and not result.reattached
    new_uid = kube.get_object("mpijobs", "ml", "resnet-test-1")["metadata"]["uid"]
    assert new_uid != old_uid and result.record.uid == new_uid
    assert json.loads(record.read_text())["uid"] == new_uid
    assert kube.deletes == [{"name": "resnet-test-1", "namespace": "ml",
                             "propagationPolicy": "Foreground"}]
    posts = [r.status for r in kube.requests if r.method == "POST"]
    assert posts == [201, 409, 201]  # re-attach by name + 409, record or not
    assert lines == ["again"]


def test_job_deleted_by_someone_else_fails(kube, tmp_path):
    kube.controller = ScriptedController(outcome=None, log=["running"])
    t, out = in_thread(run, kube, make_job(), tmp_path / "rec.json")
    wait_for(lambda: kube.active_watches >= 1 and (tmp_path / "rec.json").exists())
    kube.delete_object("mpijobs", "ml", "resnet-test-1", "Background")
    t.join(20)
    assert isinstance(out.get("error"), launcher.MPIJobFailed)
    assert out["error"].reason == "Deleted"


def test_sigterm_deletes_the_mpijob_foreground(kube, tmp_path):
    kube.controller = ScriptedController(outcome=None, log=["training step 1"])
    code, stderr = cancel_while_running(kube, mpijob.to_yaml(make_job()), tmp_path)
    assert code == launcher.EXIT_CANCELLED, stderr
    assert kube.deletes == [{"name": "resnet-test-1", "namespace": "ml",
                             "propagationPolicy": "Foreground"}]
    assert "propagationPolicy Foreground" in stderr
    wait_for(lambda: kube.get_object("mpijobs", "ml", "resnet-test-1") is None,
             what="the MPIJob and its launcher pod gone")
    assert not [k for k in kube.objects if k[0] == "pods"]


def test_second_sigterm_does_not_stop_the_delete(kube, tmp_path):
    # The first DELETEs fail (500): the launcher retries with CANCEL_BACKOFF; a second
    # SIGTERM in that time must be ignored, not abort the delete.
    kube.controller = ScriptedController(outcome=None, log=["training step 1"])
    kube.fail_next(2, 500, method="DELETE")
    proc, record, _ = launcher_process(kube, mpijob.to_yaml(make_job()), tmp_path)
    try:
        wait_for(lambda: record.exists() and kube.active_watches >= 1, timeout=60,
                 what="launcher watching")
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: kube.count("DELETE", MPIJOBS) >= 1, what="the first DELETE")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=25)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == launcher.EXIT_CANCELLED, stderr
    assert kube.count("DELETE", MPIJOBS) == 3
    assert kube.deletes == [{"name": "resnet-test-1", "namespace": "ml",
                             "propagationPolicy": "Foreground"}]
    waits = [retry.CANCEL_BACKOFF.delay(k) for k in range(retry.CANCEL_BACKOFF.attempts - 1)]
    assert sum(waits) < 15  # well inside the default 30 s grace period


def test_sigterm_sends_the_delete_first_with_a_short_timeout(kube, tmp_path, monkeypatch):
    """KFP's Terminate reaches the component as a SIGTERM that Argo's
    emissary forwards to the whole process group, and the container ends about a second
    later (kfp_gpu.mpi.launch.cancel). So the DELETE is the first request the cancel path
    sends, at once, with a short request timeout; the log stream is stopped after it. A
    status read or a log drain put before the DELETE fails this test (first request, or
    the 0.5 s from the signal to the DELETE)."""
    from kubernetes.client import rest

    from kfp_gpu.mpi.launch import cancel, jobs_api

    sent: list[tuple[float, str, str, str, object]] = []  # (when, thread, method, path, t/o)
    real = rest.RESTClientObject.request

    def recording(self, method, url, *args, **kwargs):
        sent.append((time.monotonic(), threading.current_thread().name, method,
                     url.split("?")[0], kwargs.get("_request_timeout")))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(rest.RESTClientObject, "request", recording)
    kube.controller = ScriptedController(outcome=None, log=["training step 1"])
    lines: list[str] = []
    mark: dict = {}

    def terminate_when_running():
        wait_for(lambda: kube.active_watches >= 1 and "training step 1" in lines, timeout=30,
                 what="launcher watching and streaming")
        mark["n"], mark["at"] = len(sent), time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)  # what Argo's emissary forwards

    helper = threading.Thread(target=terminate_when_running, daemon=True)
    helper.start()
    with pytest.raises(launcher.LaunchCancelled):
        launcher.launch(make_job(), tmp_path / "rec.json", kube.api_client(), backoff=FAST,
                        watch_timeout_s=5, log_poll_s=0.05, log_sink=lines.append,
                        handle_sigterm=True)
    helper.join(5)
    main = threading.main_thread().name
    after = [r for r in sent[mark["n"]:] if r[1] == main]
    when, _, method, path, timeout = after[0]
    assert method == "DELETE", after
    assert path.endswith("/apis/kubeflow.org/v2beta1/namespaces/ml/mpijobs/resnet-test-1")
    assert when - mark["at"] < 0.5, f"DELETE {when - mark['at']:.2f} s after SIGTERM"
    assert timeout == jobs_api.CANCEL_REQUEST_TIMEOUT_S and sum(timeout) <= 5
    assert timeout != jobs_api.REQUEST_TIMEOUT_S  # not the 60 s read of the other calls
    assert kube.deletes == [{"name": "resnet-test-1", "namespace": "ml",
                             "propagationPolicy": "Foreground"}]
    # Every attempt timing out plus the waits still ends inside Argo's default grace period
    # (workflow/controller/controller.go signalContainers: 30 s when unset).
    assert cancel.worst_case_delete_s() < 30
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler given back


# ---------------------------------------------------------------- metrics / model helpers
def test_metrics_from_log_takes_the_last_metrics_line():
    lines = ["METRICS {\"img_per_sec_total\": 1.0}", "noise",
             "[1,0]<stdout>:METRICS {\"img_per_sec_total\": 2.5, \"world_size\": 2}",
             "METRICS {not json"]
    assert mpi_metrics.metrics_from_log(lines) == {"img_per_sec_total": 2.5, "world_size": 2}
    assert mpi_metrics.metrics_from_log(["no metrics here"]) is None


def test_kfp_metrics_and_scaling_efficiency():
    m = {"img_per_sec_total": 180.0, "world_size": 2, "weights_identical": True,
         "mode": "benchmark", "ranks": [{}], "ms_per_step": 355.5}
    out = mpi_metrics.kfp_metrics(m, single_img_per_sec=100.0)
    assert out == {"img_per_sec_total": 180.0, "world_size": 2.0, "ms_per_step": 355.5,
                   "scaling_efficiency": pytest.approx(0.9)}
    with pytest.raises(ValueError):
        mpi_metrics.scaling_efficiency(1.0, 0, 1.0)


def test_fetch_model_from_a_shared_path_and_gcs(tmp_path):
    from kfp_gpu.inputs import storage
    from tests.support import gcs_emulator

    src = tmp_path / "shared" / "model"
    (src / "assets").mkdir(parents=True)
    (src / "model.keras").write_bytes(b"weights")
    (src / "assets" / "vocab.txt").write_text("a\nb\n")
    names = storage.download_dir(str(src), tmp_path / "artifact")
    assert names == ["assets/vocab.txt", "model.keras"]
    assert (tmp_path / "artifact" / "model.keras").read_bytes() == b"weights"
    with pytest.raises(FileNotFoundError):
        storage.download_dir(str(tmp_path / "missing"), tmp_path / "x")
    with gcs_emulator.running() as bucket:
        storage.upload(src, f"gs://{bucket}/runs/r1/model")
        names = storage.download_dir(f"gs://{bucket}/runs/r1/model", tmp_path / "from_gcs")
        assert names == ["assets/vocab.txt", "model.keras"]
        assert (tmp_path / "from_gcs" / "assets" / "vocab.txt").read_text() == "a\nb\n"
        with pytest.raises(FileNotFoundError):
            storage.download_dir(f"gs://{bucket}/runs/none", tmp_path / "y")


def test_launch_refuses_a_non_mpijob(kube, tmp_path):
    with pytest.raises(ValueError, match="kubeflow.org/v2beta1 MPIJob"):
        run(kube, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}},
            tmp_path / "r.json")
    assert kube.count("POST") == 0


def test_retry_meets_a_job_being_deleted_waits_and_creates_anew(kube, tmp_path):
    """An MPIJob with deletionTimestamp is gone-to-be, not re-attachable."""
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"], step_s=0.05)
    record = tmp_path / "rec.json"
    first = launcher.Launcher(kube.api_client(), backoff=FAST)
    old, _ = first.create_or_attach(make_job(), record)
    key = ("mpijobs", "ml", "resnet-test-1")
    with kube._lock:  # someone else's Foreground delete is under way (finalizer pending)
        kube.objects[key]["metadata"]["deletionTimestamp"] = "2026-11-23T08:00:00Z"

    def finish():
        time.sleep(0.3)
        with kube._lock:
            kube.objects.pop(key, None)

    threading.Thread(target=finish, daemon=True).start()
    result, _ = run(kube, make_job(), record)
    assert result.status == "Succeeded" and not result.reattached
    assert result.record.uid != old["metadata"]["uid"]
    assert kube.deletes == []  # we did not delete it a second time
    # first create, the retry's 409 (by name), the create after it went
    assert [r.status for r in kube.requests if r.method == "POST"] == [201, 409, 201]


def test_every_api_call_has_a_request_timeout(kube):
    """No Kubernetes API call may wait forever."""
    from kfp_gpu.mpi.launch import jobs_api

    jobs = jobs_api.MPIJobClient(kube.api_client(), backoff=FAST)
    seen = []

    class Recorder:
        def __getattr__(self, name):
            real = getattr(jobs_api.MPIJobClient(kube.api_client()).custom, name)

            def call(*args, **kwargs):
                seen.append((name, kwargs.get("_request_timeout")))
                return real(*args, **kwargs)
            return call

    jobs.custom = Recorder()
    jobs.create("ml", make_job())
    jobs.get("ml", "resnet-test-1")
    jobs.list_one("ml", "resnet-test-1")
    jobs.delete("ml", "resnet-test-1")
    assert [n for n, _ in seen] == ["create_namespaced_custom_object",
                                    "get_namespaced_custom_object",
                                    "list_namespaced_custom_object",
                                    "delete_namespaced_custom_object"]
    assert all(t == jobs_api.REQUEST_TIMEOUT_S for _, t in seen)


# ---------------------------------------------------------------- pending
# (the statuses: tests/doubles/pod_statuses.py)


@pytest.mark.parametrize("status,events,expected", [
    (UNSCHEDULABLE, [("FailedScheduling", UNSCHEDULABLE["conditions"][0]["message"])],
     ("Unschedulable: 0/7 nodes are available: 1 node(s) were unschedulable, 6 Insufficient "
      "nvidia.com/gpu")),
    (IMAGE_PULL, [("Failed", 'Failed to pull image "horovod:nope": not found')],
     'ImagePullBackOff: container worker: Back-off pulling image "horovod:nope"'),
    ({"phase": "Pending"}, [("FailedMount", 'MountVolume.SetUp failed for volume "data"')],
     'FailedMount: MountVolume.SetUp failed for volume "data"'),
])
def test_a_job_that_never_starts_fails_with_the_pods_reason_and_is_deleted(
        kube, tmp_path, status, events, expected):
    kube.controller = ScriptedController(outcome="Succeeded", pending=status,
                                         pending_events=events)
    t0 = time.monotonic()
    with pytest.raises(launcher.PendingTimeout) as e:
        run(kube, make_job(), tmp_path / "rec.json", pending_timeout_s=1.5)
    took = time.monotonic() - t0
    assert 1.5 <= took < 1.5 + 4  # within one poll (1 s) of the timeout, plus the delete
    assert expected in str(e.value)
    assert "resnet-test-1-worker-0" in e.value.message and "1.5 s" in e.value.message
    assert kube.deletes == [{"name": "resnet-test-1", "namespace": "ml",
                             "propagationPolicy": "Foreground"}]
    wait_for(lambda: kube.get_object("mpijobs", "ml", "resnet-test-1") is None
             and not [k for k in kube.objects if k[0] == "pods"], what="job and pods gone")
    # the pods were found by the job's label, then their Events by involvedObject.name
    pod_lists = [r.query["labelSelector"] for r in kube.requests if r.path.endswith("/pods")]
    assert ["training.kubeflow.org/job-name=resnet-test-1"] in pod_lists
    assert any(r.query.get("fieldSelector") == ["involvedObject.name=resnet-test-1-worker-0"]
               for r in kube.requests if r.path.endswith("/events"))


def test_a_job_that_starts_before_the_pending_timeout_is_not_affected(kube, tmp_path):
    # pending 0.5 s, then Running; it then runs well past the 1.5 s pending timeout
    kube.controller = ScriptedController(outcome="Succeeded", pending=UNSCHEDULABLE,
                                         pending_s=0.5, log=[f"step {i}" for i in range(12)],
                                         step_s=0.25)
    t0 = time.monotonic()
    result, lines = run(kube, make_job(), tmp_path / "rec.json", pending_timeout_s=1.5)
    assert time.monotonic() - t0 > 3.0
    assert result.status == "Succeeded" and lines == [f"step {i}" for i in range(12)]
    assert kube.deletes == []


def test_pending_timeout_zero_disables_it(kube, tmp_path):
    kube.controller = ScriptedController(outcome="Succeeded", pending=UNSCHEDULABLE,
                                         pending_s=2.0)
    result, _ = run(kube, make_job(), tmp_path / "rec.json", pending_timeout_s=0)
    assert result.status == "Succeeded" and kube.deletes == []


def test_pending_diagnosis_reads_pod_status_before_events():
    from kfp_gpu.mpi.launch import pending

    pod = {"metadata": {"name": "w-0"}, "status": UNSCHEDULABLE}
    crash = {"metadata": {"name": "w-1"}, "status": {"phase": "Running", "containerStatuses": [
        {"name": "worker", "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                 "message": "back-off 5m0s restarting"}}}]}}
    ev = [{"type": "Warning", "reason": "FailedScheduling", "message": "old",
           "involvedObject": {"name": "w-0"}, "lastTimestamp": "2026-01-01T00:00:00Z"},
          {"type": "Normal", "reason": "Scheduled", "message": "ok",
           "involvedObject": {"name": "w-0"}, "lastTimestamp": "2026-01-01T00:00:09Z"}]
    assert pending.diagnose([crash, pod], ev) == pending.Blocker(
        "w-0", "Unschedulable", UNSCHEDULABLE["conditions"][0]["message"])
    assert pending.diagnose([crash]).reason == "CrashLoopBackOff"
    assert pending.diagnose([{"metadata": {"name": "x"}, "status": {}}], ev) == \
        pending.Blocker("w-0", "FailedScheduling", "old")
    assert pending.diagnose([], []) is None


# ---------------------------------------------------------------- owner
COMPONENT_POD = "resnet-pipeline-x7k2q-system-container-impl-2345678"


def posted_job(kube) -> dict:
    return next(r.body for r in kube.requests if r.method == "POST" and MPIJOBS in r.path)


@pytest.mark.parametrize("with_uid", [True, False])
def test_the_job_names_the_component_pod_as_owner(kube, tmp_path, with_uid):
    from kfp_gpu.mpi.launch import owner

    kube.create_pod("ml", COMPONENT_POD, {"app": "kfp"}, container="main")
    uid = kube.pod_uid("ml", COMPONENT_POD)
    kube.controller = ScriptedController(outcome="Succeeded", log=["ok"])
    pod = owner.OwnerPod("ml", COMPONENT_POD, uid if with_uid else "")
    result, _ = run(kube, make_job(), tmp_path / "rec.json", owner_pod=pod)
    assert result.status == "Succeeded"
    expected = [{"apiVersion": "v1", "kind": "Pod", "name": COMPONENT_POD, "uid": uid,
                 "controller": False, "blockOwnerDeletion": False}]
    assert posted_job(kube)["metadata"]["ownerReferences"] == expected
    stored = kube.get_object("mpijobs", "ml", "resnet-test-1")
    assert stored["metadata"]["ownerReferences"] == expected
    # the uid comes from KFP_POD_UID when given, else from one GET of the pod
    assert kube.count("GET", f"/pods/{COMPONENT_POD}") == (0 if with_uid else 1)


def _attempt_pods(kube) -> tuple:
    from kfp_gpu.mpi.launch import owner

    pods = []
    for name in (COMPONENT_POD, COMPONENT_POD + "-retry"):
        kube.create_pod("ml", name, {"app": "kfp"}, container="main")
        pods.append(owner.OwnerPod("ml", name, kube.pod_uid("ml", name)))
    return tuple(pods)


def test_a_retry_takes_over_the_owner_reference(kube, tmp_path):
    """A retry is a new pod: after re-attaching it makes itself the job's owner, so that
    deleting the first attempt's pod cannot garbage-collect the job it follows."""
    first, retry = _attempt_pods(kube)
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"], step_s=0.05)
    record = tmp_path / "rec.json"
    launcher.Launcher(kube.api_client(), backoff=FAST, owner_pod=first).create_or_attach(
        make_job(), record)
    stored = kube.get_object("mpijobs", "ml", "resnet-test-1")
    assert [r["uid"] for r in stored["metadata"]["ownerReferences"]] == [first.uid]
    result, _ = run(kube, make_job(), record, owner_pod=retry)
    assert result.reattached and result.status == "Succeeded"
    patches = [r for r in kube.requests if r.method == "PATCH" and MPIJOBS in r.path]
    assert [r.body for r in patches] == [{"metadata": {"ownerReferences": [retry.reference()]}}]
    stored = kube.get_object("mpijobs", "ml", "resnet-test-1")
    assert stored["metadata"]["ownerReferences"] == [retry.reference()]
    # the same pod re-attaching again (a resumed launcher) changes nothing
    run(kube, make_job(), record, owner_pod=retry)
    assert kube.count("PATCH", MPIJOBS) == 1
    # what the hand-over is for: the first attempt's pod goes (pod GC), the job stays;
    # only when the retry's pod goes too does the garbage collector take the job
    kube.delete_pod("ml", first.name)
    assert kube.collect_garbage("ml") == []
    assert kube.get_object("mpijobs", "ml", "resnet-test-1") is not None
    kube.delete_pod("ml", retry.name)
    wait_for(lambda: kube.get_object("mpijobs", "ml", "resnet-test-1") is None,
             what="the job collected with its last owner")


def test_deleting_the_component_pod_garbage_collects_the_running_job(kube, tmp_path):
    """The backstop when the launcher dies without its cancel path (a lost node, a pod
    force-deleted): the pod's deletion makes the garbage collector delete the MPIJob
    (Background), and with it the pods the operator made for it."""
    from kubernetes import client as k8s

    component, _ = _attempt_pods(kube)
    kube.controller = ScriptedController(outcome=None, log=["step"] * 500, step_s=0.05)
    launcher.Launcher(kube.api_client(), backoff=FAST, owner_pod=component).create_or_attach(
        make_job(), tmp_path / "rec.json")

    def launcher_pods() -> list[dict]:
        return [kube.get_object("pods", "ml", n) for p, _, n in list(kube.objects)
                if p == "pods" and n.startswith("resnet-test-1-launcher")]

    wait_for(launcher_pods, what="the operator's launcher pod")
    job_uid = kube.get_object("mpijobs", "ml", "resnet-test-1")["metadata"]["uid"]
    assert [r["uid"] for r in launcher_pods()[0]["metadata"]["ownerReferences"]] == [job_uid]
    assert kube.deletes == []  # nothing collected while the owner exists
    # as Argo's pod GC or `kubectl delete pod` does it, through the API
    k8s.CoreV1Api(kube.api_client()).delete_namespaced_pod(component.name, "ml")
    wait_for(lambda: kube.get_object("mpijobs", "ml", "resnet-test-1") is None,
             what="the MPIJob collected")
    wait_for(lambda: not launcher_pods(), what="the launcher pod collected")
    assert kube.deletes == [{"name": "resnet-test-1", "namespace": "ml",
                             "propagationPolicy": "Background", "by": "garbage-collector"}]


def test_owner_hand_over_without_patch_permission_is_logged_not_fatal(kube, tmp_path,
                                                                      caplog):
    first, retry = _attempt_pods(kube)
    kube.controller = ScriptedController(outcome="Succeeded", log=["x"], step_s=0.05)
    record = tmp_path / "rec.json"
    launcher.Launcher(kube.api_client(), backoff=FAST, owner_pod=first).create_or_attach(
        make_job(), record)
    kube.fail_next(5, 403, method="PATCH")
    with caplog.at_level("WARNING", logger="kfp_gpu.mpi.launch.launcher"):
        result, _ = run(kube, make_job(), record, owner_pod=retry)
    assert result.reattached and result.status == "Succeeded"
    assert kube.count("PATCH", MPIJOBS) == 1  # 403 is not retried
    stored = kube.get_object("mpijobs", "ml", "resnet-test-1")
    assert [r["uid"] for r in stored["metadata"]["ownerReferences"]] == [first.uid]
    assert any("garbage collection deletes the job" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("pod", [
    None,                                        # no pod info
    ("ml", "gone-pod", ""),                      # the pod cannot be read: 404
    ("other-ns", COMPONENT_POD, "1234-abcd"),    # the job goes to another namespace
])
def test_no_usable_pod_means_no_owner_and_no_error(kube, tmp_path, pod):
    from kfp_gpu.mpi.launch import owner

    kube.controller = ScriptedController(outcome="Succeeded", log=["ok"])
    result, _ = run(kube, make_job(), tmp_path / "rec.json",
                    owner_pod=owner.OwnerPod(*pod) if pod else None)
    assert result.status == "Succeeded"
    assert "ownerReferences" not in posted_job(kube)["metadata"]


def test_owner_pod_from_the_kfp_environment(tmp_path):
    from kfp_gpu.mpi.launch import owner

    ns_file = tmp_path / "namespace"
    ns_file.write_text("ml\n")
    env = {"KFP_POD_NAME": COMPONENT_POD, "KFP_POD_UID": "0d5c-uid", "HOSTNAME": "h"}
    assert owner.from_environment(env, ns_file) == owner.OwnerPod("ml", COMPONENT_POD,
                                                                 "0d5c-uid")
    # not a KFP v2 executor: HOSTNAME is the pod name, the uid is read later
    assert owner.from_environment({"HOSTNAME": "h"}, ns_file) == owner.OwnerPod("ml", "h")
    assert owner.from_environment(env, tmp_path / "missing") is None  # not in a pod
    assert owner.from_environment({}, ns_file) is None


def test_every_request_of_a_launch_carries_a_timeout(kube, tmp_path, monkeypatch):
    """Every Kubernetes API request the launcher makes (job CRUD, watch,
    pod lists, logs, events, the owner's GET, the pending diagnosis, the delete) goes out
    with a ``_request_timeout``: a total, or connect and read both set."""
    from kubernetes.client import rest

    from kfp_gpu.mpi.launch import owner

    seen: list[tuple[str, str, object]] = []
    real = rest.RESTClientObject.request

    def recording(self, method, url, *args, **kwargs):
        seen.append((method, url.split("?")[0], kwargs.get("_request_timeout")))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(rest.RESTClientObject, "request", recording)
    kube.create_pod("ml", COMPONENT_POD, {"app": "kfp"}, container="main")
    kube.controller = ScriptedController(outcome="Failed", log=["a", "b"])
    with pytest.raises(launcher.MPIJobFailed):
        run(kube, make_job(), tmp_path / "a.json", owner_pod=owner.OwnerPod("ml", COMPONENT_POD))
    kube.controller = ScriptedController(outcome="Succeeded", pending=UNSCHEDULABLE)
    with pytest.raises(launcher.PendingTimeout):
        run(kube, make_job("other-job"), tmp_path / "b.json", pending_timeout_s=1)
    kinds = {(m, u.rsplit("/", 1)[-1] if m != "GET" else u.split("/namespaces/ml/")[-1])
             for m, u, _ in seen}
    assert ("POST", "mpijobs") in kinds and ("DELETE", "other-job") in kinds
    assert {"pods", "events", f"pods/{COMPONENT_POD}"} <= {u for m, u in kinds if m == "GET"}
    assert any(u.endswith("/log") for _, u, _ in seen)
    untimed = [(m, u, t) for m, u, t in seen if not (  # a total, or (connect, read)
        (isinstance(t, (int, float)) and t > 0)
        or (isinstance(t, tuple) and len(t) == 2 and all(t)))]
    assert untimed == []


# ---------------------------------------------------------------- restarts
def test_a_restarted_launcher_container_prints_its_new_lines_and_no_old_one(kube, tmp_path):
    """The Launcher container restarts in place (restartPolicy OnFailure): restartCount
    goes up and its log starts over with FEWER lines than the old one had. Counting lines
    would swallow the new ones; timestamps tell them apart."""
    kube.controller = None  # the test plays the operator
    t, out = in_thread(run, kube, make_job(), tmp_path / "rec.json")
    wait_for(lambda: kube.get_object("mpijobs", "ml", "resnet-test-1") is not None)
    pod = "resnet-test-1-launcher-abcde"
    kube.create_pod("ml", pod, {"training.kubeflow.org/job-name": "resnet-test-1",
                                "training.kubeflow.org/job-role": "launcher"},
                    owner="resnet-test-1")
    kube.set_pod_phase("ml", pod, "Running")
    kube.set_condition("ml", "resnet-test-1", "Running", "MPIJobRunning", "running")
    old = [f"attempt 1 line {i}" for i in range(5)]
    for line in old:
        kube.append_log("ml", pod, line)
    wait_for(lambda: kube.count("GET", "/log") >= 1, what="the log stream")
    time.sleep(0.5)  # the old lines are streamed
    kube.restart_container("ml", pod, ["attempt 2 line 0"])
    time.sleep(0.3)
    kube.append_log("ml", pod, "attempt 2 line 1")
    time.sleep(0.5)
    kube.set_pod_phase("ml", pod, "Succeeded")
    kube.set_condition("ml", "resnet-test-1", "Succeeded", "MPIJobSucceeded", "done",
                       running_false=True)
    t.join(20)
    assert "error" not in out, out.get("error")
    result, lines = out["result"]
    assert lines == [*old, "attempt 2 line 0", "attempt 2 line 1"]
    assert result.log_tail == lines
    restarted = kube.get_object("pods", "ml", pod)["status"]["containerStatuses"]
    assert restarted[0]["restartCount"] == 1
    logs = [r for r in kube.requests if r.path.endswith("/log")]
    assert len(logs) >= 2 and all(r.query["timestamps"][0].lower() == "true" for r in logs)


def test_log_cursor_dedupes_by_timestamp_not_by_count():
    from kfp_gpu.mpi.launch.logs import _Cursor

    c = _Cursor()
    first = ["2026-11-23T08:00:01.000000001Z a", "2026-11-23T08:00:01.000000001Z b",
             "2026-11-23T08:00:02Z c"]
    assert [c.admit(x) for x in first] == ["a", "b", "c"]
    c.restart()  # the same stream re-opened: nothing again, then the new line
    assert [c.admit(x) for x in [*first, "2026-11-23T08:00:02.5Z d"]] == [None] * 3 + ["d"]
    c.restart()  # a restarted container: one line, later than all the old ones
    assert c.admit("2026-11-23T08:00:03.1Z fresh") == "fresh"
    assert c.admit("no timestamp here") == "no timestamp here"


def test_a_job_that_ends_while_its_pod_is_listed_still_shows_its_log(kube):
    """The race CI met (a job done in 50 ms): the follower lists the launcher pods while the
    pod is still Pending, the job ends and stop() is called before the follower looks at the
    answer. It must take one more look and stream the pod, so each line reaches the sink
    (the user's terminal) once, not only the returned tail."""
    from kubernetes import client

    from kfp_gpu.mpi.launch.logs import LauncherLogs

    labels = {"training.kubeflow.org/job-name": "j", "training.kubeflow.org/job-role":
              "launcher"}
    kube.create_pod("ml", "j-launcher", labels, owner="j", container="launcher")
    listed, answer = threading.Event(), threading.Event()
    sunk: list[str] = []
    logs = LauncherLogs(client.CoreV1Api(kube.api_client()), "ml", "j", sink=sunk.append,
                        poll_s=0.01)
    real_pods = logs._pods

    def pods_with_a_slow_answer():
        got = real_pods()
        if not listed.is_set():  # the first list: Pending, so no pod; the job ends now
            listed.set()
            answer.wait(10)
        return got

    logs._pods = pods_with_a_slow_answer
    logs.start()
    assert listed.wait(10)
    kube.append_log("ml", "j-launcher", "epoch 1 done")
    kube.set_pod_phase("ml", "j-launcher", "Succeeded")
    stopper, out = in_thread(logs.stop, 10.0)
    wait_for(lambda: logs._finished.is_set(), what="stop() to mark the job finished")
    answer.set()
    stopper.join(15)
    assert out["result"] == ["epoch 1 done"]
    assert sunk == ["epoch 1 done"]


# ------------------------------------------------- Kueue (suspended job)
def test_a_job_queued_in_kueue_waits_suspended_past_the_pending_timeout(kube, tmp_path, caplog):
    """Kueue holds the MPIJob suspended (runPolicy.suspend) until it has quota; the launcher
    accepts that, says which queue it waits in, and does not count the wait against
    pending_timeout_s; when Kueue admits it (suspend -> false) it runs to the end."""
    import logging

    caplog.set_level(logging.INFO, logger="kfp_gpu")
    kube.controller = ScriptedController(outcome="Succeeded", log=["step 1", "done"])
    job = mpijob.build(options.MPIJobOptions.from_settings(
        name="queued-1", namespace="ml", image="horovod:test", program=("kfp-gpu", "x"),
        workers=2, kueue_queue="team-a-gpu"))
    assert job["spec"]["runPolicy"]["suspend"] is True

    def kueue_admits_after(delay_s: float) -> None:
        from kubernetes import client

        time.sleep(delay_s)  # Kueue's RunWithPodSetsInfo: a PATCH through the API
        client.CustomObjectsApi(kube.api_client()).patch_namespaced_custom_object(
            "kubeflow.org", "v2beta1", "ml", "mpijobs", "queued-1",
            {"spec": {"runPolicy": {"suspend": False}}})  # a dict: merge-patch+json

    t = threading.Thread(target=kueue_admits_after, args=(3.0,), daemon=True)
    t.start()
    result, lines = run(kube, job, tmp_path / "rec.json", pending_timeout_s=1.0)
    t.join()
    assert result.status == "Succeeded" and lines == ["step 1", "done"]
    said = caplog.text
    assert "waiting for quota in queue team-a-gpu" in said
    assert "not counted against pending_timeout_s" in said
    conds = {c["type"]: c for c in result.conditions}
    assert conds["Suspended"]["status"] == "False"
    assert conds["Suspended"]["reason"] == "MPIJobResumed"
    assert kube.count("DELETE", MPIJOBS) == 0  # never taken for a pending timeout


def test_a_suspended_job_creates_no_pods_in_the_double(kube):
    """The double follows mpi-operator: no pods while suspended, Suspended True."""
    kube.controller = ScriptedController(outcome="Succeeded")
    job = make_job("susp-2")
    job["spec"]["runPolicy"]["suspend"] = True
    code, _ = kube.create_object("mpijobs", "ml", job)
    assert code == 201
    kube.start_controller("ml", "susp-2")
    wait_for(lambda: any(c["type"] == "Suspended" and c["status"] == "True" for c in (
        kube.get_object("mpijobs", "ml", "susp-2").get("status") or {}).get(
        "conditions", [])), what="Suspended condition")
    time.sleep(0.3)
    running = [c for c in kube.get_object("mpijobs", "ml", "susp-2")["status"]["conditions"]
               if c["type"] == "Running"]
    assert [(c["status"], c["reason"], c["message"]) for c in running] == [
        ("False", "MPIJobSuspended", "MPIJob ml/susp-2 is suspended.")]  # v0.8.2 1166-1168
    assert not [p for (kind, ns, _), p in kube.objects.items() if kind == "pods"]
    assert "startTime" not in kube.get_object("mpijobs", "ml", "susp-2")["status"]
    kube.delete_object("mpijobs", "ml", "susp-2", "Foreground")
