"""(j) ``kueue_queue`` on the real Kueue (sigs.k8s.io/kueue v0.19.2, tier 3): the
component's MPIJob waits in its LocalQueue while another job holds the ClusterQueue's GPU
quota, the component says so, and the job runs once the quota frees.

Upstream behaviour each test relies on (sigs.k8s.io/kueue@v0.19.2 unless named):
- pkg/controller/constants/constants.go ``QueueLabel`` = ``kueue.x-k8s.io/queue-name``
  (what :data:`kfp_gpu.mpi.spec.crd.KUEUE_QUEUE_LABEL` cites).
- pkg/controller/jobs/mpijob/mpijob_webhook.go ``Default`` ->
  pkg/controller/jobframework/defaults.go ``ApplyDefaultForSuspend``: an MPIJob with the
  queue label is created with ``runPolicy.suspend: true`` (kfp_gpu.mpi.spec.options cites).
- pkg/controller/jobs/mpijob/mpijob_controller.go ``RunWithPodSetsInfo``: admission sets
  ``runPolicy.suspend`` false; a finished MPIJob releases its Workload's quota.
- pkg/scheduler/flavorassigner/flavorassigner.go: a Workload that does not fit stays
  ``QuotaReserved`` False with ``insufficient unused quota for <resource> in flavor <f>``.
- pkg/controller/core/workload_controller.go: a Workload whose LocalQueue is missing is
  not admitted (``LocalQueue <q> doesn't exist``).
- pkg/controller/jobs/trainjob/trainjob_controller.go (framework
  ``trainer.kubeflow.org/trainjob``): a queued TrainJob waits suspended and is admitted
  (``RunWithPodSetsInfo``) when its ClusterQueue gets quota.
- config/components/crd/patches/webhook_in_localqueues.yaml: LocalQueues convert to v1beta1
  through Kueue's ``/convert``.
- kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go: a suspended MPIJob
  gets its Launcher Job (suspended) and no Worker pods (what
  kfp_gpu.training.launcher_start's docstring relies on).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kfp_gpu.mpi.spec import backends
from tests.cluster import jobs, kube
from tests.cluster.access import SA, install_rbac
from tests.cluster.doctor_cli import doctor
from tests.cluster.queues import (
    GROUP,
    QUEUE,
    VERSION,
    cluster_queue_spec,
    create_queues,
    delete_queues,
    workload_of,
)


class Output(threading.Thread):
    """Collects a process's stderr lines as they come."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.lines = stream, []

    def run(self):
        for line in self.stream:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)


def test_kueue_defaults_suspend_for_a_job_with_the_queue_label(kueue, api, namespace):
    """Kueue's MPIJob webhook (mpijob_webhook.go Default -> ApplyDefaultForSuspend) suspends
    an MPIJob that carries ``kueue.x-k8s.io/queue-name``, even one created unsuspended: the
    label alone puts the job in the queue, as kfp_gpu.mpi.spec.options' docstring says."""
    job = jobs.component_job(namespace, "labelled", kueue_queue=QUEUE)
    assert job["spec"]["runPolicy"]["suspend"] is True  # what our builder writes
    del job["spec"]["runPolicy"]["suspend"]
    made = kube.custom(api).create_namespaced_custom_object("kubeflow.org", "v2beta1",
                                                           namespace, "mpijobs", job)
    assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == QUEUE
    assert made["spec"]["runPolicy"].get("suspend") is True, made["spec"]["runPolicy"]


def test_kueue_queue_waits_for_quota_then_runs(kueue, plane, api, namespace, tmp_path):
    """(j) Quota for 2 GPUs; the first job (2 Workers x 1 GPU) is admitted and runs; the
    second waits: Kueue keeps it suspended (its Workload short of nvidia.com/gpu), the
    operator made only its suspended Launcher Job, the component's output says "waiting for
    quota in queue q" and its pending timeout does not run meanwhile; when the first
    Succeeds its quota frees, Kueue admits the second and it Succeeds."""
    flavor, cq = create_queues(api, namespace, gpus=2)
    try:
        first = jobs.Launch(api, jobs.component_job(namespace, "first", kueue_queue=QUEUE),
                            tmp_path / "first.json")
        first.start()
        jobs.launcher_pod(api, namespace, "first")
        assert jobs.mpijob(api, namespace, "first")["spec"]["runPolicy"]["suspend"] is False

        pending_s = 20
        (tmp_path / "second").mkdir()
        second = jobs.component_job(namespace, "second", kueue_queue=QUEUE)
        proc = jobs.launcher_process(plane, second, tmp_path / "second",
                                     "--pending-timeout", str(pending_s))
        out = Output(proc.stderr)
        out.start()
        kube.wait_for(lambda: "waiting for quota in queue q" in out.text(), 60,
                      "the launcher's 'waiting for quota' line")
        wl = kube.wait_for(lambda: workload_of(api, namespace, "second"), 30, "Workload")
        reserved = kube.wait_for(lambda: kube.conditions(workload_of(
            api, namespace, "second")).get("QuotaReserved"), 30, "QuotaReserved condition")
        assert reserved["status"] == "False", reserved
        assert "insufficient unused quota for nvidia.com/gpu" in reserved["message"], reserved
        assert wl["spec"]["queueName"] == QUEUE
        assert kube.pods(api, namespace, "training.kubeflow.org/job-name=second") == []
        from kubernetes import client

        launcher_job = client.BatchV1Api(api).read_namespaced_job("second-launcher", namespace)
        assert launcher_job.spec.suspend is True
        time.sleep(pending_s + 5)  # longer than its pending timeout: not counted while queued
        assert proc.poll() is None, out.text()
        assert jobs.mpijob(api, namespace, "second")["spec"]["runPolicy"]["suspend"] is True

        jobs.end_launcher(api, namespace, "first", "succeed")
        result, error = first.outcome()
        assert error is None and result.status == "Succeeded", error
        jobs.launcher_pod(api, namespace, "second", timeout=90)
        assert jobs.mpijob(api, namespace, "second")["spec"]["runPolicy"]["suspend"] is False
        kube.wait_for(lambda: kube.conditions(workload_of(api, namespace, "second"))
                      .get("Admitted", {}).get("status") == "True", 30, "second admitted")
        jobs.end_launcher(api, namespace, "second", "succeed")
        proc.wait(timeout=120)
        out.join(10)
        assert proc.returncode == 0, out.text()
        assert kube.conditions(jobs.mpijob(api, namespace, "second"))["Succeeded"]["status"] \
            == "True"
    finally:
        delete_queues(api, flavor, cq)


@pytest.mark.parametrize("queue", ["absent"])
def test_a_job_in_a_missing_local_queue_is_never_admitted(kueue, api, namespace, queue):
    """No LocalQueue of that name: the Workload is not admitted and says why
    (workload_controller.go ``LocalQueue <q> doesn't exist``); the job stays suspended.
    This is the wait-forever case kfp-gpu doctor names (kfp_gpu.cluster.doctor.kueue)."""
    job = jobs.component_job(namespace, "lost", kueue_queue=queue)
    kube.custom(api).create_namespaced_custom_object("kubeflow.org", "v2beta1", namespace,
                                                    "mpijobs", job)
    reserved = kube.wait_for(lambda: kube.conditions(workload_of(api, namespace, "lost"))
                             .get("QuotaReserved"), 60, "Workload with QuotaReserved")
    assert reserved["status"] == "False"
    assert f"LocalQueue {queue} doesn't exist" in reserved["message"], reserved
    assert jobs.mpijob(api, namespace, "lost")["spec"]["runPolicy"]["suspend"] is True


def queued_pipeline_file(tmp_path) -> str:
    """A compiled pipeline whose train_resnet_horovod task queues in LocalQueue ``q``."""
    from tests.support.kueue_pipeline import queued_pipeline

    queued_pipeline(tmp_path / "queued.yaml", default=QUEUE, constant="")
    return str(tmp_path / "queued.yaml")


def test_doctor_finds_the_local_queue(kueue, plane, api, namespace, tmp_path):
    """(g, Kueue half) doctor --pipeline on a ``kueue_queue`` pipeline: Kueue's CRD served
    and LocalQueue q Active in the namespace (localqueue_controller.go sets ``Active``):
    nothing to fix."""
    flavor, cq = create_queues(api, namespace, gpus=2)
    try:
        install_rbac(plane, namespace)
        r = doctor(plane, "--namespace", namespace, "--service-account", SA, "--pipeline",
                   queued_pipeline_file(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "== Kueue LocalQueues" in r.stdout
        row = next(line for line in r.stdout.splitlines() if f"{namespace}/{QUEUE}" in line)
        assert cq in row and row.rstrip().endswith("active"), row
    finally:
        delete_queues(api, flavor, cq)


def test_doctor_names_a_missing_local_queue(kueue, plane, api, namespace, tmp_path):
    """The same pipeline in a namespace without LocalQueue q: exit 1, the problem names the
    queue and the namespace (Kueue would never admit the job:
    test_a_job_in_a_missing_local_queue_is_never_admitted)."""
    install_rbac(plane, namespace)
    r = doctor(plane, "--namespace", namespace, "--service-account", SA, "--pipeline",
               queued_pipeline_file(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    problems = [line for line in r.stdout.splitlines() if line.startswith("PROBLEM")]
    assert problems == [(f"PROBLEM: kueue_queue {QUEUE}: no LocalQueue {QUEUE} in namespace "
                        f"{namespace}; Kueue never admits a job queued there (it waits "
                        f"forever); create a LocalQueue {QUEUE} (kueue.x-k8s.io) pointing at "
                        "a ClusterQueue")], r.stdout


def test_a_queued_trainjob_runs_when_the_cluster_queue_gets_quota(kueue, tier2,
                                                                   trainer_runtime, api,
                                                                   namespace, tmp_path, caplog):
    """The trainjob backend with ``kueue_queue`` (Kueue's TrainJob integration,
    pkg/controller/jobs/trainjob/trainjob_controller.go, enabled as
    ``trainer.kubeflow.org/trainjob``): created with ``spec.suspend`` true, it waits while
    the ClusterQueue has no GPU quota ("waiting for quota in queue q"); once the quota is
    raised Kueue admits it (``RunWithPodSetsInfo`` clears ``suspend``), Trainer and JobSet
    run it and it Completes."""
    flavor, cq = create_queues(api, namespace, gpus=0)
    try:
        job = jobs.component_job(namespace, "tj-queued", workers=2, backend=backends.TRAINJOB,
                                 kueue_queue=QUEUE)
        assert job["spec"]["suspend"] is True
        with caplog.at_level(logging.INFO, logger="kfp_gpu"):
            run = jobs.Launch(api, job, tmp_path / "record.json")
            run.start()
            kube.wait_for(lambda: "waiting for quota in queue q (Kueue admits the TrainJob"
                          in caplog.text, 60, "the launcher's 'waiting for quota' line")
            reserved = kube.wait_for(lambda: kube.conditions(workload_of(
                api, namespace, "tj-queued")).get("QuotaReserved"), 60, "QuotaReserved")
            assert reserved["status"] == "False", reserved
            assert "nvidia.com/gpu" in reserved["message"], reserved
            kube.custom(api).patch_cluster_custom_object(
                GROUP, VERSION, "clusterqueues", cq,
                {"spec": cluster_queue_spec(namespace, flavor, 2)})
            jobs.launcher_pod(api, namespace, "tj-queued", backend=backends.TRAINJOB)
            tj = kube.get_custom(api, "trainer.kubeflow.org", "v1alpha1", namespace,
                                 "trainjobs", "tj-queued")
            assert tj["spec"]["suspend"] is False
            jobs.end_launcher(api, namespace, "tj-queued", "succeed", backend=backends.TRAINJOB)
            result, error = run.outcome()
        assert error is None and result.status == "Succeeded", error
    finally:
        delete_queues(api, flavor, cq)


def test_the_conversion_webhook_serves_v1beta1(kueue, api, namespace):
    """LocalQueue is stored as v1beta2 and served as v1beta1 too, through Kueue's conversion
    webhook (config/components/crd/patches/webhook_in_localqueues.yaml, here at
    https://127.0.0.1:<port>/convert): what doctor reads on a Kueue older than v0.15."""
    flavor, cq = create_queues(api, namespace, gpus=1)
    try:
        old = kube.get_custom(api, GROUP, "v1beta1", namespace, "localqueues", QUEUE)
        assert old["apiVersion"] == f"{GROUP}/v1beta1" and old["spec"]["clusterQueue"] == cq
    finally:
        delete_queues(api, flavor, cq)
