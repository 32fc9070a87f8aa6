"""The MPI Operator for the Kubernetes API double, played by the local MPIJob runner.

:class:`tests.doubles.k8s_api.FakeKube` calls ``controller.run(kube, ns, name)`` in a thread
when an MPIJob is created and ``controller.on_delete(kube, plural, ns, name)`` when one is
deleted. :class:`RunnerController` hands the stored MPIJob -- the exact object the component
POSTed -- to :class:`kfp_gpu.mpi.local.runner.LocalMPIJobRunner`, which runs Launcher and
Workers as containers; it copies the runner's status into the stored object (what the
operator's status update does), shows the Launcher container as the Launcher pod (labels
``training.kubeflow.org/job-name`` / ``job-role: launcher``, kubeflow/mpi-operator
``pkg/apis/kubeflow/v2beta1/constants.go``) with its output as the pod log, and on delete
removes the containers (what garbage collection of the MPIJob's dependents does).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping

from kfp_gpu.mpi.local import runner as local_runner

log = logging.getLogger(__name__)


class RunnerController:
    """Plays mpi-operator for the double with real containers.

    Args:
        client: ``docker.DockerClient``.
        pvc_dirs: claim name -> host folder (the runner's ``pvc_dirs``).
        ready_timeout_s: the runner's Worker readiness timeout.
    """

    plural = "mpijobs"

    def __init__(self, client, *, pvc_dirs: Mapping[str, str], ready_timeout_s: float = 180):
        self.client, self.pvc_dirs, self.ready_timeout_s = client, dict(pvc_dirs), ready_timeout_s
        self.runners: dict[tuple[str, str], local_runner.LocalMPIJobRunner] = {}
        self.statuses: list[dict] = []  # every status the runner published, in order
        self.errors: list[BaseException] = []
        self.deleted = threading.Event()
        self._pumped: dict[str, threading.Event] = {}  # launcher pod -> its log copied

    # ------------------------------------------------------------------ FakeKube hooks
    def run(self, kube, ns: str, name: str) -> None:
        job = kube.get_object(self.plural, ns, name)
        if job is None:
            return
        try:
            runner = local_runner.LocalMPIJobRunner(
                job, self.client, pvc_dirs=self.pvc_dirs, poll_s=0.3,
                ready_timeout_s=self.ready_timeout_s,
                on_status=lambda status: self._on_status(kube, ns, name, status))
            self.runners[(ns, name)] = runner
            runner.start()
            runner.wait()
        except Exception as exc:  # reported to the test (errors), not swallowed
            if not self.deleted.is_set():
                log.exception("local runner of %s/%s failed", ns, name)
                self.errors.append(exc)

    def on_delete(self, kube, plural: str, ns: str, name: str) -> None:
        """Remove the job's containers in the background (the API server answers the
        DELETE at once; the garbage collector removes dependents afterwards)."""
        runner = self.runners.get((ns, name))
        if plural != self.plural or runner is None:
            return

        def _gc() -> None:
            runner.delete()
            self.deleted.set()

        threading.Thread(target=_gc, daemon=True).start()

    # ------------------------------------------------------------------ status and pods
    def _on_status(self, kube, ns: str, name: str, status: dict) -> None:
        self.statuses.append(status)
        kube.replace_status(self.plural, ns, name, status)
        runner = self.runners.get((ns, name))
        if runner is None:
            return
        launchers = runner.containers("launcher")  # one look at the engine per update
        for container in launchers:
            if kube.get_object("pods", ns, container.name) is None:
                self._launcher_pod(kube, ns, name, container)
        finished = [c["type"] for c in status.get("conditions", [])
                    if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"]
        if finished:
            phase = "Succeeded" if finished[0] == "Succeeded" else "Failed"
        elif status.get("replicaStatuses", {}).get("Launcher", {}).get("active"):
            phase = "Running"
        else:
            return
        for container in launchers:
            if finished:  # the log follower stops at a terminal phase: copy the last lines
                self._pumped[container.name].wait(10)
            kube.set_pod_phase(ns, container.name, phase)

    def _launcher_pod(self, kube, ns: str, name: str, container) -> None:
        kube.create_pod(ns, container.name, {local_runner.JOB_NAME_LABEL: name,
                                             local_runner.JOB_ROLE_LABEL: "launcher"},
                        owner=name)

        done = self._pumped[container.name] = threading.Event()

        def _pump() -> None:
            with contextlib.suppress(Exception):  # the container may be removed meanwhile
                buf = b""
                for chunk in container.logs(stream=True, follow=True):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        kube.append_log(ns, container.name,
                                        line.decode("utf-8", "replace").rstrip("\r"))
                if buf:
                    kube.append_log(ns, container.name, buf.decode("utf-8", "replace"))
            done.set()

        threading.Thread(target=_pump, daemon=True).start()
