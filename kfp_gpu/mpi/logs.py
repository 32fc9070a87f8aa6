"""Stream the Launcher pod's log in a thread, keeping the last lines; read the job's events.

Launcher pods are found by the labels the MPI Operator sets
(``training.kubeflow.org/job-name=<name>``, ``training.kubeflow.org/job-role=launcher``,
:mod:`kfp_gpu.mpi.crd`), or any other selector (a TrainJob's launcher pod: JobSet's labels,
:meth:`kfp_gpu.mpi.backends.Backend.launcher_selector`). A restarted Launcher gets a new
pod: each is followed in turn.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Callable

from kfp_gpu.mpi import crd
from kfp_gpu.mpi.records import TERMINAL
from kfp_gpu.mpi.retry import short

log = logging.getLogger(__name__)


class LauncherLogs:
    """Follows the launcher pod(s) of one MPIJob.

    Args:
        core: a ``kubernetes.client.CoreV1Api``.
        namespace, name: the MPIJob.
        sink: called with each log line.
        tail_lines: lines kept for errors/results.
        container: container name of the launcher pod (``"launcher"`` in
            :func:`kfp_gpu.mpi.mpijob.launcher_template`; ``"node"`` in a TrainJob).
        poll_s: seconds between looks for the launcher pod.
        selector: label selector of the launcher pod(s); default the MPI Operator's.
    """

    def __init__(self, core, namespace: str, name: str, *, sink: Callable[[str], None],
                 tail_lines: int = 50, container: str = "launcher", poll_s: float = 2.0,
                 selector: str | None = None):
        self.core, self.namespace, self.name = core, namespace, name
        self.selector = selector or (
            f"{crd.JOB_NAME_LABEL}={name},{crd.JOB_ROLE_LABEL}=launcher")
        self.sink, self.container, self.poll_s = sink, container, poll_s
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._done = threading.Event()  # stop the log thread now
        self._finished = threading.Event()  # the job is terminal: stop after the last pod
        self._thread: threading.Thread | None = None
        self._resp = None

    def start(self) -> None:
        """Follow the launcher pod's log in a daemon thread (lines -> sink and tail)."""
        self._thread = threading.Thread(target=self._follow, name="launcher-log", daemon=True)
        self._thread.start()

    def abort(self) -> None:
        """Stop following now (cancellation), without draining."""
        self._done.set()

    def stop(self, grace_s: float = 10.0) -> list[str]:
        """Let the log stream drain (up to ``grace_s``), stop it, return the tail."""
        self._finished.set()
        if self._thread is not None:
            self._thread.join(grace_s)
            self._done.set()
            resp = self._resp
            if resp is not None:
                with contextlib.suppress(Exception):
                    resp.close()
            self._thread.join(2.0)
        self._done.set()
        if not self.tail:  # never attached (pod gone, or it finished before we looked)
            self._read_last_pod()
        return list(self.tail)

    def _read_last_pod(self) -> None:
        with contextlib.suppress(Exception):
            pods = self._pods()
            if pods:
                text = self.core.read_namespaced_pod_log(
                    pods[-1]["metadata"]["name"], self.namespace, container=self.container,
                    tail_lines=self.tail.maxlen, _request_timeout=30)
                self.tail.extend(text.splitlines())

    def events(self) -> list[str]:
        """``type reason: message`` of the Events about the MPIJob (best effort)."""
        with contextlib.suppress(Exception):
            evs = self.core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={self.name}",
                _request_timeout=30)
            return [f"{e.type} {e.reason}: {e.message}" for e in evs.items]
        return []

    def _pods(self) -> list[dict]:
        """Launcher pods of the job that can have logs (not Pending), oldest first."""
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector,
                                             _request_timeout=30)
        items = [p.to_dict() for p in pods.items]
        items = [p for p in items if (p.get("status") or {}).get("phase") != "Pending"]
        return sorted(items, key=lambda p: str(p["metadata"].get("creation_timestamp") or ""))

    def _stream_pod(self, pname: str, emitted: dict[str, int]) -> None:
        """Emit the lines of ``pname`` not emitted before (a re-opened stream starts over)."""
        from kubernetes.watch.watch import iter_resp_lines

        resp = self.core.read_namespaced_pod_log(
            pname, self.namespace, container=self.container, follow=True,
            _preload_content=False, _request_timeout=(10, None))
        self._resp = resp
        n = 0
        try:
            for line in iter_resp_lines(resp):
                n += 1
                if n > emitted.get(pname, 0):
                    emitted[pname] = n
                    self.tail.append(line)
                    self.sink(line)
        finally:
            self._resp = None
            resp.release_conn()

    def _follow(self) -> None:
        """Follow each launcher pod in turn; a stream that drops while its pod still runs
        is re-opened, skipping the lines already seen."""
        emitted: dict[str, int] = {}
        finished: set[str] = set()
        while not self._done.is_set():
            pname = None
            try:
                pods = [p for p in self._pods() if p["metadata"]["name"] not in finished]
                if not pods:
                    if self._finished.is_set():
                        return
                    self._done.wait(self.poll_s)
                    continue
                pname = pods[0]["metadata"]["name"]
                self._stream_pod(pname, emitted)
                pod = self.core.read_namespaced_pod(pname, self.namespace, _request_timeout=30)
                if (pod.status.phase or "") in TERMINAL:
                    finished.add(pname)
                else:
                    self._done.wait(0.2)
            except Exception as e:  # noqa: BLE001 - logs are best effort
                if self._done.is_set():
                    return
                if getattr(e, "status", None) == 404 and pname is not None:
                    finished.add(pname)
                log.debug("launcher log: %s", short(e))
                self._done.wait(self.poll_s)
