"""Stream the Launcher pod's log in a thread, keeping the last lines; read the job's events.

Launcher pods are found by the labels the MPI Operator sets
(``training.kubeflow.org/job-name=<name>``, ``training.kubeflow.org/job-role=launcher``,
:mod:`kfp_gpu.mpi.spec.crd`), or any other selector (a TrainJob's launcher pod: JobSet's labels,
:meth:`kfp_gpu.mpi.spec.backends.Backend.launcher_selector`). A Launcher re-created by its Job
is a new pod: each is followed in turn. A Launcher container restarted in place
(``restartPolicy: OnFailure``, a higher ``restartCount``) starts a new log: its lines are
told from the old ones by their timestamps (``timestamps=true``; kubelet CRI log lines
carry RFC 3339 nanosecond stamps), not by counting lines, so the new lines are all printed
and none of the old ones repeats.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Callable

from kfp_gpu.mpi.launch.jobs_api import raw_json
from kfp_gpu.mpi.launch.records import TERMINAL
from kfp_gpu.mpi.launch.retry import short
from kfp_gpu.mpi.spec import crd

log = logging.getLogger(__name__)


#: ``_request_timeout`` of the follow stream: (connect, read) s. A read timeout only
#: re-opens the stream (the cursor skips what was seen), so a half-open connection cannot
#: stall the log forever.
FOLLOW_TIMEOUT_S = (10, 300)


class _Cursor:
    """Where one pod's log was read up to: the last timestamp emitted and how many lines
    carried it (several lines may share one timestamp)."""

    def __init__(self) -> None:
        self.last, self.at_last, self.index = "", 0, 0

    def admit(self, raw: str) -> str | None:
        """The text of ``raw`` (``<RFC 3339 timestamp> <text>``, the kubelet's
        ``timestamps=true`` form) when it is past the cursor, else None. Call with every
        line of a stream, in order; a new stream must start with :meth:`restart`."""
        ts, sep, text = raw.partition(" ")
        if not sep or not ts[:4].isdigit():  # no timestamp: cannot dedupe, emit it
            return raw
        key = _sortable(ts)
        if key < self.last:
            return None
        if key == self.last:
            self.index += 1
            if self.index <= self.at_last:
                return None
            self.at_last = self.index
            return text
        self.last, self.at_last, self.index = key, 1, 1
        return text

    def restart(self) -> None:
        """A new stream begins: count lines at the last timestamp from zero again."""
        self.index = 0


def _sortable(ts: str) -> str:
    """An RFC 3339 UTC timestamp with its fraction padded to nanoseconds, so that string
    order is time order (``...:05Z`` and ``...:05.1Z`` -> ``...:05.000000000``...)."""
    base, _, frac = ts.rstrip("Z").partition(".")
    return f"{base}.{frac.ljust(9, '0')[:9]}"


class LauncherLogs:
    """Follows the launcher pod(s) of one MPIJob.

    Args:
        core: a ``kubernetes.client.CoreV1Api``.
        namespace, name: the MPIJob.
        sink: called with each log line.
        tail_lines: lines kept for errors/results.
        container: container name of the launcher pod (``"launcher"`` in
            :func:`kfp_gpu.mpi.spec.mpijob.launcher_template`; ``"node"`` in a TrainJob).
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
                for line in text.splitlines():  # never streamed: the user sees them now
                    self.tail.append(line)
                    self.sink(line)

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
        pods = raw_json(self.core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, _request_timeout=30,
            _preload_content=False))
        items = [p for p in pods.get("items") or []
                 if (p.get("status") or {}).get("phase") != "Pending"]
        return sorted(items, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))

    def _stream_pod(self, pname: str, seen: dict[str, _Cursor]) -> None:
        """Emit the lines of ``pname`` not emitted before: the stream is read with
        ``timestamps=true`` and a line counts as new when its timestamp is past the
        pod's :class:`_Cursor`. A re-opened stream (it dropped, or the read timed out)
        starts over and skips what was seen; after a container restart the new
        container's log starts over too, with later timestamps, so its lines are all
        new and none of the old ones repeats."""
        from kubernetes.watch.watch import iter_resp_lines

        resp = self.core.read_namespaced_pod_log(
            pname, self.namespace, container=self.container, follow=True, timestamps=True,
            _preload_content=False, _request_timeout=FOLLOW_TIMEOUT_S)
        self._resp = resp
        cursor = seen.setdefault(pname, _Cursor())
        cursor.restart()
        try:
            for raw in iter_resp_lines(resp):
                line = cursor.admit(raw)
                if line is not None:
                    self.tail.append(line)
                    self.sink(line)
        finally:
            self._resp = None
            resp.release_conn()

    def _follow(self) -> None:
        """Follow each launcher pod in turn; a stream that ends while its pod still runs
        (a drop, a read timeout, a container restart) is re-opened, skipping the lines
        already seen (:meth:`_stream_pod`)."""
        seen: dict[str, _Cursor] = {}
        finished: set[str] = set()
        while not self._done.is_set():
            pname = None
            # read before listing: a job that ends between the list and this check
            # (its pod still Pending or absent when listed) gets one more look
            finishing = self._finished.is_set()
            try:
                pods = [p for p in self._pods() if p["metadata"]["name"] not in finished]
                if not pods:
                    if finishing:
                        return
                    self._done.wait(self.poll_s)
                    continue
                pname = pods[0]["metadata"]["name"]
                self._stream_pod(pname, seen)
                pod = raw_json(self.core.read_namespaced_pod(
                    pname, self.namespace, _request_timeout=30, _preload_content=False))
                if (pod.get("status") or {}).get("phase", "") in TERMINAL:
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
