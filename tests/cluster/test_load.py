"""Scenario: 20 pipelines' MPIJobs arrive at once on a plane whose Kueue ClusterQueue has
GPU quota for 4 of them (marker ``chaos``; tier 3, kwok GPU nodes). Each job is the
component's (train_resnet_horovod's builders: a Launcher and 2 Workers x 1 GPU), queued in
Kueue (``kueue_queue``), followed by the project's launcher
(kfp_gpu.mpi.launch.launcher.launch, one thread and one API client per pipeline, each
authenticated as the launcher's ServiceAccount with the project's Role, as in a pipeline
run, and with the component's defaults: 60 s watches, a look for the Launcher pod every
2 s, pending_timeout_s 600). kwok runs the pods: its pod-ready stage makes each pod Running
and testcluster/stages.py ends each Launcher pod (Succeeded) 5 s after it runs.

Asserted: every job ends Succeeded or is refused with a reason; none is still waiting
after :data:`BOUND_S` (no deadlock); at every sample (pods, then MPIJobs, every 0.5 s) no
more than 4 jobs are admitted and unfinished (Kueue admits whole Workloads against the
quota: kubernetes-sigs/kueue v0.19.2 pkg/scheduler/scheduler.go, flavorassigner), no job
holds GPUs while Kueue has not admitted it, and a job holding GPUs with fewer than all its
GPU pods Running is only ever seen for less than :data:`HALF_GANG_BOUND_S` (mpi-operator
v0.8.2 creates a job's Worker pods one by one in one sync, pkg/controller/
mpi_job_controller.go ``getOrCreateWorker``, and kube-scheduler binds them one by one: a
sample can fall between two of them, never for long). Measured: the makespan, each job's
wait (created -> admitted -> Running), and the API requests the launchers sent per
job-minute, from the API server's audit log (testcluster/audit.py: by the launcher's
ServiceAccount; /metrics' ``apiserver_request_total`` has no user or user-agent label).

The plane has no waitForPodsReady in its Kueue configuration (testcluster/kueue.py): gang
admission here is Kueue's quota reservation of the whole Workload.
"""

from __future__ import annotations

import statistics
import time

import pytest

from kfp_gpu.mpi.launch.records import MPIJobFailed
from kfp_gpu.mpi.launch.retry import DEFAULT_BACKOFF
from testcluster import audit, stages
from tests.cluster import gangs, jobs, queues
from tests.cluster.access import SA, install_rbac, sa_client
from tests.cluster.figures import line as figures_line

pytestmark = pytest.mark.chaos

N_JOBS = 20
QUOTA_JOBS = 4
WORKERS = 2  # x 1 GPU each
#: Seconds each Launcher pod runs (kwok ends it: testcluster/stages.py OUTCOME/AFTER).
RUN_S = 5
#: Every launcher must have ended by then (seconds from the first submission).
BOUND_S = 900
#: Longest a job may be seen holding GPUs with fewer than all its GPU pods Running.
HALF_GANG_BOUND_S = 10.0


def load_job(ns: str, i: int) -> dict:
    """The component's MPIJob ``load-<i>`` queued in :data:`queues.QUEUE`, its Launcher pod
    ended by kwok :data:`RUN_S` s after it runs."""
    job = jobs.component_job(ns, f"load-{i:02d}", workers=WORKERS, kueue_queue=queues.QUEUE)
    template = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    template.setdefault("metadata", {}).setdefault("annotations", {}).update(
        {stages.OUTCOME: "succeed", stages.AFTER: f"{RUN_S}s"})
    return job


class Timed(jobs.Launch):
    """A :class:`tests.cluster.jobs.Launch` that keeps when its ``launch`` began and
    ended (monotonic s)."""

    began = ended = 0.0

    def run(self):
        self.began = time.monotonic()
        try:
            super().run()
        finally:
            self.ended = time.monotonic()


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    return (f"min {min(values):.1f} / median {statistics.median(values):.1f} / "
            f"max {max(values):.1f}")


def test_twenty_pipelines_on_gpus_for_four(kueue, plane, api, namespace, tmp_path):
    log = audit.log_path(kueue)
    assert log is not None, (f"the plane in {kueue.dir} has no API audit log (brought up "
                             "before testcluster/audit.py): make cluster-down cluster-up")
    install_rbac(plane, namespace)
    sa_client(plane, namespace, tmp_path).close()  # writes tmp_path/sa-kubeconfig
    from kfp_gpu.kube import api_client

    clients = [api_client(str(tmp_path / "sa-kubeconfig")) for _ in range(N_JOBS)]
    flavor, cq = queues.create_queues(api, namespace, gpus=QUOTA_JOBS * WORKERS)
    sampler = gangs.Sampler(api, namespace)
    launches: list[Timed] = []
    try:
        _, offset = audit.read(log)
        sampler.start()
        launches = [Timed(c, load_job(namespace, i), tmp_path / f"load-{i:02d}.json",
                          backoff=DEFAULT_BACKOFF, watch_timeout_s=60, log_poll_s=2.0,
                          pending_timeout_s=600) for i, c in enumerate(clients)]
        t0 = time.monotonic()
        for run in launches:
            run.start()
        for run in launches:
            run.join(max(0.0, t0 + BOUND_S - time.monotonic()))
        stuck = [r.job["metadata"]["name"] for r in launches if r.is_alive()]
        sampler.stop()
        time.sleep(1.0)  # the audit log's last lines
        events, _ = audit.read(log, offset)
    finally:
        sampler.stop()
        queues.delete_queues(api, flavor, cq)
        for c in clients:
            c.close()
    for r in launches:
        if not r.is_alive():
            jobs.LIVE.discard(r)
    assert not stuck, f"still waiting after {BOUND_S} s (deadlock?): {stuck}"

    succeeded, refused, other = [], [], []
    for r in launches:
        name = r.job["metadata"]["name"]
        if r.result is not None and r.result.status == "Succeeded":
            succeeded.append(name)
        elif isinstance(r.error, MPIJobFailed) and r.error.reason and r.error.message:
            refused.append(f"{name}: {r.error.reason}: {r.error.message}")
        else:
            other.append(f"{name}: {r.error!r}")
    assert not other, other
    assert len(succeeded) + len(refused) == N_JOBS

    assert sampler.samples > 20 and len(sampler.errors) < sampler.samples / 10, \
        (sampler.samples, sampler.errors[:3])
    assert sampler.max_admitted <= QUOTA_JOBS, sampler.max_admitted
    assert sampler.held_while_suspended == [], sampler.held_while_suspended[:5]
    longest = sampler.longest_span()
    assert longest is None or longest.seconds < HALF_GANG_BOUND_S, longest

    user = f"system:serviceaccount:{namespace}:{SA}"
    sent = audit.requests_of(events, user)
    assert sent, f"no request of {user} in the audit log {log}"
    job_minutes = sum(r.ended - r.began for r in launches) / 60
    times = [sampler.times.get(r.job["metadata"]["name"], {}) for r in launches]
    queued = [t["admitted"] - t["created"] for t in times if {"admitted", "created"} <= set(t)]
    starting = [t["running"] - t["admitted"] for t in times if {"running", "admitted"} <= set(t)]
    makespan = max(r.ended for r in launches) - t0
    by_kind = audit.tally(sent)
    figures = {
        "jobs": N_JOBS, "succeeded": len(succeeded), "refused": len(refused),
        "makespan_s": makespan,
        "created->admitted_s": _spread(queued), "admitted->running_s": _spread(starting),
        "max_admitted": sampler.max_admitted, "max_gpus_held": sampler.max_gpus,
        "half_gang_samples": len(sampler.spans),
        "longest_half_gang_s": longest.seconds if longest else 0.0,
        "requests": len(sent), "job_minutes": job_minutes,
        "requests_per_job_minute": len(sent) / job_minutes,
        "requests_per_job": len(sent) / N_JOBS,
        "by_kind": "; ".join(f"{k} {n}" for k, n in by_kind.most_common()),
        "user_agents": sorted({e.get("userAgent", "") for e in sent.values()}),
    }
    print("\n" + figures_line("scenario 6", figures))
    for r, t in zip(launches, times, strict=True):
        rel = {k: round(v - t0, 1) for k, v in sorted(t.items(), key=lambda kv: kv[1])}
        print(f"  {r.job['metadata']['name']}: {rel} launch {r.ended - r.began:.1f} s")
    for text in refused:
        print(f"  refused {text}")
