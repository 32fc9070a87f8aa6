"""The component's MPIJob on the real control plane: built by train_resnet_horovod's own
builders, launched by its launcher (:func:`kfp_gpu.mpi.launch.launcher.launch`) in a thread
or as the ``python -m kfp_gpu.mpi.launch.launcher`` process, driven by kwok stages."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import yaml

from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.launch import launcher
from kfp_gpu.mpi.spec import backends, crd
from testcluster import stages
from tests.cluster import kube

IMAGE = "ghcr.io/kfp-gpu/kfp-gpu-horovod:0.1.0"
FAST = launcher.Backoff(initial_s=0.2, factor=2.0, maximum_s=2.0, attempts=8)


def component_job(ns: str, name: str, *, gpu: str = "gpu:1", workers: int = 2,
                  backend=backends.MPIJOB, **policy) -> dict:
    """The job train_resnet_horovod builds (rt.job_options -> rt.build_job) for ``gpu`` per
    Worker; ``policy`` as :func:`run_training.policy_settings` keywords."""
    settings = dict(rt.cpu_worker_settings(), gpu=gpu, worker_cpu="1", worker_memory="1Gi")
    opts = rt.job_options(
        name=name, namespace=ns, image=IMAGE, args=("--mode", "benchmark"), workers=workers,
        settings=settings, rdma=False, rdma_resource="rdma/rdma_shared_device_a",
        multus_networks="", nccl_ib_hca="",
        nccl_net_gdr_level="", nccl_socket_ifname="", shm_size="1Gi", run_id="run-1",
        task_name="train-resnet-horovod", policy=rt.policy_settings(**policy))
    return rt.build_job(backend, opts, runtime_image=IMAGE)


#: Every Launch not yet stopped: the ``stop_launches`` fixture (tests/cluster/conftest.py)
#: ends those a test left running, so no follower outlives its test.
LIVE: set[Launch] = set()


class Launch(threading.Thread):
    """``launcher.launch(job, ...)`` in a thread; ``result`` or ``error`` when it ends."""

    def __init__(self, api, job: dict, record: Path, **kw):
        super().__init__(daemon=True)
        self.api, self.job, self.record = api, job, record
        LIVE.add(self)
        self.kw = {"backoff": FAST, "watch_timeout_s": 10, "log_poll_s": 0.5,
                   "handle_sigterm": False, "pending_timeout_s": 120, **kw}
        self.lines: list[str] = []
        self.result, self.error = None, None

    def run(self):
        try:
            self.result = launcher.launch(self.job, self.record, self.api,
                                          log_sink=self.lines.append, **self.kw)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def outcome(self, timeout: float = 120):
        self.join(timeout)
        assert not self.is_alive(), f"launch still running after {timeout} s"
        LIVE.discard(self)
        return self.result, self.error

    def stop(self, api, timeout: float = 60) -> bool:
        """Delete the job (as ``api``, the admin client: the Launch's own may lack the
        right) and wait for the thread: the launcher's watch sees DELETED and raises
        MPIJobFailed (kfp_gpu/mpi/launch/watch.py). True if the thread ended."""
        from kubernetes.client.exceptions import ApiException

        if self.is_alive():
            backend = backends.for_object(self.job)
            meta = self.job["metadata"]
            try:
                kube.custom(api).delete_namespaced_custom_object(
                    backend.group, backend.version, meta["namespace"], backend.plural,
                    meta["name"], propagation_policy="Foreground")
            except ApiException as e:
                if e.status != 404:
                    raise
            self.join(timeout)
        LIVE.discard(self)
        return not self.is_alive()


def launcher_process(plane, job: dict, tmp: Path, *extra: str) -> subprocess.Popen:
    """``python -m kfp_gpu.mpi.launch.launcher`` against the plane's kubeconfig."""
    (tmp / "job.yaml").write_text(yaml.safe_dump(job))
    return subprocess.Popen(
        [sys.executable, "-m", "kfp_gpu.mpi.launch.launcher", "--job", str(tmp / "job.yaml"),
         "--record", str(tmp / "record.json"), "--kubeconfig", str(plane.kubeconfig),
         "--watch-timeout", "10", "--backoff-initial", "0.2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def launcher_pod(api, ns: str, name: str, timeout: float = 90, backend=backends.MPIJOB):
    """The job's Launcher pod (an MPIJob's, or a TrainJob's ``launcher`` replicated job's),
    once the operator has created it."""
    sel = backend.launcher_selector(name)
    return kube.wait_for(lambda: (kube.pods(api, ns, sel) or [None])[0], timeout,
                         f"launcher pod of {ns}/{name}")


def worker_pods(api, ns: str, name: str) -> list:
    """The MPIJob's Worker pods (mpi-operator's job-name / job-role=worker labels)."""
    return kube.pods(api, ns, f"{crd.JOB_NAME_LABEL}={name},{crd.JOB_ROLE_LABEL}=worker")


def end_launcher(api, ns: str, name: str, outcome: str, after: str = "1s",
                 backend=backends.MPIJOB) -> None:
    """Tell kwok to end the Launcher pod: ``succeed`` (exit 0) or ``fail`` (exit 1).

    The MPIJob Launcher's ``restartPolicy`` is ``OnFailure`` (mpi-operator v0.8.2
    ``DefaultLauncherRestartPolicy``), so a kubelet never puts a failing Launcher pod in
    phase Failed: it restarts the container in place and the Job controller counts the
    restarts (``pastBackoffLimitOnFailure``). ``fail`` therefore reports one restart
    (:data:`testcluster.stages.RESTARTS`); a pod with ``restartPolicy: Never`` gets
    phase Failed (:data:`testcluster.stages.OUTCOME`)."""
    pod = launcher_pod(api, ns, name, backend=backend)
    if outcome == "fail" and pod.spec.restart_policy == "OnFailure":
        kube.annotate_pod(api, ns, pod.metadata.name, {stages.RESTARTS: "1"})
        return
    kube.annotate_pod(api, ns, pod.metadata.name, {stages.OUTCOME: outcome,
                                                   stages.AFTER: after})


def mpijob(api, ns: str, name: str) -> dict | None:
    return kube.get_custom(api, crd.GROUP, crd.VERSION, ns, crd.PLURAL, name)
