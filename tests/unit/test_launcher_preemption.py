"""A job suspended after it ran (Kueue preemption): the launcher's one line and its pending
budget (kfp_gpu/mpi/launch/preemption.py, PendingGuard), on the API double
(tests/doubles/k8s_api.py) and as pure functions. The real Kueue and mpi-operator do the
same on the plane: tests/cluster/test_preemption.py."""

from __future__ import annotations

import logging
import threading

import pytest
from kubernetes import client

from kfp_gpu.mpi.launch import launcher, pending, preemption
from kfp_gpu.mpi.spec import backends, mpijob, options
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support.launcher_runs import run
from tests.support.waiting import wait_for

NS, NAME, QUEUE = "ml", "low-1", "team-a"
#: The Stopped Event's message as Kueue v0.19.2 words it (preemption.go preemptionMessage).
KUEUE_MESSAGE = ("Preempted to accommodate a workload (UID: 5f0c, JobUID: 9a1b) due to "
                 "prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq")


def queued_job(queue: str = QUEUE) -> dict:
    return mpijob.build(options.MPIJobOptions.from_settings(
        name=NAME, namespace=NS, image="horovod:test", program=("kfp-gpu", "x"), workers=2,
        kueue_queue=queue))


def event(reason: str, message: str, stamp: str, kind: str = "MPIJob") -> dict:
    return {"reason": reason, "message": message, "eventTime": stamp,
            "involvedObject": {"kind": kind, "name": NAME}}


# ------------------------------------------------------------------ pure
def test_the_newest_stopped_event_of_the_kind_is_the_message():
    events = [event("Stopped", "old words", "2026-01-01T00:00:01.000000Z"),
              event("Stopped", KUEUE_MESSAGE, "2026-01-01T00:00:09.000000Z"),
              event("MPIJobSuspended", "MPIJob suspended", "2026-01-01T00:00:10.000000Z"),
              event("Stopped", "a pod's", "2026-01-01T00:00:11.000000Z", kind="Pod")]
    assert preemption.stop_message(events, "MPIJob") == KUEUE_MESSAGE
    assert preemption.stop_message(events[2:3], "MPIJob") == ""
    long = preemption.stop_message([event("Stopped", "x " * 400, "t")], "MPIJob")
    assert len(long) == preemption.MAX_MESSAGE and long.endswith("...")


def test_a_preempted_job_is_named_with_kueues_reason_and_what_comes_next():
    job = queued_job()
    line = preemption.note(job, "MPIJob", KUEUE_MESSAGE, 120)
    assert line.startswith(f"suspended by Kueue ({KUEUE_MESSAGE}) after it ran; ")
    assert "the operator deletes its pods while it is suspended, so it holds no GPUs" in line
    assert (f"waiting for Kueue to admit it again in queue {QUEUE} (not counted against "
            "pending_timeout_s); once admitted, its pods have pending_timeout_s=120 s to run, "
            "else the launcher deletes the job and ends with their reason") in line
    assert "\n" not in line
    assert "its Stopped Event not found" in preemption.note(job, "MPIJob", "", 120)
    assert preemption.note(job, "MPIJob", "", 0).endswith(
        "again in queue team-a with no limit (pending_timeout_s=0)")


def test_a_job_suspended_by_hand_waits_to_be_resumed():
    job = mpijob.build(options.MPIJobOptions.from_settings(
        name=NAME, namespace=NS, image="horovod:test", program=("kfp-gpu", "x"), workers=2))
    line = preemption.note(job, "MPIJob", "", 30)
    assert line.startswith("suspended (runPolicy.suspend set) after it ran")
    assert "waiting until it is resumed (not counted" in line and "once resumed" in line
    assert "spec.suspend set" in preemption.note(job, "TrainJob", "", None)


def test_a_start_time_means_the_job_was_admitted_before():
    assert not preemption.ran_before({"status": {}})
    assert preemption.ran_before({"status": {"startTime": "2026-01-01T00:00:00Z"}})


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _mpijob(*conditions: tuple[str, str]) -> dict:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


def test_the_guard_arms_again_when_a_started_job_is_suspended():
    clock = _Clock()
    guard = pending.PendingGuard(None, backends.MPIJOB, NS, NAME, 10, clock=clock)
    guard.check(_mpijob(("Created", "True"), ("Running", "True")))
    assert guard.done
    clock.now = 100  # long after: a running job is never timed out
    guard.check(_mpijob(("Created", "True"), ("Running", "True")))
    suspended = _mpijob(("Created", "True"), ("Running", "False"), ("Suspended", "True"))
    guard.check(suspended)
    assert not guard.done  # armed again
    clock.now = 500  # suspended for long: not counted
    guard.check(suspended)
    resumed = _mpijob(("Created", "True"), ("Running", "False"), ("Suspended", "False"))
    clock.now = 509
    guard.check(resumed)  # 9 s after the last look while suspended: within 10 s
    clock.now = 511
    with pytest.raises(launcher.PendingTimeout) as e:
        guard.check(resumed)
    assert e.value.reason == "PendingTimeout" and "not Running after 10 s" in e.value.message


def test_a_guard_disarmed_by_its_timeout_or_zero_stays_disarmed():
    clock = _Clock()
    off = pending.PendingGuard(None, backends.MPIJOB, NS, NAME, 0, clock=clock)
    off.check(_mpijob(("Created", "True"), ("Suspended", "True")))
    assert off.done


# ------------------------------------------------------------------ on the double
@pytest.fixture()
def kube():
    with FakeKube() as k:
        yield k


def _patch_suspend(kube, value: bool) -> None:
    """What Kueue does through the API: RunWithPodSetsInfo (False) or stopJob (True)."""
    client.CustomObjectsApi(kube.api_client()).patch_namespaced_custom_object(
        "kubeflow.org", "v2beta1", NS, "mpijobs", NAME,
        {"spec": {"runPolicy": {"suspend": value}}})


def _preempt(kube) -> None:
    """Kueue stops the running job (suspend + its Stopped Event), then mpi-operator deletes
    the pods and sets Suspended True / Running False (mpi_job_controller.go 1096-1099,
    1166-1168)."""
    _patch_suspend(kube, True)
    kube.add_event(NS, NAME, "Normal", "Stopped", KUEUE_MESSAGE)
    for (kind, ns, pod) in [k for k in kube.objects if k[0] == "pods"]:
        kube.delete_pod(ns, pod)
    kube.set_condition(NS, NAME, "Running", "MPIJobSuspended", f"MPIJob {NS}/{NAME} is "
                       "suspended.", truth="False")
    kube.set_condition(NS, NAME, "Suspended", "MPIJobSuspended", "MPIJob suspended")


def _run_until_preempted(kube, caplog, tmp_path, pending_timeout_s: float):
    """The launcher on a queued job that Kueue admits, runs, then preempts; returns the
    launcher's thread, its result holder and the preemption line it logged."""
    kube.controller = ScriptedController(outcome=None, log=["step 1"])
    out: dict = {}

    def target():
        try:
            out["result"] = run(kube, queued_job(), tmp_path / "rec.json",
                                pending_timeout_s=pending_timeout_s)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    wait_for(lambda: "waiting for quota in queue team-a" in caplog.text, what="queued line")
    _patch_suspend(kube, False)
    wait_for(lambda: "MPIJob low-1: Running" in caplog.text, what="Running")
    _preempt(kube)
    wait_for(lambda: "after it ran" in caplog.text, what="the preemption line")
    line = next(r.getMessage() for r in caplog.records if "after it ran" in r.getMessage())
    return t, out, line


def test_a_preempted_job_is_reported_in_one_line_then_waits_and_succeeds(kube, caplog,
                                                                          tmp_path):
    caplog.set_level(logging.INFO, logger="kfp_gpu")
    t, out, line = _run_until_preempted(kube, caplog, tmp_path, pending_timeout_s=1.0)
    assert line == f"MPIJob {NAME}: " + preemption.note(queued_job(), "MPIJob",
                                                       KUEUE_MESSAGE, 1.0)
    t.join(3.0)  # well past pending_timeout_s: the suspended wait is not counted
    assert t.is_alive() and not out
    _patch_suspend(kube, False)  # Kueue admits it again
    kube.set_condition(NS, NAME, "Suspended", "MPIJobResumed", "MPIJob resumed",
                       truth="False")
    kube.set_condition(NS, NAME, "Running", "MPIJobRunning", "running again")
    kube.set_condition(NS, NAME, "Succeeded", "MPIJobSucceeded", "done", running_false=True)
    t.join(30)
    assert not t.is_alive()
    assert out["result"][0].status == "Succeeded", out
    assert kube.count("DELETE", "/mpijobs") == 0


def test_a_preempted_job_that_does_not_run_again_in_time_ends_with_the_reason(kube, caplog,
                                                                               tmp_path):
    caplog.set_level(logging.INFO, logger="kfp_gpu")
    t, out, _ = _run_until_preempted(kube, caplog, tmp_path, pending_timeout_s=1.5)
    _patch_suspend(kube, False)  # admitted again, but no pod ever runs
    kube.set_condition(NS, NAME, "Suspended", "MPIJobResumed", "MPIJob resumed",
                       truth="False")
    t.join(30)
    assert not t.is_alive()
    err = out.get("error")
    assert isinstance(err, launcher.PendingTimeout), out
    assert "not Running after 1.5 s (pending_timeout_s)" in err.message
    assert kube.deletes == [{"name": NAME, "namespace": NS, "propagationPolicy": "Foreground"}]
