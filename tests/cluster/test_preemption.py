"""Scenario: Kueue preempts a running MPIJob for a higher-priority one (marker ``chaos``;
tier 3, kwok GPU nodes). The component's launcher (kfp_gpu.mpi.launch.launcher.launch)
follows the low-priority job; it must say in one line that the job was suspended and what
it does next, keep waiting (the suspension is not counted against its pending budget), and
either see the job run again once the quota frees, or end with the pods' reason when they
do not run within ``pending_timeout_s`` after the re-admission. At no point after the
preemption settles does a job hold GPUs with fewer than all its GPU pods Running.

Upstream behaviour relied on (each cited in kfp_gpu/mpi/launch/preemption.py):
- kubernetes-sigs/kueue v0.19.2 pkg/scheduler/preemption/preemption.go: with
  ``preemption.withinClusterQueue: LowerPriority`` a pending Workload that does not fit
  evicts lower-priority admitted ones (Workload conditions ``Evicted`` reason ``Preempted``
  and ``Preempted`` reason ``InClusterQueue``); pkg/controller/jobframework/reconciler.go
  ``stopJob`` suspends the job and records Event ``Stopped`` with the preemption message;
  the Workload is requeued and admitted again when quota frees.
- pkg/controller/jobs/mpijob/mpijob_controller.go ``PriorityClass``: the Workload's
  priority comes from ``runPolicy.schedulingPolicy.priorityClass`` (the component's
  ``priority_class``).
- kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go: a suspended MPIJob's
  Worker pods are deleted (``cleanUpWorkerPods``) and its Launcher Job suspended (the Job
  controller deletes the Launcher pod); ``Suspended`` True, ``Running`` False.
"""

from __future__ import annotations

import logging
import time

import pytest

from kfp_gpu.mpi.launch.records import PendingTimeout
from testcluster import stages
from tests.cluster import gangs, jobs, kube, queues
from tests.cluster.figures import line as figures_line

pytestmark = pytest.mark.chaos

QUEUE = queues.QUEUE
#: Seconds Kueue and mpi-operator may take from the preemptor's creation until the
#: preempted job holds no pod (measured: see docs/reliability.md).
PREEMPTION_BOUND_S = 60


def _pods(api, ns: str, job: str) -> list[dict]:
    return [p for p in gangs.list_json(api, ns, "pods")
            if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name") == job]


def _running(api, ns: str, job: str) -> bool:
    return gangs.true_condition(jobs.mpijob(api, ns, job) or {}, "Running")


def _settled_gangs(api, ns: str) -> dict[str, str]:
    """:func:`tests.cluster.gangs.half_gangs` of the namespace now."""
    pods = gangs.list_json(api, ns, "pods")
    expected = {j["metadata"]["name"]: gangs.gpu_pods_expected(j)
                for j in gangs.list_json(api, ns, "mpijobs")}
    return gangs.half_gangs(pods, expected)


def _line(caplog, text: str) -> logging.LogRecord | None:
    return next((r for r in caplog.records if text in r.getMessage()), None)


@pytest.mark.parametrize("next_run", ["runs", "held"])
def test_a_preempted_job_is_reported_and_waits_within_its_pending_budget(
        kueue, api, namespace, tmp_path, caplog, next_run):
    """Quota for one job (2 GPUs), LowerPriority preemption. ``low`` (no priority class)
    runs; ``high`` (a PriorityClass of 1000) arrives and preempts it. ``runs``: once high
    has Succeeded, low is admitted again, runs and Succeeds, the launcher returns it.
    ``held``: low's Worker template is made never to become ready while it is suspended
    (kwok's pod-ready stage skips :data:`testcluster.stages.HOLD`), so after the
    re-admission its pods do not run; the launcher deletes it after ``pending_timeout_s``
    and ends with PendingTimeout, and no pod of it is left holding GPUs."""
    pending_s = 120 if next_run == "runs" else 30
    high_class = queues.create_priority_class(api, 1000)
    flavor, cq = queues.create_queues(api, namespace, gpus=2,
                                      preemption={"withinClusterQueue": "LowerPriority"})
    caplog.set_level(logging.INFO, logger="kfp_gpu")
    figures: dict[str, float] = {}
    try:
        low = jobs.Launch(api, jobs.component_job(namespace, "low", kueue_queue=QUEUE),
                          tmp_path / "low.json", pending_timeout_s=pending_s)
        low.start()
        kube.wait_for(lambda: _running(api, namespace, "low"), 120, "low Running")
        assert sum(gangs.holds_gpus(p) for p in _pods(api, namespace, "low")) == 2

        t0 = time.time()
        high = jobs.Launch(api, jobs.component_job(namespace, "high", kueue_queue=QUEUE,
                                                   priority_class=high_class),
                           tmp_path / "high.json")
        high.start()
        kube.wait_for(lambda: gangs.true_condition(jobs.mpijob(api, namespace, "low"),
                                                   "Suspended"), PREEMPTION_BOUND_S,
                      "low Suspended")
        figures["suspended_s"] = time.time() - t0
        kube.wait_for(lambda: not _pods(api, namespace, "low"), PREEMPTION_BOUND_S,
                      "low's pods gone")
        figures["released_s"] = time.time() - t0
        record = kube.wait_for(lambda: _line(caplog, "after it ran"), 30,
                               "the launcher's suspension line")
        figures["line_s"] = record.created - t0
        kube.wait_for(lambda: _running(api, namespace, "high"), 120, "high Running")
        figures["high_running_s"] = time.time() - t0

        # settled: low holds nothing, high holds all its GPU pods Running
        assert _settled_gangs(api, namespace) == {}
        held = {j: len(ps) for j, ps in gangs.holders(gangs.list_json(
            api, namespace, "pods")).items()}
        assert held == {"high": 2}, held
        wl = queues.workload_of(api, namespace, "low")
        conds = kube.conditions(wl)
        assert conds["Preempted"]["status"] == "True", conds
        assert conds["Preempted"]["reason"] == "InClusterQueue", conds["Preempted"]
        line = record.getMessage()
        assert line.startswith("MPIJob low: suspended by Kueue (Preempted to accommodate a "
                               "workload"), line
        assert "due to prioritization in the ClusterQueue" in line
        assert (f"waiting for Kueue to admit it again in queue {QUEUE} (not counted against "
                f"pending_timeout_s); once admitted, its pods have pending_timeout_s="
                f"{pending_s} s to run") in line
        assert [r for r in caplog.records if "after it ran" in r.getMessage()] == [record]
        assert low.is_alive(), low.error  # still waiting, within its budget

        if next_run == "held":
            kube.custom(api).patch_namespaced_custom_object(
                "kubeflow.org", "v2beta1", namespace, "mpijobs", "low",
                {"spec": {"mpiReplicaSpecs": {"Worker": {"template": {"metadata": {
                    "annotations": {stages.HOLD: "true"}}}}}}})
        jobs.end_launcher(api, namespace, "high", "succeed")  # kwok ends its pod 1 s on
        t1 = time.time()
        kube.wait_for(lambda: not gangs.suspended(jobs.mpijob(api, namespace, "low")), 90,
                      "low admitted again")
        figures["readmitted_s"] = time.time() - t1
        result, error = high.outcome()
        assert error is None and result.status == "Succeeded", error
        if next_run == "runs":
            kube.wait_for(lambda: _running(api, namespace, "low"), 120, "low Running again")
            figures["running_again_s"] = time.time() - t1
            assert _settled_gangs(api, namespace) == {}
            jobs.end_launcher(api, namespace, "low", "succeed")
            result, error = low.outcome()
            assert error is None and result.status == "Succeeded", error
        else:
            result, error = low.outcome(timeout=pending_s + 90)
            figures["ended_s"] = time.time() - t1
            assert isinstance(error, PendingTimeout), error
            assert f"not Running after {pending_s} s (pending_timeout_s)" in error.message
            kube.wait_for(lambda: jobs.mpijob(api, namespace, "low") is None, 60,
                          "low deleted")
            kube.wait_for(lambda: not _pods(api, namespace, "low"), 60, "low's pods gone")
            assert _settled_gangs(api, namespace) == {}
    finally:
        queues.delete_queues(api, flavor, cq)
        queues.delete_priority_class(api, high_class)
    print("\n" + figures_line(f"scenario 5 ({next_run}, pending_timeout_s={pending_s})",
                              figures))
