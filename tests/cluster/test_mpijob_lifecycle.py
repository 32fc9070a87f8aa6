"""(b, c, d, e, h) The component's MPIJob through the real mpi-operator v0.8.2, the real Job
controller, garbage collector and scheduler (Kubernetes v1.36.3), pods driven by kwok.

Upstream behaviour each test relies on:
- mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go: for an MPIJob it creates the
  Worker pods ``<name>-worker-<i>``, the headless Service ``<name>``, the ConfigMap
  ``<name>-config`` (hostfile, discover_hosts.sh), the Secret ``<name>-ssh`` and, under
  ``launcherCreationPolicy: WaitForWorkersReady``, the Launcher Job ``<name>-launcher``
  once every Worker is Ready (``newLauncherJob``, ``backoffLimit`` = runPolicy's); it
  copies the Job's conditions into the MPIJob's Succeeded/Failed (``updateMPIJobStatus``).
- kubernetes v1.36.3 pkg/controller/job/job_controller.go: a Job whose pod exits 0 is
  Complete; ``pastBackoffLimitOnFailure`` fails an OnFailure Job whose pod's restartCount
  reaches backoffLimit (reason BackoffLimitExceeded).
- pkg/controller/garbagecollector: a Foreground delete of the MPIJob removes every object
  whose ownerReference names it.
- pkg/scheduler/framework/plugins/noderesources/fit.go: a pod asking for more of an
  extended resource than
  any node has gets a FailedScheduling event ``0/N nodes are available: ... Insufficient
  nvidia.com/gpu``.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from kfp_gpu.mpi.launch.records import LaunchCancelled, MPIJobFailed, PendingTimeout
from kfp_gpu.mpi.local.reconcile import launcher_job_failed
from testcluster import stages
from tests.cluster import jobs, kube


def dependents(api, ns: str, name: str) -> dict[str, list[str]]:
    """What the operator made for MPIJob ``name``, by kind (names)."""
    from kubernetes import client

    core, batch = kube.core(api), client.BatchV1Api(api)
    sel = f"training.kubeflow.org/job-name={name}"
    return {
        "Job": [j.metadata.name for j in batch.list_namespaced_job(ns).items],
        "Pod": sorted(p.metadata.name for p in core.list_namespaced_pod(ns, label_selector=sel).items),
        "Service": [s.metadata.name for s in core.list_namespaced_service(ns).items],
        "ConfigMap": [c.metadata.name for c in core.list_namespaced_config_map(ns).items
                      if c.metadata.name.startswith(name)],
        "Secret": [s.metadata.name for s in core.list_namespaced_secret(ns).items
                   if s.metadata.name.startswith(name)],
    }


@pytest.mark.parametrize("outcome", ["succeed", "fail"])
def test_component_mpijob_end_to_end(plane, api, namespace, tmp_path, outcome):
    """(b) Succeeded, or Failed with the operator's reason from the Launcher Job."""
    name = "resnet-e2e"
    job = jobs.component_job(namespace, name, gpu="gpu:1", workers=2)
    run = jobs.Launch(api, job, tmp_path / "record.json")
    run.start()
    jobs.launcher_pod(api, namespace, name)
    made = dependents(api, namespace, name)
    assert made["Job"] == [f"{name}-launcher"]
    assert f"{name}-worker-0" in made["Pod"] and f"{name}-worker-1" in made["Pod"]
    assert made["Service"] == [name]
    assert made["ConfigMap"] == [f"{name}-config"] and made["Secret"] == [f"{name}-ssh"]
    hostfile = kube.core(api).read_namespaced_config_map(f"{name}-config", namespace).data
    assert hostfile["hostfile"].split("\n")[0].startswith(f"{name}-worker-0.{name}.{namespace}")

    jobs.end_launcher(api, namespace, name, outcome)
    result, error = run.outcome()
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["kind"] == "MPIJob" and record["name"] == name and record["uid"]
    if outcome == "succeed":
        assert error is None, error
        assert result.status == "Succeeded"
        assert kube.conditions(jobs.mpijob(api, namespace, name))["Succeeded"]["status"] == "True"
    else:
        assert isinstance(error, MPIJobFailed) and not isinstance(error, PendingTimeout)
        # mpi-operator updateMPIJobFailedStatus: reason from the Job's Failed condition
        assert error.reason == "BackoffLimitExceeded", str(error)
        assert "has reached the specified backoff limit" in error.message


def test_sigterm_deletes_the_mpijob_and_gc_removes_its_dependents(plane, api, namespace,
                                                                   tmp_path):
    """(c) SIGTERM to the launcher process: the MPIJob is deleted, the real garbage
    collector removes the Job, pods, Service, ConfigMap and Secret."""
    name = "resnet-cancel"
    job = jobs.component_job(namespace, name)
    proc = jobs.launcher_process(plane, job, tmp_path)
    jobs.launcher_pod(api, namespace, name)
    assert all(dependents(api, namespace, name).values())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert f"MPIJob {namespace}/{name} deleted" in err
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 60, "MPIJob gone")
    kube.wait_for(lambda: not any(dependents(api, namespace, name).values()), 60,
                  "the Job, pods, Service, ConfigMap and Secret gone")


def test_unschedulable_workers_time_out_with_the_schedulers_reason(plane, api, namespace,
                                                                  tmp_path):
    """(d) Workers asking for 64 GPUs (the most any fake node offers is 40: HAMi's vGPUs
    on a10-hami-01; a first try with 16 was placed there by the scheduler): the scheduler's
    FailedScheduling reaches the error in its own words; the job is deleted."""
    name = "resnet-pending"
    job = jobs.component_job(namespace, name, gpu="gpu:64", workers=2)
    run = jobs.Launch(api, job, tmp_path / "record.json", pending_timeout_s=15)
    run.start()
    _, error = run.outcome(timeout=120)
    assert isinstance(error, PendingTimeout), error
    text = f"{error.reason}: {error.message}"
    assert "Insufficient nvidia.com/gpu" in text, text
    assert "nodes are available" in text, text
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 60, "MPIJob deleted")


def test_the_same_run_twice_creates_one_mpijob(plane, api, namespace, tmp_path):
    """(e) A retried task (same deterministic name) gets 409 and attaches."""
    name = "resnet-retry"
    job = jobs.component_job(namespace, name)
    first = jobs.Launch(api, job, tmp_path / "first.json")
    first.start()
    jobs.launcher_pod(api, namespace, name)
    second = jobs.Launch(api, job, tmp_path / "second.json")
    second.start()
    kube.wait_for(lambda: (tmp_path / "second.json").exists(), 30, "second attempt's record")
    jobs.end_launcher(api, namespace, name, "succeed")
    (r1, e1), (r2, e2) = first.outcome(), second.outcome()
    assert e1 is None and e2 is None, (e1, e2)
    assert (r1.reattached, r2.reattached) == (False, True)
    uids = {json.loads((tmp_path / f).read_text())["uid"] for f in ("first.json", "second.json")}
    assert len(uids) == 1
    listed = kube.custom(api).list_namespaced_custom_object("kubeflow.org", "v2beta1",
                                                            namespace, "mpijobs")["items"]
    assert [j["metadata"]["name"] for j in listed] == [name]


@pytest.mark.parametrize("backoff_limit,restarts", [(3, 1), (2, 2), (1, 1)])
def test_launcher_restarts_count_as_the_local_runner_says(plane, api, namespace, tmp_path,
                                                          backoff_limit, restarts):
    """(h) restartPolicy OnFailure: ``restarts`` in-place restarts of the Launcher fail the
    Job exactly when kfp_gpu.mpi.local.reconcile.launcher_job_failed says so."""
    name = "resnet-restarts"
    job = jobs.component_job(namespace, name, backoff_limit=backoff_limit)
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"
    run = jobs.Launch(api, job, tmp_path / "record.json")
    run.start()
    pod = jobs.launcher_pod(api, namespace, name)
    kube.annotate_pod(api, namespace, pod.metadata.name, {stages.RESTARTS: str(restarts)})
    expected = launcher_job_failed("OnFailure", backoff_limit, restarts)
    if not expected:
        kube.wait_for(lambda: (kube.pods(api, namespace, f"job-name={name}-launcher")[0]
                               .status.container_statuses[0].restart_count == restarts),
                      30, "restart count reported")
        time.sleep(3)  # the Job controller has seen it; nothing may fail
        jobs.end_launcher(api, namespace, name, "succeed")
    result, error = run.outcome()
    if expected:
        assert isinstance(error, MPIJobFailed), (result, error)
        assert error.reason == "BackoffLimitExceeded"
    else:
        assert error is None and result.status == "Succeeded", error


def test_cancel_in_process_raises_launch_cancelled(plane, api, namespace, tmp_path):
    """(c) the in-process path: cancel() deletes first, then the error says so."""
    from kfp_gpu.kube import api_client
    from kfp_gpu.mpi.launch.launcher import Launcher

    name = "resnet-cancel2"
    job = jobs.component_job(namespace, name)
    lx = Launcher(api_client(str(plane.kubeconfig)), backoff=jobs.FAST)
    lx.create_or_attach(job, tmp_path / "record.json")
    jobs.launcher_pod(api, namespace, name)
    # cancel() ignores further SIGTERMs in the main thread (a launcher process exits right
    # after it); give pytest's disposition back, or every later test and child inherits
    # SIG_IGN (seen in CI: the launcher's SIGTERM test, the GCS emulator's terminate())
    previous = signal.getsignal(signal.SIGTERM)
    try:
        err = lx.cancel()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert signal.getsignal(signal.SIGTERM) is previous
    assert isinstance(err, LaunchCancelled) and name in str(err)
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 60, "MPIJob gone")
