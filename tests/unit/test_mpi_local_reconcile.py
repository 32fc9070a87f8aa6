"""The local runner's controller decisions (kfp_gpu.mpi.local.reconcile), without Docker.

Fake containers stand in for the Docker side (state, exit code, start); the clock is
``time.monotonic`` patched. Expected behaviour is upstream's:

- the Launcher Job's backoff rule for its restartPolicy (kubernetes/kubernetes
  ``pkg/controller/job/job_controller.go`` at 6ae037f, syncJob ``exceedsBackoffLimit`` and
  ``pastBackoffLimitOnFailure``), the Launcher getting ``OnFailure`` unless the MPIJob says
  otherwise (kubeflow/mpi-operator v0.8.2 ``v2beta1/constants.go`` l. 20-23,
  ``setRestartPolicy`` l. 1722-1728 of ``pkg/controller/mpi_job_controller.go``);
- the MPIJob's Failed reason and message as ``updateMPIJobFailedStatus`` (l. 1202-1234)
  writes them from the Launcher Job's Failed condition;
- ``activeDeadlineSeconds`` on the Launcher Job only (``newLauncherJob`` l. 1568), its clock
  starting with the Job (``pastActiveDeadline`` reads ``status.startTime``); a TrainJob's
  from the TrainJob's creation (kubeflow/trainer v2.3.0 ``trainjob_controller.go``
  reconcileDeadline).
"""

from __future__ import annotations

import dataclasses

import pytest

from kfp_gpu.mpi.local import plan as lp
from kfp_gpu.mpi.local import reconcile
from kfp_gpu.mpi.local import status as local_status
from kfp_gpu.mpi.local.reconcile import Reconciler, launcher_failed_pods, launcher_job_failed
from kfp_gpu.mpi.spec import mpijob
from kfp_gpu.mpi.spec.options import MPIJobOptions


class FakeContainer:
    """What the reconciler reads of a Docker container: ``attrs["State"]``, ``name``,
    ``logs``, ``reload``, ``start``, ``stop``."""

    def __init__(self, name: str, status: str = "running", code: int = 0):
        self.name, self.starts = name, 0
        self.set(status, code)

    def set(self, status: str, code: int = 0) -> None:
        self.attrs = {"State": {"Status": status, "ExitCode": code, "OOMKilled": False}}

    def reload(self) -> None:
        pass

    def logs(self, tail: int = 5) -> bytes:
        return b"trying\n"

    def start(self) -> None:
        self.starts += 1
        self.set("running")

    def stop(self, timeout: int = 5) -> None:
        self.set("exited", 143)


class FakeJob:
    """The :class:`kfp_gpu.mpi.local.containers.JobContainers` surface the reconciler uses."""

    def __init__(self, plan, tmp_path):
        self.plan, self.key, self.workspace = plan, f"{plan.namespace}.{plan.name}", tmp_path
        (tmp_path / "config").mkdir(parents=True)
        self.worker_list = [FakeContainer(w.name) for w in plan.workers]
        self.launcher: FakeContainer | None = None
        self.is_ready = True

    def workers(self):
        return self.worker_list

    def ready(self, workers) -> bool:
        return self.is_ready

    def run(self, spec):
        self.launcher = FakeContainer(spec.name)
        return self.launcher


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(reconcile.time, "monotonic", c)
    return c


def job_plan(**policy):
    """A 2-Worker MPIJob from the builder (Launcher restartPolicy OnFailure,
    WaitForWorkersReady), its run policy replaced by ``policy``."""
    p = lp.plan(mpijob.build(MPIJobOptions.from_settings(
        name="rj", namespace="ns", image="img", program=("true",), workers=2)))
    return dataclasses.replace(p, policy=dataclasses.replace(p.policy, **policy))


def start(plan, tmp_path):
    jc = FakeJob(plan, tmp_path)
    status = local_status.for_plan(plan)
    rec = Reconciler(jc, status, ready_timeout_s=600)
    return jc, status, rec


def fail_launcher_until_finished(jc, status, rec, max_runs: int = 20) -> int:
    """Let every Launcher run exit 5; return how many runs there were."""
    rec.step()  # creates the Launcher
    runs = 0
    while not status.finished() and runs < max_runs:
        runs += 1
        jc.launcher.set("exited", 5)
        rec.step()
    return runs


@pytest.mark.parametrize(("policy", "limit", "expected"), [
    # OnFailure: the restart after the n-th failed run makes restartCount n; the Job fails
    # once it reaches backoffLimit (> 0 for backoffLimit 0)
    ("OnFailure", 0, [True]),
    ("OnFailure", 1, [True]),
    ("OnFailure", 3, [False, False, True]),
    # Never: a Failed pod per run; the Job fails once failed > backoffLimit
    ("Never", 0, [True]),
    ("Never", 1, [False, True]),
    ("Never", 3, [False, False, False, True]),
])
def test_launcher_job_backoff_rule(policy, limit, expected):
    assert [launcher_job_failed(policy, limit, n) for n in range(1, len(expected) + 1)] == (
        expected)


@pytest.mark.parametrize(("policy", "runs", "failed_runs", "pods"), [
    ("OnFailure", 1, 1, 1),   # backoffLimit 1: one full run, the restart cut short
    ("OnFailure", 3, 3, 1),
    ("Never", 2, 2, 2),       # backoffLimit 1: two pods, both Failed
])
def test_launcher_runs_and_failed_pods_by_restart_policy(tmp_path, clock, policy, runs,
                                                          failed_runs, pods):
    limit = {("OnFailure", 1): 1, ("OnFailure", 3): 3, ("Never", 2): 1}[(policy, runs)]
    plan = job_plan(backoff_limit=limit, launcher_restart_policy=policy)
    jc, status, rec = start(plan, tmp_path)
    assert fail_launcher_until_finished(jc, status, rec) == runs
    assert jc.launcher.starts == runs - 1  # restarts in place; none after the Job failed
    assert rec.launcher_failures == failed_runs
    rec.update_replicas(jc.workers())
    assert status.to_dict()["replicaStatuses"]["Launcher"] == {"failed": pods}
    assert status.is_true("Failed")


def test_exit_code_restart_policy_is_never_for_the_launcher_pod(tmp_path, clock):
    plan = job_plan(backoff_limit=1, launcher_restart_policy="ExitCode")
    assert plan.policy.launcher_pod_restart_policy == "Never"
    jc, status, rec = start(plan, tmp_path)
    assert fail_launcher_until_finished(jc, status, rec) == 2


def test_failed_reason_and_message_are_the_operators(tmp_path, clock):
    # OnFailure (the builder's Launcher): the failing Job deleted its one pod, so no Failed
    # pod is left to append: the Job's condition as it is
    jc, status, rec = start(job_plan(backoff_limit=1), tmp_path)
    fail_launcher_until_finished(jc, status, rec)
    failed = status.condition("Failed")
    assert (failed["reason"], failed["message"]) == (
        "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    # Never: the last Failed pod's pod-level reason and message (empty for a container
    # that exited: kubelet sets them for evictions and deadlines) after "/" and ": "
    jc, status, rec = start(job_plan(backoff_limit=0, launcher_restart_policy="Never"),
                            tmp_path / "never")
    fail_launcher_until_finished(jc, status, rec)
    failed = status.condition("Failed")
    assert (failed["reason"], failed["message"]) == (
        "BackoffLimitExceeded/", "Job has reached the specified backoff limit: ")
    # the container's reason ("Error") is not the operator's
    assert "Error" not in failed["reason"] and "exited with code" not in failed["message"]


def test_status_appends_a_failed_pods_own_reason():
    s = local_status.JobStatus("j", "ns")
    s.launcher_failed("j-launcher", 137, "OOMKilled", "tail",
                      last_failed_pod=("Evicted", "The node was low on resource: memory."))
    failed = s.condition("Failed")
    assert failed["reason"] == "BackoffLimitExceeded/Evicted"
    assert failed["message"] == ("Job has reached the specified backoff limit: "
                                 "The node was low on resource: memory.")
    d = local_status.JobStatus("j", "ns")
    d.deadline_exceeded()
    assert (d.condition("Failed")["reason"], d.condition("Failed")["message"]) == (
        "DeadlineExceeded", "Job was active longer than specified deadline")


def test_deadline_runs_from_the_launchers_creation(tmp_path, clock):
    jc, status, rec = start(job_plan(active_deadline_seconds=5), tmp_path)
    jc.is_ready = False
    for _ in range(3):  # Workers take 60 s to get ready: no Launcher Job, no deadline
        clock.now += 20
        rec.step()
    assert not status.finished() and jc.launcher is None and rec.deadline_start is None
    jc.is_ready = True
    rec.step()
    assert jc.launcher is not None and rec.deadline_start == clock.now
    clock.now += 5
    rec.step()
    assert not status.finished()  # 5 s is not past a 5 s deadline
    clock.now += 0.5
    rec.step()
    failed = status.condition("Failed")
    assert failed["reason"] == "DeadlineExceeded"
    rec.update_replicas(jc.workers())
    assert status.to_dict()["replicaStatuses"]["Launcher"] == {"failed": 1, "active": 1}


def test_trainjob_deadline_runs_from_the_jobs_creation(tmp_path, clock):
    plan = job_plan(active_deadline_seconds=5, deadline_from="job")
    jc, status, rec = start(plan, tmp_path)
    assert rec.deadline_start == clock.now
    jc.is_ready = False
    clock.now += 6
    rec.step()
    assert status.condition("Failed")["reason"] == "DeadlineExceeded"
    assert jc.launcher is None


def test_launcher_failed_pods_counts():
    assert launcher_failed_pods("OnFailure", 4, False) == 0  # restarting in place: Running
    assert launcher_failed_pods("OnFailure", 4, True) == 1
    assert launcher_failed_pods("Never", 3, False) == 3


def test_readiness_ignores_loopback_listeners_like_dockers_dns():
    from kfp_gpu.mpi.local.containers import listening

    head = "  sl  local_address rem_address   st tx_queue rx_queue\n"
    # what a container on a user-defined Docker network shows before sshd starts: the
    # embedded DNS server's TCP socket on 127.0.0.11 (read from the horovod image)
    dns = head + "   0: 0B00007F:A609 00000000:0000 0A 00000000:00000000\n"
    assert not listening(dns)
    assert not listening(head + "   0: 00000000000000000000000001000000:08AE "
                         "00000000000000000000000000000000:0000 0A 0:0\n")  # [::1]:2222
    assert listening(dns + "   1: 00000000:08AE 00000000:0000 0A 0:0\n")  # 0.0.0.0:2222
    assert listening(head + "   0: 00000000000000000000000000000000:08AE "
                     "00000000000000000000000000000000:0000 0A 0:0\n")  # [::]:2222


def test_a_finished_mpijob_counts_no_workers(tmp_path, clock):
    """mpi-operator v0.8.2 lists no Workers once the Launcher Job has finished, so the
    final ``replicaStatuses.Worker`` is empty even where Workers still run (cleanPodPolicy
    None); the real operator's answer, tests/cluster/test_fidelity.py."""
    jc, status, rec = start(job_plan(clean_pod_policy="None"), tmp_path)
    rec.step()
    rec.update_replicas(jc.workers())
    assert status.to_dict()["replicaStatuses"]["Worker"] == {"active": 2}
    jc.launcher.set("exited", 0)
    rec.step()
    assert status.finished()  # (Workers left running: cleanPodPolicy is not applied here)
    rec.update_replicas(jc.workers(), finished=True)
    assert status.to_dict()["replicaStatuses"] == {"Worker": {}, "Launcher": {"succeeded": 1}}


def test_a_worker_that_exits_before_the_readiness_exec_is_not_ready(tmp_path):
    """CI found the race (2026-11-28): a Worker's state read "running", then it exited and
    the engine answered the readiness exec with 409 Conflict "is not running". The Worker is
    not ready; the reconciler reads its exit on the next step. Any other engine error
    still surfaces."""
    import docker
    import requests

    from kfp_gpu.mpi.local.containers import JobContainers

    plan = job_plan()

    def gone(status: int):
        resp = requests.Response()
        resp.status_code = status

        class Exited(FakeContainer):
            def exec_run(self, cmd):
                raise docker.errors.APIError("exec", response=resp,
                                             explanation="container is not running")
        return Exited

    jc = JobContainers(plan, client=None, pvc_dirs={})
    for code, expect in ((409, False), (404, False)):
        workers = [gone(code)(s.name) for s in plan.workers]
        assert jc.ready(workers) is expect
    with pytest.raises(docker.errors.APIError):
        jc.ready([gone(500)(s.name) for s in plan.workers])
