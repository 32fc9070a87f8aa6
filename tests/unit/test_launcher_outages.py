"""What the launcher says when the control plane misbehaves while it waits on a job.

An API server that stops answering (kfp_gpu/mpi/launch/watch.py): one warning when the
first request fails, one line at the first answer after it with the gap and the retries,
the watch resumed from its resourceVersion or, on ``410 Gone``, re-listed; no second job.

A job nobody reconciles (kfp_gpu/mpi/launch/stall.py): its status
does not change AND its operator's leader Lease is not renewed for 2 x the Lease's
``leaseDurationSeconds`` -> one warning line, the wait goes on; reconciliation resumes ->
one line; the Lease cannot be read (403: the Role does not grant it; 404) -> no line at
all. Against the Kubernetes API double (tests/doubles/k8s_api.py), whose Leases are
renewed as client-go's leader election renews them (FakeKube.renew_lease).

The unit tests drive :class:`StallNotice` with a fake clock over the double's real HTTP
answers; the last one runs the whole ``launcher.launch`` with a 1 s Lease.
"""

from __future__ import annotations

import logging
import threading

import pytest

from kfp_gpu.mpi.launch import jobs_api, launcher, stall
from kfp_gpu.mpi.spec import backends, mpijob, options
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support.launcher_runs import FAST
from tests.support.waiting import wait_for

LEASE = stall.OPERATOR_LEASES["mpijob"]
JOB = {"status": {"conditions": [{"type": "Running", "status": "True"}]}}
LOGGER = "kfp_gpu.mpi.launch.stall"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_job(name: str = "resnet-test-1", ns: str = "ml") -> dict:
    return mpijob.build(options.MPIJobOptions.from_settings(
        name=name, namespace=ns, image="horovod:test", program=("kfp-gpu", "train-resnet"),
        gpu="gpu:2", workers=2))


def in_thread(fn, *args, **kwargs) -> tuple[threading.Thread, dict]:
    """``fn(*args, **kwargs)`` in a daemon thread; ``out["result"]`` or ``out["error"]``."""
    out: dict = {}

    def target():
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


@pytest.fixture()
def kube():
    with FakeKube() as k:
        yield k


def notice(kube, clock) -> stall.StallNotice:
    """A StallNotice reading mpi-operator's Lease from the double, as notice_for reads it."""
    from kubernetes import client

    api = client.CoordinationV1Api(kube.api_client())

    def read() -> dict:
        return jobs_api.raw_json(api.read_namespaced_lease(
            LEASE.name, LEASE.namespace, _preload_content=False, _request_timeout=5))

    return stall.StallNotice(read, "MPIJob", "ml", "job-1", LEASE, clock=clock)


def said(caplog, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_a_stale_lease_and_a_quiet_job_are_told_once_then_the_renewal(kube, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    kube.renew_lease(LEASE.namespace, LEASE.name, holder="mpi-operator-a")
    clock = Clock()
    n = notice(kube, clock)
    n.seen(JOB)
    n.check()  # the first look: the record is noted, nothing said
    clock.t += 2 * 15  # exactly the bound: not yet
    n.check()
    assert said(caplog, logging.WARNING) == []
    for _ in range(3):  # past the bound, and later looks say nothing more
        clock.t += 5
        n.check()
    [line] = said(caplog, logging.WARNING)
    assert line.startswith("MPIJob ml/job-1: nobody reconciles it: no status change for 35 s "
                           "and Lease mpi-operator/mpi-operator (holder mpi-operator-a) not "
                           "renewed for 35 s (bound 30 s = 2 x leaseDurationSeconds 15)"), line
    assert said(caplog, logging.INFO) == []
    kube.renew_lease(LEASE.namespace, LEASE.name, holder="mpi-operator-b")
    clock.t += 3
    n.check()
    n.check()
    assert said(caplog, logging.INFO) == [
        ("MPIJob ml/job-1: reconciled again (Lease mpi-operator/mpi-operator renewed by "
         "mpi-operator-b) after 13 s unreconciled")]
    assert len(said(caplog, logging.WARNING)) == 1


def test_a_status_change_also_counts_as_reconciled(kube, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    kube.renew_lease(LEASE.namespace, LEASE.name)
    clock = Clock()
    n = notice(kube, clock)
    n.seen(JOB)
    n.check()
    clock.t += 40
    n.check()
    assert len(said(caplog, logging.WARNING)) == 1
    n.seen(JOB)  # the same status again: nothing
    assert said(caplog, logging.INFO) == []
    clock.t += 1
    n.seen({"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}})
    assert said(caplog, logging.INFO) == [
        "MPIJob ml/job-1: reconciled again (its status changed) after 1 s unreconciled"]


def test_a_lease_renewed_in_time_or_a_changing_job_says_nothing(kube, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    kube.renew_lease(LEASE.namespace, LEASE.name)
    clock = Clock()
    n = notice(kube, clock)
    n.seen(JOB)
    for _ in range(10):  # the job is quiet for 200 s but its operator leads
        clock.t += 20
        kube.renew_lease(LEASE.namespace, LEASE.name)
        n.check()
    for i in range(10):  # the Lease is stale for 200 s but the job's status moves
        clock.t += 20
        n.seen({"status": {"replicaStatuses": {"Worker": {"active": i}}}})
        n.check()
    assert said(caplog, logging.WARNING) == [] and said(caplog, logging.INFO) == []


@pytest.mark.parametrize("lease_state", ["forbidden", "missing"])
def test_a_lease_it_cannot_read_turns_the_check_off_silently(kube, caplog, lease_state):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    if lease_state == "forbidden":
        kube.renew_lease(LEASE.namespace, LEASE.name)
        kube.forbid("/leases/")
    clock = Clock()
    n = notice(kube, clock)
    n.seen(JOB)
    for _ in range(5):
        clock.t += 60
        n.check()
    assert said(caplog, logging.WARNING) == [] and said(caplog, logging.INFO) == []
    [debug] = said(caplog, logging.DEBUG)
    code = "403" if lease_state == "forbidden" else "404"
    assert debug.startswith("reconcile check off: cannot read Lease mpi-operator/mpi-operator")
    assert code in debug
    assert n.off and kube.count("GET", "/leases/") == 1  # asked once, never again


def test_lease_specs():
    assert stall.lease_for("mpijob") == stall.LeaseRef("mpi-operator", "mpi-operator")
    assert stall.lease_for("trainjob") == stall.LeaseRef("kubeflow-system",
                                                         "trainer.kubeflow.org")
    assert stall.lease_for("mpijob", "ops/my-operator") == stall.LeaseRef("ops", "my-operator")
    assert stall.lease_for("mpijob", "none") is None
    with pytest.raises(ValueError, match="expected NAMESPACE/NAME, 'auto' or 'none'"):
        stall.lease_for("mpijob", "mpi-operator")
    assert {b.name for b in (backends.MPIJOB, backends.TRAINJOB)} == set(stall.OPERATOR_LEASES)


def test_the_launcher_tells_an_unreconciled_job_and_its_recovery(kube, tmp_path, caplog):
    """The whole launch: the job runs, its operator's 1 s Lease stops being renewed ->
    one warning while the launcher keeps waiting; the Lease renewed -> one line; the job
    then ends and the launch succeeds."""
    caplog.set_level(logging.INFO, logger="kfp_gpu")
    kube.renew_lease(LEASE.namespace, LEASE.name, holder="op-1", duration_s=1)
    gate = threading.Event()
    kube.controller = ScriptedController(outcome="Succeeded", gate=gate)
    t, out = in_thread(launcher.launch, make_job(), tmp_path / "rec.json", kube.api_client(),
                       backoff=FAST, watch_timeout_s=5, log_poll_s=0.05,
                       handle_sigterm=False, log_sink=lambda line: None)
    wait_for(lambda: said(caplog, logging.WARNING), 20, "the stall line")
    assert t.is_alive() and "error" not in out  # it keeps waiting
    kube.renew_lease(LEASE.namespace, LEASE.name, holder="op-2", duration_s=1)
    wait_for(lambda: said(caplog, logging.INFO), 10, "the recovery line")
    gate.set()
    t.join(30)
    assert out.get("result") is not None and out["result"].status == "Succeeded", out
    assert len(said(caplog, logging.WARNING)) == 1
    [again] = [ln for ln in said(caplog, logging.INFO) if "reconciled again" in ln]
    assert again.startswith(f"MPIJob ml/resnet-test-1: reconciled again (Lease {LEASE} "
                            "renewed by op-2) after "), again
    assert not [th for th in threading.enumerate() if th.name == "reconcile-check"], \
        "the check's thread outlived the launch"


def test_an_api_server_gap_is_one_line_and_its_retries_another(kube, tmp_path, caplog):
    """The API server drops the next 8 requests (connections closed unanswered: the
    client's urllib3 tries each request 4 times, its default ``Retry(3)``, so 2 of the
    launcher's attempts fail) and its watch history is compacted meanwhile, as a restarted
    API server's fresh watch cache is: one warning at the first failure, one line at the
    first answer with the gap and the 2 retries, the 410 re-list, and the job followed to
    its end, created once."""
    caplog.set_level(logging.DEBUG, logger="kfp_gpu.mpi.launch.watch")
    gate = threading.Event()
    kube.controller = ScriptedController(outcome="Succeeded", gate=gate)
    t, out = in_thread(launcher.launch, make_job(), tmp_path / "rec.json", kube.api_client(),
                       backoff=FAST, watch_timeout_s=5, log_poll_s=0.05,
                       handle_sigterm=False, log_sink=lambda line: None,
                       operator_lease="none")
    wait_for(lambda: kube.active_watches >= 1, 20, "the launcher watching")
    kube.reset_next(8, method="GET", path_contains="/mpijobs")
    kube.expire_watches()  # the open watch ends; its resourceVersion is now too old
    wait_for(lambda: kube.gone_sent >= 1 and kube.active_watches >= 1, 20,
             "the watch re-listed after the gap")
    gate.set()
    t.join(30)
    assert out.get("result") is not None and out["result"].status == "Succeeded", out
    watch_log = "kfp_gpu.mpi.launch.watch"
    warnings = [r.getMessage() for r in caplog.records
                if r.name == watch_log and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(
        "watch: the API server does not answer ("), warnings
    assert warnings[0].endswith("retrying with backoff for up to 0 s (4 retries)"), warnings
    back = [r.getMessage() for r in caplog.records
            if r.name == watch_log and "answered again" in r.getMessage()]
    assert len(back) == 1 and " s and 2 retries; its watch history no longer holds " \
        "resourceVersion " in back[0] and back[0].endswith("(410 Gone): re-listing"), back
    assert kube.count("POST", "/mpijobs") == 1  # never a second job


def test_the_job_ending_is_the_recovery_when_no_lease_read_came_first(kube, caplog):
    """The operator came back and finished the job before the next Lease read: the
    terminal status is the change that says "reconciled again" (the watch hands it to the
    notice before it returns)."""
    from kfp_gpu.mpi.launch import watch

    caplog.set_level(logging.INFO, logger=LOGGER)
    kube.controller = None
    kube.put_object("mpijobs", "ml", {**make_job(), "status": {}})
    kube.set_condition("ml", "resnet-test-1", "Running", "MPIJobRunning", "running")
    kube.renew_lease(LEASE.namespace, LEASE.name)
    clock = Clock()
    n = notice(kube, clock)
    n.check()
    jobs = jobs_api.MPIJobClient(kube.api_client(), FAST)
    t, out = in_thread(watch.wait_for_end, jobs, "ml", "resnet-test-1", watch_timeout_s=5,
                       observer=n.seen)
    wait_for(lambda: kube.active_watches >= 1, 10, "the watch")
    clock.t += 40
    n.check()
    assert len(said(caplog, logging.WARNING)) == 1
    kube.set_condition("ml", "resnet-test-1", "Succeeded", "MPIJobSucceeded", "done")
    t.join(10)
    assert "result" in out, out
    assert said(caplog, logging.INFO) == [
        "MPIJob ml/job-1: reconciled again (its status changed) after 0 s unreconciled"]
