"""Launch an MPIJob and follow it to the end: the I/O side of distributed training.

After the remote-runner pattern of Google Cloud Pipeline Components (GCPC: a small
launcher container creates the remote job, records it in an output so that a retried or
resumed task finds it again, polls it to a terminal state and cancels it when the run is
cancelled), with the official ``kubernetes`` Python client:

1. **Create or re-attach**: if the record file of an earlier attempt exists and names an
   MPIJob that still exists, re-attach to it; else ``POST`` the MPIJob; ``409
   AlreadyExists`` (a previous attempt created it, names are deterministic per run and
   task, :func:`kfp_gpu.mpi.names.job_name`) -> ``GET`` it. Never a second create.
2. **Record first**: ``{"apiVersion", "kind", "namespace", "name", "uid"}`` is written
   atomically (:func:`kfp_gpu.storage.write_text`) before anything else happens.
3. **Watch** ``status.conditions`` (v2beta1 JobCondition types Created, Running,
   Restarting, Suspended, Succeeded, Failed) with LIST + WATCH from the list's
   ``resourceVersion``; a watch that ends (``timeoutSeconds``) resumes from the last seen
   version; ``410 Gone`` (history compacted) -> re-LIST for a fresh version; 5xx, 429 and
   connection errors -> retried with bounded exponential backoff (:class:`Backoff`).
4. **Stream the launcher pod's log** (pods labelled ``training.kubeflow.org/job-name=<name>``,
   ``training.kubeflow.org/job-role=launcher`` by the MPI Operator) in a thread, keeping
   the last lines.
5. **Cancel**: on SIGTERM (KFP cancels a run by deleting its pods) the MPIJob is deleted
   with ``propagationPolicy: Foreground`` and :class:`LaunchCancelled` is raised.
6. **Failed** -> :class:`MPIJobFailed` with the condition's reason/message and the last
   launcher log lines; **Succeeded** -> :class:`LaunchResult`.

Metrics/model helpers for the component (:func:`metrics_from_log`, :func:`kfp_metrics`,
:func:`scaling_efficiency`, :func:`fetch_model`) are pure or storage-only functions.

RBAC the launcher's service account needs in the namespace (see docs/distributed.md):
``mpijobs.kubeflow.org``: create, get, list, watch, delete; ``pods``: get, list, watch;
``pods/log``: get; ``events``: list.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kfp_gpu import storage
from kfp_gpu.mpi import crd

log = logging.getLogger(__name__)

TERMINAL = ("Succeeded", "Failed")
#: Exit status of :func:`main` after a SIGTERM (128 + 15, the shell convention).
EXIT_CANCELLED = 143


# ---------------------------------------------------------------- records and results
@dataclass(frozen=True)
class ResourceRecord:
    """What the launcher writes first: the Kubernetes identity of the MPIJob."""

    apiVersion: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, obj: Mapping) -> ResourceRecord:
        meta = obj.get("metadata", {})
        return cls(obj.get("apiVersion", crd.API_VERSION), obj.get("kind", crd.KIND),
                   meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: str | os.PathLike) -> ResourceRecord | None:
        """The record at ``path``, or ``None`` if there is none (or it is empty/garbled)."""
        p = Path(path)
        if not p.is_file() or p.stat().st_size == 0:
            return None
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            return cls(**{k: str(d[k]) for k in ("apiVersion", "kind", "namespace", "name",
                                                  "uid")})
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable resource record %s", path)
            return None


@dataclass
class LaunchResult:
    """A Succeeded MPIJob.

    Attributes:
        record: the MPIJob's identity.
        status: ``"Succeeded"``.
        conditions: the final ``status.conditions`` (list of JobCondition dicts).
        log_tail: the last launcher log lines (str, without newlines).
        reattached: True if an MPIJob of an earlier attempt was re-used.
    """

    record: ResourceRecord
    status: str
    conditions: list[dict]
    log_tail: list[str]
    reattached: bool = False


class MPIJobFailed(RuntimeError):
    """The MPIJob reached ``Failed`` (or vanished); carries reason, message and log tail."""

    def __init__(self, name: str, reason: str, message: str, log_tail: Sequence[str] = (),
                 events: Sequence[str] = ()):
        self.name, self.reason, self.message = name, reason, message
        self.log_tail, self.events = list(log_tail), list(events)
        text = f"MPIJob {name} failed: {reason}: {message}"
        if self.events:
            text += "\nevents:\n  " + "\n  ".join(self.events)
        if self.log_tail:
            text += f"\nlast {len(self.log_tail)} launcher log lines:\n  " + "\n  ".join(
                self.log_tail)
        super().__init__(text)


class LaunchCancelled(RuntimeError):
    """The run was cancelled (SIGTERM); the MPIJob was deleted."""


class _CancelSignal(BaseException):
    """Raised in the main thread by the SIGTERM handler."""


# ---------------------------------------------------------------- retry policy
@dataclass(frozen=True)
class Backoff:
    """Bounded exponential backoff for transient API errors.

    Delay before retry k (0-based): ``min(maximum_s, initial_s * factor**k)`` seconds; after
    ``attempts`` consecutive failures the last error is raised.
    """

    initial_s: float = 1.0
    factor: float = 2.0
    maximum_s: float = 30.0
    attempts: int = 8

    def delay(self, k: int) -> float:
        return min(self.maximum_s, self.initial_s * self.factor ** k)


#: Retries of the delete after SIGTERM: at most 0.5+1+2+4 = 7.5 s of waits, well inside
#: the default 30 s terminationGracePeriodSeconds.
CANCEL_BACKOFF = Backoff(initial_s=0.5, factor=2.0, maximum_s=4.0, attempts=5)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: HTTP 5xx/429 and connection-level failures."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(exc, ApiException):
        return exc.status is not None and (exc.status >= 500 or exc.status == 429
                                           or exc.status == 0)
    return isinstance(exc, (Urllib3Error, ConnectionError, TimeoutError))


# ---------------------------------------------------------------- status helpers
def condition(obj: Mapping, ctype: str) -> dict | None:
    """The ``status.conditions`` entry of type ``ctype`` with status ``"True"``, or None."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def phase(obj: Mapping) -> str:
    """The job's phase from its conditions: the terminal one if any, else the latest True
    one (Created/Running/Restarting/Suspended), else ``"Pending"``."""
    for t in TERMINAL:
        if condition(obj, t):
            return t
    conds = [c for c in (obj.get("status") or {}).get("conditions") or []
             if c.get("status") == "True"]
    return conds[-1]["type"] if conds else "Pending"


# ---------------------------------------------------------------- the launcher
class Launcher:
    """Create/re-attach, record, watch, stream logs, cancel. See the module docstring.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (see :func:`api_client`).
        backoff: retry policy for transient errors.
        watch_timeout_s: server-side ``timeoutSeconds`` of each WATCH request.
        log_sink: called with each launcher log line (default: print to stdout).
        tail_lines: launcher log lines kept for errors/results.
        launcher_container: container name of the launcher pod (``"launcher"`` in
            :func:`kfp_gpu.mpi.mpijob.launcher_template`).
        log_poll_s: seconds between looks for the launcher pod.
    """

    def __init__(self, api_client, *, backoff: Backoff = Backoff(),
                 watch_timeout_s: int = 60, log_sink: Callable[[str], None] | None = None,
                 tail_lines: int = 50, launcher_container: str = "launcher",
                 log_poll_s: float = 2.0, sleep: Callable[[float], None] = time.sleep):
        from kubernetes import client

        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.backoff = backoff
        self.watch_timeout_s = watch_timeout_s
        self.log_sink = log_sink or (lambda line: print(line, flush=True))
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self.launcher_container = launcher_container
        self.log_poll_s = log_poll_s
        self._sleep = sleep
        self._done = threading.Event()  # stop the log thread now
        self._finished = threading.Event()  # the job is terminal: stop after the last pod
        self._log_thread: threading.Thread | None = None
        self._log_resp = None
        self.namespace = ""
        self.name = ""
        #: seconds to wait for a Failed MPIJob to go before re-creating it (create_or_attach)
        self.replace_timeout_s = 120.0

    # -- retries
    def _call(self, what: str, fn: Callable, *args, **kwargs):
        """``fn(*args, **kwargs)`` retried on transient errors with :attr:`backoff`."""
        for k in range(self.backoff.attempts):
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                if not is_transient(e) or k == self.backoff.attempts - 1:
                    raise
                d = self.backoff.delay(k)
                log.warning("%s: transient error (%s); retry %d/%d in %.1fs", what,
                            _short(e), k + 1, self.backoff.attempts - 1, d)
                self._sleep(d)
        raise AssertionError("unreachable")

    # -- create or re-attach
    def _get(self, ns: str, name: str) -> dict | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self._call("get MPIJob", self.custom.get_namespaced_custom_object,
                              crd.GROUP, crd.VERSION, ns, crd.PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def create_or_attach(self, job: Mapping, record_path: str | os.PathLike
                         ) -> tuple[dict, bool]:
        """Return ``(mpijob object, reattached)`` and write the record to ``record_path``.

        An existing MPIJob (from the record or a 409) is re-attached unless it has Failed:
        then it is deleted (Foreground), and once gone ``job`` is created again
        (``reattached`` False), so that a retry of the task trains again.

        Raises:
            ValueError: ``job`` is not a ``kubeflow.org/v2beta1`` MPIJob with a name.
            TimeoutError: a Failed MPIJob did not go within ``replace_timeout_s``.
            kubernetes.client.exceptions.ApiException: non-transient API errors (403, 422...).
        """
        from kubernetes.client.exceptions import ApiException

        if job.get("apiVersion") != crd.API_VERSION or job.get("kind") != crd.KIND:
            raise ValueError(f"expected a {crd.API_VERSION} {crd.KIND}, got "
                             f"{job.get('apiVersion')} {job.get('kind')}")
        meta = job.get("metadata") or {}
        self.name, self.namespace = meta.get("name", ""), meta.get("namespace") or "default"
        if not self.name:
            raise ValueError("the MPIJob needs metadata.name (kfp_gpu.mpi.names.job_name)")

        obj, reattached = None, False
        previous = ResourceRecord.read(record_path)
        if previous is not None and previous.kind == crd.KIND:
            obj = self._get(previous.namespace, previous.name)
            if obj is not None:
                reattached = True
                self.name, self.namespace = previous.name, previous.namespace
                log.info("re-attaching to MPIJob %s/%s from the record of an earlier attempt",
                         self.namespace, self.name)
            else:
                log.info("MPIJob %s/%s of the earlier record is gone; creating a new one",
                         previous.namespace, previous.name)
        if obj is None:
            try:
                obj = self._call("create MPIJob", self.custom.create_namespaced_custom_object,
                                 crd.GROUP, crd.VERSION, self.namespace, crd.PLURAL,
                                 dict(job))
                log.info("created MPIJob %s/%s", self.namespace, self.name)
            except ApiException as e:
                if e.status != 409:
                    raise
                obj = self._get(self.namespace, self.name)
                if obj is None:  # deleted between our POST and GET: try once more
                    obj = self._call("create MPIJob",
                                     self.custom.create_namespaced_custom_object,
                                     crd.GROUP, crd.VERSION, self.namespace,
                                     crd.PLURAL, dict(job))
                else:
                    reattached = True
                    log.info("MPIJob %s/%s exists (409); re-attaching", self.namespace,
                             self.name)
        if reattached and phase(obj) == "Failed":
            # The name is deterministic per run and task and a finished MPIJob stays for
            # ttlSecondsAfterFinished: re-attaching to a Failed one would fail every retry.
            obj, reattached = self._replace_failed(job, meta), False
        storage.write_text(record_path, ResourceRecord.of(obj).to_json())
        return obj, reattached

    def _replace_failed(self, job: Mapping, meta: Mapping) -> dict:
        """Delete the Failed MPIJob ``self.name`` (Foreground), wait until it is gone (at
        most :attr:`replace_timeout_s`), then create ``job``.

        Raises:
            TimeoutError: the old MPIJob is still there after ``replace_timeout_s``.
        """
        log.warning("MPIJob %s/%s of an earlier attempt has Failed; deleting it and creating "
                    "a new one", self.namespace, self.name)
        self.delete()
        end = time.monotonic() + self.replace_timeout_s
        while self._get(self.namespace, self.name) is not None:
            if time.monotonic() >= end:
                raise TimeoutError(f"the Failed MPIJob {self.namespace}/{self.name} is still "
                                   f"there {self.replace_timeout_s:.0f}s after its delete")
            self._sleep(self.log_poll_s)
        self.name, self.namespace = meta["name"], meta.get("namespace") or "default"
        obj = self._call("create MPIJob", self.custom.create_namespaced_custom_object,
                         crd.GROUP, crd.VERSION, self.namespace, crd.PLURAL, dict(job))
        log.info("created MPIJob %s/%s in place of the Failed one", self.namespace, self.name)
        return obj

    # -- watch
    def _list(self) -> tuple[dict | None, str]:
        out = self._call("list MPIJobs", self.custom.list_namespaced_custom_object,
                         crd.GROUP, crd.VERSION, self.namespace, crd.PLURAL,
                         field_selector=f"metadata.name={self.name}")
        items = out.get("items") or []
        return (items[0] if items else None), out["metadata"]["resourceVersion"]

    def wait(self) -> dict:
        """Watch until the MPIJob is Succeeded or Failed; return its final object.

        Raises:
            MPIJobFailed: the MPIJob was deleted by someone else (reason ``Deleted``).
            kubernetes.client.exceptions.ApiException: non-transient errors, or transient
                ones persisting through :attr:`backoff`.
        """
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        rv: str | None = None
        failures = 0
        last_phase = ""
        while True:
            try:
                if rv is None:
                    obj, rv = self._list()
                    if obj is None:
                        raise MPIJobFailed(self.name, "Deleted",
                                           "the MPIJob no longer exists", list(self.tail))
                    last_phase = self._report(obj, last_phase)
                    if phase(obj) in TERMINAL:
                        return obj
                w = watch.Watch()
                for event in w.stream(self.custom.list_namespaced_custom_object,
                                      crd.GROUP, crd.VERSION, self.namespace,
                                      crd.PLURAL,
                                      field_selector=f"metadata.name={self.name}",
                                      resource_version=rv,
                                      timeout_seconds=self.watch_timeout_s,
                                      _request_timeout=(10, self.watch_timeout_s + 30)):
                    failures = 0
                    obj = event["raw_object"]
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if event["type"] == "DELETED":
                        raise MPIJobFailed(self.name, "Deleted",
                                           "the MPIJob was deleted while running",
                                           list(self.tail))
                    last_phase = self._report(obj, last_phase)
                    if phase(obj) in TERMINAL:
                        return obj
                failures = 0  # the watch timed out normally: resume from rv
            except ApiException as e:
                if e.status == 410:
                    log.info("watch expired (410 Gone); re-listing for a fresh resourceVersion")
                    rv = None
                    continue
                if not is_transient(e):
                    raise
                failures = self._transient(e, failures)
            except MPIJobFailed:
                raise
            except Exception as e:
                if not is_transient(e):
                    raise
                failures = self._transient(e, failures)

    def _transient(self, e: BaseException, failures: int) -> int:
        if failures >= self.backoff.attempts - 1:
            raise e
        d = self.backoff.delay(failures)
        log.warning("watch: transient error (%s); retry in %.1fs", _short(e), d)
        self._sleep(d)
        return failures + 1

    def _report(self, obj: Mapping, last: str) -> str:
        p = phase(obj)
        if p != last:
            c = condition(obj, p) or {}
            log.info("MPIJob %s: %s %s", self.name, p,
                     f"({c.get('reason', '')}: {c.get('message', '')})" if c else "")
        return p

    # -- logs
    def start_logs(self) -> None:
        """Follow the launcher pod's log in a daemon thread (lines -> sink and tail)."""
        self._log_thread = threading.Thread(target=self._follow_logs, name="launcher-log",
                                            daemon=True)
        self._log_thread.start()

    def _launcher_pods(self) -> list[dict]:
        """Launcher pods of the job that can have logs (not Pending), oldest first."""
        sel = f"{crd.JOB_NAME_LABEL}={self.name},{crd.JOB_ROLE_LABEL}=launcher"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=sel,
                                             _request_timeout=30)
        items = [p.to_dict() for p in pods.items]
        items = [p for p in items if (p.get("status") or {}).get("phase") != "Pending"]
        return sorted(items, key=lambda p: str(p["metadata"].get("creation_timestamp") or ""))

    def _follow_logs(self) -> None:
        """Follow each launcher pod in turn (a restarted Launcher gets a new pod); a stream
        that drops while its pod still runs is re-opened, skipping the lines already seen."""
        from kubernetes.watch.watch import iter_resp_lines

        emitted: dict[str, int] = {}
        finished: set[str] = set()
        while not self._done.is_set():
            try:
                pods = [p for p in self._launcher_pods()
                        if p["metadata"]["name"] not in finished]
                if not pods:
                    if self._finished.is_set():
                        return
                    self._done.wait(self.log_poll_s)
                    continue
                pname = pods[0]["metadata"]["name"]
                resp = self.core.read_namespaced_pod_log(
                    pname, self.namespace, container=self.launcher_container, follow=True,
                    _preload_content=False, _request_timeout=(10, None))
                self._log_resp = resp
                n = 0
                try:
                    for line in iter_resp_lines(resp):
                        n += 1
                        if n > emitted.get(pname, 0):
                            emitted[pname] = n
                            self.tail.append(line)
                            self.log_sink(line)
                finally:
                    self._log_resp = None
                    resp.release_conn()
                pod = self.core.read_namespaced_pod(pname, self.namespace, _request_timeout=30)
                if (pod.status.phase or "") in TERMINAL:
                    finished.add(pname)
                else:
                    self._done.wait(0.2)
            except Exception as e:  # noqa: BLE001 - logs are best effort
                if self._done.is_set():
                    return
                if getattr(e, "status", None) == 404 and "pname" in locals():
                    finished.add(pname)
                log.debug("launcher log: %s", _short(e))
                self._done.wait(self.log_poll_s)

    def stop_logs(self, grace_s: float = 10.0) -> list[str]:
        """Let the log stream drain (up to ``grace_s``), stop it, return the tail."""
        self._finished.set()
        if self._log_thread is not None:
            self._log_thread.join(grace_s)
            self._done.set()
            resp = self._log_resp
            if resp is not None:
                with contextlib.suppress(Exception):
                    resp.close()
            self._log_thread.join(2.0)
        self._done.set()
        if not self.tail:  # never attached (pod gone, or it finished before we looked)
            with contextlib.suppress(Exception):
                pods = self._launcher_pods()
                if pods:
                    text = self.core.read_namespaced_pod_log(
                        pods[-1]["metadata"]["name"], self.namespace,
                        container=self.launcher_container, tail_lines=self.tail.maxlen,
                        _request_timeout=30)
                    self.tail.extend(text.splitlines())
        return list(self.tail)

    def events(self) -> list[str]:
        """``reason: message`` of the Events about the MPIJob (best effort)."""
        with contextlib.suppress(Exception):
            evs = self.core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={self.name}",
                _request_timeout=30)
            return [f"{e.type} {e.reason}: {e.message}" for e in evs.items]
        return []

    # -- cancel
    def delete(self) -> None:
        """Delete the MPIJob with ``propagationPolicy: Foreground`` (404 is fine)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        if not self.name:
            return
        try:
            self._call("delete MPIJob", self.custom.delete_namespaced_custom_object,
                       crd.GROUP, crd.VERSION, self.namespace, crd.PLURAL, self.name,
                       body=client.V1DeleteOptions(propagation_policy="Foreground"))
            log.info("deleted MPIJob %s/%s (propagationPolicy Foreground)", self.namespace,
                     self.name)
        except ApiException as e:
            if e.status != 404:
                raise


@contextlib.contextmanager
def _sigterm_raises(enabled: bool) -> Iterator[None]:
    """While active, SIGTERM raises :class:`_CancelSignal` in the main thread."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _CancelSignal()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def launch(job: Mapping, record_path: str | os.PathLike, api=None, *,
           backoff: Backoff = Backoff(), watch_timeout_s: int = 60,
           log_sink: Callable[[str], None] | None = None, tail_lines: int = 50,
           handle_sigterm: bool = True, log_poll_s: float = 2.0) -> LaunchResult:
    """Run the MPIJob ``job`` (a dict from :func:`kfp_gpu.mpi.mpijob.build`) to completion.

    Args:
        job: the MPIJob (``metadata.name`` and ``metadata.namespace`` set).
        record_path: where the :class:`ResourceRecord` JSON goes (a KFP output path);
            read first to re-attach after a retry.
        api: a ``kubernetes.client.ApiClient``; default :func:`api_client`.
        backoff, watch_timeout_s, log_sink, tail_lines, log_poll_s: see :class:`Launcher`.
        handle_sigterm: install the SIGTERM -> delete handler (main thread only).

    Returns:
        :class:`LaunchResult` when the MPIJob Succeeded.

    Raises:
        MPIJobFailed: the MPIJob Failed (reason, message, events, last launcher log lines).
        LaunchCancelled: SIGTERM arrived; the MPIJob was deleted (Foreground).
        ValueError: ``job`` is not an MPIJob.
        kubernetes.client.exceptions.ApiException: non-transient API errors.
    """
    launcher = Launcher(api or api_client(), backoff=backoff, watch_timeout_s=watch_timeout_s,
                        log_sink=log_sink, tail_lines=tail_lines, log_poll_s=log_poll_s)
    meta = job.get("metadata") or {}
    launcher.name, launcher.namespace = meta.get("name", ""), meta.get("namespace") or "default"
    with _sigterm_raises(handle_sigterm):
        try:
            _, reattached = launcher.create_or_attach(job, record_path)
            launcher.start_logs()
            try:
                final = launcher.wait()
            except MPIJobFailed as e:
                raise MPIJobFailed(e.name, e.reason, e.message, launcher.stop_logs(),
                                   launcher.events()) from None
            tail = launcher.stop_logs()
        except _CancelSignal:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a 2nd SIGTERM: keep deleting
            log.warning("SIGTERM: the run was cancelled; deleting MPIJob %s/%s",
                        launcher.namespace, launcher.name)
            launcher._done.set()
            launcher.backoff = CANCEL_BACKOFF  # within the pod's 30 s grace period
            launcher.delete()
            raise LaunchCancelled(f"cancelled; MPIJob {launcher.namespace}/{launcher.name} "
                                  "deleted (propagationPolicy Foreground)") from None
    record = ResourceRecord.of(final)
    if phase(final) == "Failed":
        c = condition(final, "Failed") or {}
        raise MPIJobFailed(launcher.name, c.get("reason", "Failed"), c.get("message", ""),
                           tail, launcher.events())
    return LaunchResult(record=record, status="Succeeded",
                        conditions=list((final.get("status") or {}).get("conditions") or []),
                        log_tail=tail, reattached=reattached)


def api_client(kubeconfig: str | None = None):
    """A ``kubernetes.client.ApiClient``: in-cluster config inside a pod (the service
    account), else ``kubeconfig`` / ``$KUBECONFIG`` / ``~/.kube/config``."""
    from kubernetes import client, config

    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
        return client.ApiClient()
    return config.new_client_from_config(config_file=kubeconfig)


# ---------------------------------------------------------------- metrics and model
_METRICS_LINE = re.compile(r"METRICS (\{.*\})\s*$")


def metrics_from_log(lines: Sequence[str]) -> dict | None:
    """The trainer's final metrics from launcher log lines, or ``None``.

    The trainer (:mod:`kfp_gpu.training.horovod_train`, rank 0) prints one line
    ``METRICS {json}`` at the end (keys such as ``img_per_sec_per_gpu``,
    ``img_per_sec_total``, ``world_size``, ``ms_per_step``); mpirun may prefix it
    (``--tag-output``: ``[1,0]<stdout>:``). The last such line wins.
    """
    for line in reversed(list(lines)):
        m = _METRICS_LINE.search(line)
        if m:
            with contextlib.suppress(ValueError):
                out = json.loads(m.group(1))
                if isinstance(out, dict):
                    return out
    return None


def scaling_efficiency(img_per_sec_total: float, world_size: int,
                       single_img_per_sec: float) -> float:
    """Weak-scaling efficiency: ``total / (world_size * single)`` (1.0 = linear).

    Args:
        img_per_sec_total: images/sec of all ranks together.
        world_size: number of ranks (GPUs).
        single_img_per_sec: images/sec of one rank alone (same batch per GPU).

    Raises:
        ValueError: for a non-positive world size or baseline.
    """
    if world_size < 1 or single_img_per_sec <= 0:
        raise ValueError("world_size must be >= 1 and single_img_per_sec > 0")
    return float(img_per_sec_total) / (world_size * float(single_img_per_sec))


def kfp_metrics(metrics: Mapping, single_img_per_sec: float | None = None) -> dict[str, float]:
    """The scalar figures to log on a KFP ``Metrics`` artifact (name -> float).

    Keeps the numeric (non-bool) top-level values of the trainer's metrics; with a single-rank
    baseline it adds ``scaling_efficiency``. Example: ``for k, v in
    kfp_metrics(m).items(): metrics_artifact.log_metric(k, v)``.
    """
    out = {k: float(v) for k, v in metrics.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if single_img_per_sec and "img_per_sec_total" in out and out.get("world_size"):
        out["scaling_efficiency"] = scaling_efficiency(
            out["img_per_sec_total"], int(out["world_size"]), single_img_per_sec)
    return out


def fetch_model(source: str, dest: str | os.PathLike) -> list[str]:
    """Copy the trained model directory from where rank 0 wrote it to ``dest``.

    Args:
        source: ``gs://bucket/prefix`` (google-cloud-storage; honours
            ``STORAGE_EMULATOR_HOST``) or a local/shared-PVC directory path.
        dest: local directory (e.g. a KFP ``Model`` artifact's ``.path``); written atomically.

    Returns:
        The relative file names copied (sorted).

    Raises:
        FileNotFoundError: nothing at ``source``.
    """
    if not storage.is_gcs(source):
        src = Path(source)
        if not src.is_dir():
            raise FileNotFoundError(f"model directory not found: {source}")
        storage.upload(src, str(dest))
        return sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    bucket_name, prefix = storage.split_gcs(source.rstrip("/"))
    client = storage._client()
    blobs = [b for b in client.list_blobs(bucket_name, prefix=prefix.rstrip("/") + "/")
             if not b.name.endswith("/")]
    if not blobs:
        raise FileNotFoundError(f"model not found: {source}")
    names = []
    with storage.atomic_dir(dest) as tmp:
        for b in blobs:
            rel = b.name[len(prefix.rstrip("/")) + 1:]
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            b.download_to_filename(str(target))
            names.append(rel)
    return sorted(names)


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {getattr(e, 'status', '')} {getattr(e, 'reason', '') or e}"
    return text.strip()[:200]


# ---------------------------------------------------------------- command line
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kfp_gpu.mpi.launcher --job mpijob.yaml --record record.json [--kubeconfig F]``

    Exit status: 0 Succeeded, 1 Failed, :data:`EXIT_CANCELLED` after SIGTERM.
    """
    import argparse

    import yaml

    p = argparse.ArgumentParser(prog="kfp_gpu.mpi.launcher", description=main.__doc__)
    p.add_argument("--job", required=True, help="MPIJob YAML/JSON file")
    p.add_argument("--record", required=True, help="resource record output path")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--host", default=None, help="API server URL (no auth; tests)")
    p.add_argument("--watch-timeout", type=int, default=60)
    p.add_argument("--backoff-initial", type=float, default=1.0)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    job = yaml.safe_load(Path(a.job).read_text(encoding="utf-8"))
    if a.host:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = a.host
        api = client.ApiClient(cfg)
    else:
        api = api_client(a.kubeconfig)
    try:
        result = launch(job, a.record, api, watch_timeout_s=a.watch_timeout,
                        backoff=Backoff(initial_s=a.backoff_initial), log_poll_s=0.5)
    except LaunchCancelled as e:
        print(str(e), file=sys.stderr, flush=True)
        return EXIT_CANCELLED
    except MPIJobFailed as e:
        print(str(e), file=sys.stderr, flush=True)
        return 1
    print(f"MPIJob {result.record.namespace}/{result.record.name}: {result.status}", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
