"""Faults of the control plane while the component's launcher waits on a running job on
the real node (marker ``chaos``: ``make chaos`` on a ``make cluster-up NODE=1`` plane;
skipped unless ``-m`` names ``chaos``). docs/reliability.md tables what each shows and
its figures. Every process of the plane runs under the plane's supervisor
(testcluster/supervise.py: restarted with the kubelet's crash-loop backoff, 10 s doubling
to 300 s), as a cluster's static pods and Deployments are.

1. kube-apiserver stopped (SIGKILL; held by the supervisor for :data:`GAP_S` s, then
   started again on the same etcd with the same argv): the launcher's WATCH breaks, its
   retries fail with the backoff of kfp_gpu/mpi/launch/retry.py, and at the first answer it
   resumes from its resourceVersion or, the new API server's watch cache not holding it,
   gets ``410 Gone`` and re-lists (the kube-apiserver watch contract: Kubernetes API
   concepts "Efficient detection of changes"; the kubernetes client's ``Watch.stream``,
   kubernetes/watch/watch.py of kubernetes 30.1.0, raises the 410 as ``ApiException`` when
   ``timeout_seconds`` is set). kube-controller-manager, kube-scheduler and mpi-operator
   lose their leader Lease and exit (client-go leader election: no renewal within
   ``RenewDeadline`` -> ``OnStoppedLeading``; mpi-operator v0.8.2 server.go
   ``klog.Fatalf("Leader election stopped")``), and the supervisor restarts them.
2. mpi-operator SIGKILLed mid-run: the supervisor restarts it after 10 s (each scenario
   starts the backoff of what it faults over, as for new pods); the new process
   leads once the old Lease expires (v0.8.2 does not release it: server.go, no
   ``ReleaseOnCancel``) and reconciles the job to its end from the objects it finds,
   creating nothing twice (its pods and Launcher Job are named after the job: a create of
   an existing name is 409, pkg/controller/mpi_job_controller.go ``getOrCreate*``). Then it
   is kept down past 2 x its Lease duration: the launcher says once that nobody reconciles
   the job, and once that it is reconciled again (kfp_gpu/mpi/launch/stall.py).
3. (tier 2) Trainer and JobSet SIGKILLed mid-run: restarted, the TrainJob completes,
   nothing created twice.

"Nothing created twice" is read from :class:`Census`: every uid of the namespace's pods,
batch Jobs, JobSets and jobs, LIST then WATCH from the list's resourceVersion (a LIST
again after any error), so no object made while the API server answers is missed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid

import pytest

from kfp_gpu.mpi.launch import stall
from kfp_gpu.mpi.spec import backends
from testcluster import supervise
from tests.cluster import kube
from tests.cluster.chaos import (
    CONTROLLERS,
    MPIJOB_KINDS,
    TRAINJOB_KINDS,
    Census,
    answering,
    component_pid,
    finish,
    fresh,
    launcher_lines,
    logged_at,
    ranks_up,
    restarts,
    run_launcher,
    sleeper,
)

pytestmark = [pytest.mark.node, pytest.mark.chaos, pytest.mark.timeout(1200)]

#: Seconds the API server stays down in scenario 1 (the issue: 20-30 s).
GAP_S = 25
#: Seconds mpi-operator stays down in scenario 2's second phase: past the launcher's
#: latest "nobody reconciles" (60 s after the later of the last renewal and status change).
OPERATOR_DOWN_S = 65
def test_api_server_stopped_and_started_again_mid_run(supervised, api, namespace,
                                                     horovod, tmp_path):
    plane = supervised
    name = f"apigap-{uuid.uuid4().hex[:5]}"
    census = Census(api, namespace, MPIJOB_KINDS)
    census.start()
    proc = run_launcher(plane, sleeper(namespace, name, horovod, 150), tmp_path)
    try:
        ranks_up(api, namespace, name)
        fresh(plane, *CONTROLLERS)
        before = {c: restarts(plane, c) for c in CONTROLLERS}
        apiserver = component_pid(plane, "kube-apiserver")
        supervise.hold(plane.dir, "kube-apiserver")
        t0 = time.monotonic()
        os.kill(apiserver, signal.SIGKILL)
        time.sleep(GAP_S)
        supervise.release(plane.dir, "kube-apiserver")
        kube.wait_for(lambda: answering(lambda: plane.kubectl(
            "get", "--raw", "/readyz", check=False, timeout=5).returncode == 0), 120,
            "the API server ready again", interval=0.5)
        down_s = time.monotonic() - t0
        kube.wait_for(lambda: all(plane_running(plane, c) and restarts(plane, c) > before[c]
                                  for c in CONTROLLERS), 400,
                      f"{', '.join(CONTROLLERS)} restarted by the supervisor", interval=2)
        back_s = time.monotonic() - t0
        out, err = finish(proc, 600)
    finally:
        supervise.release(plane.dir, "kube-apiserver")
        if proc.poll() is None:
            proc.kill()
        census.stop()
    total_s = time.monotonic() - t0
    assert proc.returncode == 0, err[-4000:]
    assert f"MPIJob {namespace}/{name}: Succeeded" in out
    gap = launcher_lines(err, r"watch: the API server does not answer")
    again = launcher_lines(err, r"watch: the API server answered again after")
    assert len(gap) == 1 and len(again) == 1, "\n".join(gap + again) or err[-3000:]
    assert not launcher_lines(err, r"retry \d+/\d+"), err[-3000:]  # no line per retry
    record = json.loads((tmp_path / "record.json").read_text())
    assert census.seen["MPIJob"] == {record["uid"]: name}, census.seen["MPIJob"]
    assert census.count("Pod", "launcher") == 1 and census.count("Pod", "worker") == 2, \
        census.seen["Pod"]
    assert census.count("Job") == 1, census.seen["Job"]
    restarted = {c: restarts(plane, c) - before[c] for c in CONTROLLERS}
    print(f"\nAPI server down {down_s:.1f} s (held {GAP_S} s); {', '.join(CONTROLLERS)} "
          f"running again after {back_s:.0f} s (restarts {restarted}); job done after "
          f"{total_s:.0f} s\n  {gap[0]}\n  {again[0]}")
    for line in launcher_lines(err, "nobody reconciles|reconciled again"):
        print(f"  {line}")


def plane_running(plane, name: str) -> bool:
    try:
        return supervise.alive(component_pid(plane, name))
    except (ValueError, OSError):
        return False


def test_mpi_operator_killed_and_kept_down_mid_run(supervised, api, namespace, horovod,
                                                   tmp_path):
    plane = supervised
    name = f"opkill-{uuid.uuid4().hex[:5]}"
    census = Census(api, namespace, MPIJOB_KINDS)
    census.start()
    proc = run_launcher(plane, sleeper(namespace, name, horovod, 210), tmp_path)
    try:
        ranks_up(api, namespace, name)
        # phase A: a crash, restarted by the supervisor after its backoff
        fresh(plane, "mpi-operator")
        before = restarts(plane, "mpi-operator")
        holder = plane.lease_holder("mpi-operator", "mpi-operator")
        t0 = time.monotonic()
        killed = component_pid(plane, "mpi-operator")
        os.kill(killed, signal.SIGKILL)
        kube.wait_for(lambda: restarts(plane, "mpi-operator") > before, 60,
                      "the supervisor to restart mpi-operator", interval=0.5)
        restarted_s = time.monotonic() - t0
        kube.wait_for(lambda: plane.lease_holder("mpi-operator", "mpi-operator") not in
                      ("", holder), 90, "the restarted mpi-operator to lead", interval=0.5)
        leads_s = time.monotonic() - t0
        # the launcher reads the Lease every 15 s: let it see the new leader renew
        time.sleep(stall.DEFAULT_LEASE_DURATION_S + 5)
        # phase B: down past 2 x its Lease duration, then started again
        supervise.hold(plane.dir, "mpi-operator")
        t1, down_at = time.monotonic(), time.time()
        os.kill(component_pid(plane, "mpi-operator"), signal.SIGKILL)
        time.sleep(OPERATOR_DOWN_S)
        supervise.release(plane.dir, "mpi-operator")
        up_at = time.time()
        out, err = finish(proc, 600)
    finally:
        supervise.release(plane.dir, "mpi-operator")
        if proc.poll() is None:
            proc.kill()
        census.stop()
    assert proc.returncode == 0, err[-4000:]
    assert f"MPIJob {namespace}/{name}: Succeeded" in out
    said = supervise.log_file(plane.dir).read_text().splitlines()
    # the first delay, the backoff being fresh ("exit status unknown" where the supervisor
    # was started again after the operator)
    [delay] = [int(m[1]) for ln in said if (m := re.search(
        rf"restarted mpi-operator \((?:killed by SIGKILL|exit status unknown), pid {killed}\), "
        r"restart \d+, after (\d+) s backoff", ln))]
    assert delay == supervise.INITIAL_S and delay <= restarted_s < delay + 5, \
        (delay, restarted_s)
    # phase B is past the bound, so told once and its end once; phase A may be too (its
    # outage lasts about the bound: the restart delay and the old Lease's 15 s)
    stalled = launcher_lines(err, r"MPIJob .*: nobody reconciles it")
    resumed = launcher_lines(err, r"MPIJob .*: reconciled again")
    assert 1 <= len(stalled) == len(resumed) <= 2, "\n".join(stalled + resumed) or err[-3000:]
    told = [logged_at(ln) for ln in stalled]
    assert any(down_at < t <= up_at for t in told), (down_at, up_at, stalled)
    assert any(logged_at(ln) > up_at for ln in resumed), (up_at, resumed)
    record = json.loads((tmp_path / "record.json").read_text())
    assert census.seen["MPIJob"] == {record["uid"]: name}, census.seen["MPIJob"]
    assert census.count("Pod", "launcher") == 1 and census.count("Pod", "worker") == 2, \
        census.seen["Pod"]
    assert census.count("Job") == 1, census.seen["Job"]
    print(f"\nmpi-operator SIGKILLed: restarted after {restarted_s:.1f} s, leading after "
          f"{leads_s:.1f} s; kept down {OPERATOR_DOWN_S} s from +{t1 - t0:.0f} s")
    for line in sorted(stalled + resumed):
        print(f"  {line}")


def test_trainer_and_jobset_killed_mid_run(supervised, tier2, trainer_runtime, api,
                                           namespace, horovod, tmp_path):
    plane = supervised
    name = f"tjkill-{uuid.uuid4().hex[:5]}"
    census = Census(api, namespace, TRAINJOB_KINDS)
    census.start()
    job = sleeper(namespace, name, horovod, 120, backend=backends.TRAINJOB)
    assert job["spec"]["runtimeRef"]["name"] == trainer_runtime
    proc = run_launcher(plane, job, tmp_path)
    try:
        ranks_up(api, namespace, name, backend=backends.TRAINJOB)
        fresh(plane, "trainer", "jobset")
        before = {c: restarts(plane, c) for c in ("trainer", "jobset")}
        t0 = time.monotonic()
        for c in ("trainer", "jobset"):
            os.kill(component_pid(plane, c), signal.SIGKILL)
        kube.wait_for(lambda: all(restarts(plane, c) > before[c] for c in before), 60,
                      "the supervisor to restart trainer and jobset", interval=0.5)
        restarted_s = time.monotonic() - t0
        out, err = finish(proc, 600)
    finally:
        if proc.poll() is None:
            proc.kill()
        census.stop()
    assert proc.returncode == 0, err[-4000:]
    assert f"TrainJob {namespace}/{name}: Succeeded" in out
    record = json.loads((tmp_path / "record.json").read_text())
    assert census.seen["TrainJob"] == {record["uid"]: name}, census.seen["TrainJob"]
    assert census.count("JobSet") == 1, census.seen["JobSet"]
    assert census.count("Job") == 2, census.seen["Job"]  # launcher and node
    assert census.count("Pod", "launcher") == 1 and census.count("Pod", "node") == 1, \
        census.seen["Pod"]
    print(f"\ntrainer and jobset SIGKILLed: restarted after {restarted_s:.1f} s; TrainJob "
          "Complete, each object once")
