"""A local double of the Kubernetes API server for the MPIJob / TrainJob launcher tests.

Custom resources served (one table, :data:`tests.doubles.k8s_resources.SERVED`): MPIJobs
(``kubeflow.org/v2beta1``), TrainJobs (``trainer.kubeflow.org/v1alpha1``) and, read-only
and cluster-scoped, ClusterTrainingRuntimes. ``.../mpijobs`` below stands for any of them
(``/apis/<group>/<version>/namespaces/<ns>/<plural>``, or ``/apis/<group>/<version>/<plural>``
for a cluster-scoped one). With a status subresource (MPIJob, TrainJob), ``status`` is
dropped on create and ``PUT``/``PATCH`` (``application/merge-patch+json``) of
``.../<name>/status`` change only the status.

It speaks real HTTP (``http.server`` on 127.0.0.1, a random port, HTTP/1.1 with chunked
watch streams) with the semantics the launcher relies on. Each names the upstream file it
follows (kubernetes/kubernetes at the commit ``read_file`` served, ``@<commit>``; the
release line could not be told from the snapshot; K = kubernetes/kubernetes,
S = K ``staging/src/k8s.io``):

- ``POST .../mpijobs``: 201 with ``metadata.uid``/``resourceVersion``/``creationTimestamp``
  set; 409 ``AlreadyExists`` with a ``Status`` body when the name is taken
  (S ``apimachinery/pkg/api/errors/errors.go`` @030880a5 ``NewAlreadyExists``:
  ``<plural>.<group> "<name>" already exists``, details group/kind=resource/name).
- ``GET .../mpijobs/<name>``: 200 or 404 ``NotFound`` ``Status`` (same file,
  ``NewNotFound``: ``<plural>.<group> "<name>" not found``).
- ``GET .../mpijobs`` (LIST): ``metadata.resourceVersion`` of the list = the store's current
  resourceVersion; ``fieldSelector=metadata.name=X`` and equality ``labelSelector``.
- ``GET ...?watch=true``: a chunked stream of JSON lines ``{"type", "object"}``. Without
  ``resourceVersion`` (or ``"0"``) it starts with synthetic ``ADDED`` events for what
  exists; with one, it replays the events after it (S ``apiserver/pkg/storage/cacher/
  cacher.go`` @00319881 ``Watch`` over the watch cache). A ``resourceVersion`` older than
  the compaction floor gets ``{"type": "ERROR", "object": Status{code: 410, reason:
  Expired}}`` and the stream ends (S ``apiserver/pkg/storage/cacher/watch_cache.go``
  @00f3bd44: ``resourceVersion < oldest-1`` -> ``NewResourceExpired("too old resource
  version: %d (%d)")``; the floor here is ``oldest-1``). ``timeoutSeconds`` ends the stream.
- ``DELETE .../mpijobs/<name>``: the ``propagationPolicy`` (body ``DeleteOptions`` or query,
  S ``apiserver/pkg/endpoints/handlers/delete.go`` @02e16cb2) is recorded. ``Foreground``
  adds the finalizer ``foregroundDeletion`` and, the object having pending finalizers, a
  ``deletionTimestamp`` (``MODIFIED``); the object stays readable until the garbage
  collector has deleted its dependents whose owner reference has ``blockOwnerDeletion``
  and removed the finalizer (then ``DELETED``). ``Background`` removes it at once. See
  :meth:`FakeKube.delete_object` (S ``apiserver/pkg/registry/generic/registry/store.go``
  @0021a864 ``Delete``).
- Garbage collection (K ``pkg/controller/garbagecollector/garbagecollector.go`` and
  ``graph_builder.go`` @02830ed2; :meth:`FakeKube.collect_garbage`): an object whose
  ``ownerReferences`` name no existing owner (uids in its namespace or cluster-wide) is
  deleted shortly after -- when its last owner goes, and also right after it is created
  with a dangling owner (the collector checks new dependents too); the dependents of an
  owner deleted ``Foreground`` are deleted, and the owner waits for the blocking ones. A
  collected custom resource goes through the same DELETE path as a client's (its
  operator's ``on_delete``, its pods), recorded in ``deletes`` with ``"by":
  "garbage-collector"``; ``DELETE /api/v1/namespaces/<ns>/pods/<name>`` (and
  :meth:`FakeKube.delete_pod`) removes a pod, as Argo's pod GC or ``kubectl delete pod``
  (pods with finalizers linger with a ``deletionTimestamp``; grace periods are not
  modelled). Pods made by :meth:`FakeKube.create_pod` for an owner carry a controller
  reference with ``blockOwnerDeletion: true`` (S ``apimachinery/pkg/apis/meta/v1/
  controller_ref.go`` @0808fecc ``NewControllerRef``).
- ``PATCH .../mpijobs/<name>`` (``application/merge-patch+json``, RFC 7386): merged into
  the object (``status`` ignored), a ``MODIFIED`` event; any other patch type gets 415
  (S ``apiserver/pkg/endpoints/handlers/patch.go`` @00f75347; the double serves only the
  merge patch, upstream a custom resource also takes JSON patch and apply).
- ``GET /api/v1/namespaces/<ns>/pods`` with ``labelSelector``; ``GET .../pods/<name>``;
  ``GET .../pods/<name>/log`` (``tailLines``; ``timestamps=true`` prefixes each line with
  its RFC 3339 nanosecond stamp and a space; ``follow=true`` streams lines as the scripted
  controller appends them and ends when the container is no longer running -- terminated
  or restarted: :meth:`FakeKube.restart_container` bumps ``restartCount`` and starts a new
  log) (K ``pkg/kubelet/kuberuntime/logs/logs.go`` @04791b49: ``logWriter.write`` prefixes
  ``timeFormatOut`` = ``RFC3339NanoFixed`` and a space, ``tail``, ``waitLogs`` /
  ``isContainerRunning`` end a follow once the container is not running);
  pods carry any ``status`` a test sets (:meth:`FakeKube.set_pod_status`: Unschedulable
  conditions, waiting container reasons) and Events about them (``add_event``);
  ``GET /api/v1/namespaces/<ns>/events`` with ``fieldSelector=involvedObject.name=X``
  (K ``pkg/registry/core/event/strategy.go`` @00b2d95c ``EventToSelectableFields``).

Fault injection: :meth:`FakeKube.fail_next` (the next N matching requests get a 5xx
``Status``), :meth:`FakeKube.reset_next` (the connection is closed without a response),
:meth:`FakeKube.forbid` (matching requests get 403 from then on, as RBAC denies them),
:meth:`FakeKube.expire_watches` (other cluster activity advances the resourceVersion, the
history is compacted and open watches end, so resuming from the last seen version gets 410).

:class:`ScriptedController` plays the operator of the kind created
(:data:`tests.doubles.k8s_resources.OPERATORS`): for an MPIJob the MPI Operator (Created ->
Running -> Succeeded/Failed JobConditions, launcher pod labelled
``training.kubeflow.org/job-name`` / ``job-role: launcher``), for a TrainJob Kubeflow
Trainer on JobSet (``jobsStatus``, then Complete/Failed, launcher pod labelled
``jobset.sigs.k8s.io/jobset-name`` / ``replicatedjob-name: launcher``, container ``node``);
the launcher pod's log lines appear over time.

Usage::

    with FakeKube() as kube:
        kube.controller = ScriptedController(outcome="Succeeded", log=["step 1", ...])
        api = kube.api_client()          # kubernetes.client.ApiClient -> http://127.0.0.1:port
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from tests.doubles import k8s_fields
from tests.doubles.http import JsonHandler, LoopbackServer
from tests.doubles.k8s_resources import (
    OPERATORS,
    SERVED,
    ScriptedController,
    served,
    suspended,
)

__all__ = ["SERVED", "FakeKube", "ScriptedController", "status_body"]

APIS_PREFIX = "/apis/"
CORE_PREFIX = "/api/v1/namespaces/"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
MERGE_PATCH = "application/merge-patch+json"
#: metav1.FinalizerDeleteDependents (kubernetes/kubernetes
#: staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
FOREGROUND = "foregroundDeletion"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamp() -> str:
    """Now as the kubelet stamps log lines (RFC 3339, nanoseconds, UTC)."""
    ns = time.time_ns()
    base = dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{ns % 10**9:09d}Z"


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    """A ``meta/v1 Status`` failure body, as the API server sends with 4xx/5xx
    (kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go
    @030880a5 ``StatusError``)."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


@dataclass
class Request:
    """One request the double received (after fault injection was decided)."""

    method: str
    path: str
    query: dict
    status: int = 0
    body: dict | None = None
    authorization: str = ""  # the Authorization header (``Bearer <token>``)


@dataclass
class _Fault:
    remaining: int
    status: int
    method: str | None
    path_contains: str | None
    reset: bool = False
    reason: str = "InternalError"

    def matches(self, method: str, path: str) -> bool:
        return (self.remaining > 0 and (self.method is None or self.method == method)
                and (self.path_contains is None or self.path_contains in path))


class FakeKube:
    """The double: an in-memory object store behind a threading HTTP server."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._rv = 100
        self._floor = 0  # compaction floor: watches from an older resourceVersion get 410
        self._watch_epoch = 0
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, ns, name) -> object
        self.history: list[tuple[int, str, str, dict]] = []  # (rv, type, plural, object)
        self.logs: dict[tuple[str, str], list[str]] = {}
        self._log_epoch: dict[tuple[str, str], int] = {}  # container restarts per pod
        self.log_times: dict[tuple[str, str], list[str]] = {}  # RFC 3339 stamp per line
        self.requests: list[Request] = []
        self.deletes: list[dict] = []  # {"name", "namespace", "propagationPolicy"[, "by"]}
        self._gc_lock = threading.Lock()  # one garbage-collector pass at a time
        self.active_watches = 0
        self.watch_count = 0
        self.gone_sent = 0  # watch streams answered with a 410 ERROR event
        self._faults: list[_Fault] = []
        self.controller: ScriptedController | None = ScriptedController()
        self._server: LoopbackServer | None = None
        self.ca_file: str | None = None  # the CA api_client() trusts when serving HTTPS
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, bind: str = "127.0.0.1", tls: tuple[str, str] | None = None,
              ca_file: str | None = None) -> FakeKube:
        """Serve on ``bind`` (a free port); ``tls`` = (certfile, keyfile) serves HTTPS and
        ``ca_file`` is the CA that :meth:`api_client` then trusts."""
        self._server = LoopbackServer(_Handler, "kube", self, bind=bind, tls=tls)
        self.ca_file = ca_file
        return self

    def stop(self) -> None:
        with self._lock:
            self._watch_epoch += 1
            self._lock.notify_all()
        if self._server:
            self._server.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def host(self) -> str:
        assert self._server is not None, "start() first"
        return self._server.url

    def api_client(self):
        """A ``kubernetes.client.ApiClient`` pointed at this double."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.host
        if self.ca_file:
            cfg.ssl_ca_cert = self.ca_file
        return client.ApiClient(cfg)

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return self._server.port

    # ------------------------------------------------------------------ faults
    def fail_next(self, n: int, status: int = 500, method: str | None = None,
                  path_contains: str | None = None) -> None:
        """The next ``n`` matching requests get ``status`` with an ``InternalError`` body."""
        with self._lock:
            self._faults.append(_Fault(n, status, method, path_contains))

    def forbid(self, path_contains: str, method: str | None = None) -> None:
        """Every matching request gets 403 ``Forbidden`` from now on, as RBAC denies it
        (k8s.io/apiserver v0.36.3 pkg/endpoints/handlers/responsewriters/errors.go
        ``Forbidden``)."""
        with self._lock:
            self._faults.append(_Fault(10**9, 403, method, path_contains,
                                       reason="Forbidden"))

    def reset_next(self, n: int, method: str | None = None,
                   path_contains: str | None = None) -> None:
        """The next ``n`` matching requests see the connection closed, no response."""
        with self._lock:
            self._faults.append(_Fault(n, 0, method, path_contains, reset=True))

    def expire_watches(self) -> None:
        """Other writes advance the resourceVersion, history is compacted, watches end."""
        with self._lock:
            self._rv += 50
            self._floor = self._rv
            self.history = [h for h in self.history if h[0] > self._floor]
            self._watch_epoch += 1
            self._lock.notify_all()

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if f.matches(method, path):
                    f.remaining -= 1
                    return f
        return None

    # ------------------------------------------------------------------ store
    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _record(self, kind: str, plural: str, obj: dict) -> None:
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        self.history.append((rv, kind, plural, copy.deepcopy(obj)))
        self._lock.notify_all()

    def get_object(self, plural: str, ns: str, name: str) -> dict | None:
        with self._lock:
            obj = self.objects.get((plural, ns, name))
            return copy.deepcopy(obj) if obj else None

    def count(self, method: str, path_contains: str = "") -> int:
        """How many requests with ``method`` whose path contains ``path_contains``."""
        return sum(1 for r in list(self.requests)
                   if r.method == method and path_contains in r.path)

    def create_object(self, plural: str, ns: str, obj: dict) -> tuple[int, dict]:
        name = obj.get("metadata", {}).get("name", "")
        with self._lock:
            res = SERVED.get(plural)
            group = res.group if res else ""
            if (plural, ns, name) in self.objects:
                return 409, status_body(409, "AlreadyExists",
                                        f'{plural}.{group} "{name}" already exists',
                                        {"name": name, "group": group, "kind": plural})
            obj = copy.deepcopy(obj)
            if res is not None and res.status_subresource:
                obj.pop("status", None)  # the API server ignores status on create
            meta = obj.setdefault("metadata", {})
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
            if ns:
                meta["namespace"] = ns
            self.objects[(plural, ns, name)] = obj
            self._record("ADDED", plural, obj)
            out = copy.deepcopy(obj)
        if meta.get("ownerReferences"):
            self._collect_garbage_soon(ns)
        return 201, out

    def put_object(self, plural: str, ns: str, obj: dict) -> dict:
        """Store ``obj`` as if an admin had applied it (e.g. a ClusterTrainingRuntime, with
        ``ns=""``); no controller runs. Returns the stored copy."""
        code, out = self.create_object(plural, ns, obj)
        assert code == 201, out
        return out

    def renew_lease(self, ns: str, name: str, holder: str = "operator-0",
                    duration_s: int = 15) -> dict:
        """Make or renew Lease ``ns/name`` as a leader does (client-go v0.36.3
        tools/leaderelection/resourcelock/leaselock.go ``Update``: holderIdentity,
        leaseDurationSeconds, renewTime now, a MicroTime). Returns the stored copy."""
        ns_now = time.time_ns()
        micro = dt.datetime.fromtimestamp(ns_now // 10**9, dt.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S") + f".{ns_now // 1000 % 10**6:06d}Z"
        spec = {"holderIdentity": holder, "leaseDurationSeconds": duration_s,
                "renewTime": micro}
        with self._lock:
            obj = self.objects.get(("leases", ns, name))
            if obj is not None:
                obj["spec"] = spec
                self._record("MODIFIED", "leases", obj)
                return copy.deepcopy(obj)
        return self.put_object("leases", ns, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name}, "spec": spec})

    def set_condition(self, ns: str, name: str, ctype: str, reason: str, message: str,
                      running_false: bool = False, plural: str = "mpijobs",
                      truth: str = "True") -> None:
        """Add/refresh a condition (its status ``truth``, True unless given), as the operator's status
        update does: a v2beta1 ``JobCondition`` for MPIJobs, a ``metav1.Condition`` for
        TrainJobs. ``startTime`` is set with the first condition of a job that is not
        suspended (mpi-operator v0.8.2 ``mpi_job_controller.go``: ``StartTime == nil &&
        !isMPIJobSuspended``)."""
        job_shape = OPERATORS[plural].job_condition_shape
        with self._lock:
            obj = self.objects.get((plural, ns, name))
            if obj is None:
                return
            status = obj.setdefault("status", {})
            conds = status.setdefault("conditions", [])
            now = _now()
            stamps = ({"lastUpdateTime": now, "lastTransitionTime": now} if job_shape
                      else {"lastTransitionTime": now})
            for c in conds:
                if running_false and c["type"] == "Running":
                    c.update(status="False", **stamps)
            conds[:] = [c for c in conds if c["type"] != ctype]
            conds.append({"type": ctype, "status": truth, "reason": reason,
                          "message": message, **stamps})
            if job_shape and not suspended(obj):
                status.setdefault("startTime", now)
                if ctype in ("Succeeded", "Failed"):
                    status["completionTime"] = now
            self._record("MODIFIED", plural, obj)

    def replace_status(self, plural: str, ns: str, name: str, status: dict) -> None:
        """Replace the whole ``status`` (what an operator's status update PUTs)."""
        with self._lock:
            obj = self.objects.get((plural, ns, name))
            if obj is not None:
                obj["status"] = copy.deepcopy(status)
                self._record("MODIFIED", plural, obj)

    def set_jobs_status(self, ns: str, name: str, **counts: int) -> None:
        """TrainJob ``status.jobsStatus`` of its launcher job (JobSet ReplicatedJobStatus:
        ready/succeeded/failed/active/suspended), as the JobSet plugin copies it."""
        with self._lock:
            obj = self.objects.get(("trainjobs", ns, name))
            if obj is None:
                return
            entry = {"name": "launcher", "ready": 0, "succeeded": 0, "failed": 0,
                     "active": 0, "suspended": 0, **counts}
            obj.setdefault("status", {})["jobsStatus"] = [entry]
            self._record("MODIFIED", "trainjobs", obj)

    def create_pod(self, ns: str, name: str, labels: dict, owner: str = "",
                   container: str = "launcher", owner_plural: str = "mpijobs",
                   uid: str = "") -> None:
        """A pod (``uid``: the one a test needs, e.g. a component pod's ``KFP_POD_UID``),
        owned by the custom resource ``owner_plural/owner`` when ``owner`` is given."""
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns, "labels": dict(labels),
                            "uid": uid or str(uuid.uuid4()), "creationTimestamp": _now()},
               "spec": {"containers": [{"name": container, "image": "launcher"}]},
               "status": {"phase": "Pending"}}
        if owner:  # (for a TrainJob the chain is Pod -> Job -> JobSet -> TrainJob)
            res = SERVED[owner_plural]
            owner_obj = self.get_object(owner_plural, ns, owner) or {"metadata": {}}
            # metav1.NewControllerRef (kubernetes/kubernetes staging/src/k8s.io/apimachinery/
            # pkg/apis/meta/v1/controller_ref.go @0808fecc): controller and
            # blockOwnerDeletion both true, as the operators' pods (via their Jobs) carry.
            pod["metadata"]["ownerReferences"] = [{
                "apiVersion": res.api_version, "kind": res.kind, "name": owner,
                "uid": owner_obj["metadata"].get("uid", ""), "controller": True,
                "blockOwnerDeletion": True}]
        with self._lock:
            self.objects[("pods", ns, name)] = pod
            self.logs[(ns, name)] = []
            self.log_times[(ns, name)] = []
            self._record("ADDED", "pods", pod)

    def set_pod_status(self, ns: str, name: str, status: dict) -> None:
        """Replace the pod's ``status`` (API JSON: ``phase``, ``conditions``,
        ``containerStatuses``...), as the scheduler and the kubelet report it."""
        with self._lock:
            pod = self.objects.get(("pods", ns, name))
            if pod is not None:
                pod["status"] = copy.deepcopy(status)
                self._record("MODIFIED", "pods", pod)

    def delete_pod(self, ns: str, name: str) -> dict | None:
        """DELETE of pod ``ns/name``; returns it (None if there is none). Without
        ``metadata.finalizers`` it is removed at once (``DELETED``); with some it gets a
        ``deletionTimestamp`` and stays until :meth:`remove_finalizer` empties the list
        (kubernetes/kubernetes ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
        store.go`` @0021a864 ``Delete`` / ``updateForGracefulDeletionAndFinalizers``:
        "If there are pending finalizers, we never delete the object immediately").
        Deviation: the kubelet's graceful termination (gracePeriodSeconds) is not
        modelled; a pod goes as with ``--grace-period=0``. Its dependents are collected."""
        with self._lock:
            pod = self.objects.get(("pods", ns, name))
            if pod is None:
                return None
            if not self._mark_or_remove("pods", ns, name):
                return copy.deepcopy(pod)
        self._collect_garbage_soon(ns)
        return pod

    def _mark_or_remove(self, plural: str, ns: str, name: str) -> bool:
        """Under the lock: remove the object (``DELETED``, True) when it has no finalizers,
        else set its ``deletionTimestamp`` once (``MODIFIED``) and keep it (False).
        store.go @0021a864 ``Delete``: no pending finalizers and no grace period ->
        ``Storage.Delete`` at once; pending finalizers -> ``markAsDeleting``."""
        obj = self.objects[(plural, ns, name)]
        meta = obj["metadata"]
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = _now()
                meta["deletionGracePeriodSeconds"] = 0
                self._record("MODIFIED", plural, obj)
            return False
        del self.objects[(plural, ns, name)]
        self._record("DELETED", plural, obj)
        return True

    def add_finalizer(self, plural: str, ns: str, name: str, finalizer: str) -> None:
        """Add ``finalizer`` to the object (what a controller's update does; a test uses it
        to make a dependent whose deletion waits, like a pod the kubelet has not yet
        confirmed gone)."""
        with self._lock:
            obj = self.objects.get((plural, ns, name))
            if obj is not None and finalizer not in obj["metadata"].get("finalizers", []):
                obj["metadata"].setdefault("finalizers", []).append(finalizer)
                self._record("MODIFIED", plural, obj)

    def remove_finalizer(self, plural: str, ns: str, name: str, finalizer: str) -> None:
        """Remove ``finalizer`` (what its controller does when done); an object being
        deleted whose last finalizer goes is removed (store.go @0021a864: an update that
        leaves a deleting object without finalizers deletes it, ``ShouldDeleteDuringUpdate``
        / ``deleteWithoutFinalizers``)."""
        with self._lock:
            obj = self.objects.get((plural, ns, name))
            if obj is None or finalizer not in obj["metadata"].get("finalizers", []):
                return
            obj["metadata"]["finalizers"].remove(finalizer)
            if not obj["metadata"]["finalizers"]:
                del obj["metadata"]["finalizers"]
            if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get(
                    "finalizers"):
                del self.objects[(plural, ns, name)]
                self._record("DELETED", plural, obj)
            else:
                self._record("MODIFIED", plural, obj)
        self._collect_garbage_soon(ns)

    def _collect_garbage_soon(self, ns: str) -> None:
        def run():
            time.sleep(0.02)  # the collector works from its informers, a moment later
            self.collect_garbage(ns)
        threading.Thread(target=run, daemon=True).start()

    def collect_garbage(self, ns: str) -> list[tuple[str, str]]:
        """Passes of the garbage collector over namespace ``ns`` until nothing changes;
        returns the ``(plural, name)`` it deleted. Follows kubernetes/kubernetes
        ``pkg/controller/garbagecollector/garbagecollector.go`` @02830ed2:

        - ``attemptToDeleteItem``: a dependent's owner references are classified
          (``classifyReferences``): *solid* (the owner exists, not waiting for its
          dependents), *dangling* (no object with that uid in ``ns`` or cluster-wide),
          *waitingForDependentsDeletion* (the owner has a ``deletionTimestamp`` and the
          ``foregroundDeletion`` finalizer). With a solid owner the item stays (its
          dangling/waiting references are patched away); with a waiting owner and
          dependents of its own it is deleted ``Foreground``; otherwise it is deleted
          with the policy its finalizers imply (``foregroundDeletion`` -> Foreground,
          else Background).
        - ``graph_builder.go`` @02830ed2 ``processTransitions``: when an owner starts
          waiting for its dependents, *all* its dependents are queued for deletion.
        - ``processDeletingDependentsItem``: the owner keeps ``foregroundDeletion`` while
          any dependent whose reference to it has ``blockOwnerDeletion: true`` still
          exists (``blockingDependents``); then the finalizer is removed, and the API
          server removes the object (store.go @0021a864 ``deleteWithoutFinalizers``).
        A collected custom resource goes through :meth:`delete_object` (``by:
        garbage-collector``), a pod through :meth:`delete_pod`.
        """
        deleted: list[tuple[str, str]] = []
        with self._gc_lock:  # one collector: a dependent is deleted once
            for _ in range(20):
                actions = self._gc_plan(ns)
                if not actions:
                    break
                for action, plural, name, arg in actions:
                    if action == "delete" and plural == "pods":
                        self.delete_pod(ns, name)
                        deleted.append((plural, name))
                    elif action == "delete":
                        self.delete_object(plural, ns, name, arg, by="garbage-collector")
                        deleted.append((plural, name))
                    elif action == "unref":
                        with self._lock:
                            obj = self.objects.get((plural, ns, name))
                            if obj is not None:
                                obj["metadata"]["ownerReferences"] = [
                                    r for r in obj["metadata"]["ownerReferences"]
                                    if r.get("uid") not in arg]
                                self._record("MODIFIED", plural, obj)
                    else:  # "unblock": the owner's dependents are gone
                        self.remove_finalizer(plural, ns, name, FOREGROUND)
        return deleted

    def _gc_plan(self, ns: str) -> list[tuple[str, str, str, object]]:
        """One look at the store: what the collector would do now (see collect_garbage)."""
        with self._lock:
            by_uid = {o["metadata"].get("uid"): o for (_, n, _), o in self.objects.items()
                      if n in (ns, "")}

            def waiting(o: dict) -> bool:
                m = o["metadata"]
                return bool(m.get("deletionTimestamp")) and FOREGROUND in m.get(
                    "finalizers", [])

            def dependents(uid: str) -> list[tuple[tuple, dict]]:
                return [(k, o) for k, o in self.objects.items() if k[1] == ns and any(
                    r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))]

            actions: list[tuple[str, str, str, object]] = []
            for (plural, n, name), o in self.objects.items():
                refs = o["metadata"].get("ownerReferences") or []
                if n != ns or not refs or o["metadata"].get("deletionTimestamp"):
                    continue
                solid = [r for r in refs if r.get("uid") in by_uid
                         and not waiting(by_uid[r["uid"]])]
                gone = [r["uid"] for r in refs if r not in solid]
                if solid:
                    if gone:
                        actions.append(("unref", plural, name, gone))
                    continue
                has_waiting = any(r.get("uid") in by_uid for r in refs)
                own = dependents(o["metadata"].get("uid"))
                policy = ("Foreground" if (has_waiting and own) or FOREGROUND in
                          o["metadata"].get("finalizers", []) else "Background")
                actions.append(("delete", plural, name, policy))
            for (plural, n, name), o in self.objects.items():
                if n != ns or not waiting(o):
                    continue
                uid = o["metadata"].get("uid")
                blocking = [k for k, d in dependents(uid) if any(
                    r.get("uid") == uid and r.get("blockOwnerDeletion")
                    for r in d["metadata"].get("ownerReferences", []))]
                if not blocking:
                    actions.append(("unblock", plural, name, None))
            return actions

    def pod_uid(self, ns: str, name: str) -> str:
        """The uid the double gave pod ``ns/name`` (KeyError if there is none)."""
        with self._lock:
            return self.objects[("pods", ns, name)]["metadata"]["uid"]

    def set_pod_phase(self, ns: str, name: str, phase: str) -> None:
        with self._lock:
            pod = self.objects.get(("pods", ns, name))
            if pod is not None:
                pod["status"]["phase"] = phase
                self._record("MODIFIED", "pods", pod)

    def restart_container(self, ns: str, pod: str, lines: list[str] | None = None) -> None:
        """The pod's container restarts in place (kubelet, restartPolicy OnFailure): its
        ``restartCount`` goes up and its log starts over (``lines``, default empty), as
        ``GET .../log`` serves the current container's log."""
        with self._lock:
            obj = self.objects.get(("pods", ns, pod))
            if obj is None:
                return
            statuses = obj["status"].setdefault("containerStatuses", [
                {"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                 "restartCount": 0} for c in obj["spec"]["containers"]])
            for cs in statuses:
                cs["restartCount"] = cs.get("restartCount", 0) + 1
                cs["state"] = {"running": {"startedAt": _now()}}
                cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
            self.logs[(ns, pod)] = list(lines or [])
            self.log_times[(ns, pod)] = [_stamp() for _ in self.logs[(ns, pod)]]
            self._log_epoch[(ns, pod)] = self._log_epoch.get((ns, pod), 0) + 1
            self._record("MODIFIED", "pods", obj)

    def append_log(self, ns: str, pod: str, line: str) -> None:
        with self._lock:
            self.logs.setdefault((ns, pod), []).append(line)
            self.log_times.setdefault((ns, pod), []).append(_stamp())
            self._lock.notify_all()

    def add_event(self, ns: str, involved: str, etype: str, reason: str, message: str,
                  kind: str = "MPIJob") -> None:
        name = f"{involved}.{uuid.uuid4().hex[:8]}"
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": name, "namespace": ns},
              "involvedObject": {"kind": kind, "name": involved, "namespace": ns},
              "type": etype, "reason": reason, "message": message, "lastTimestamp": _now()}
        with self._lock:
            self.objects[("events", ns, name)] = ev
            self._record("ADDED", "events", ev)

    def delete_object(self, plural: str, ns: str, name: str, policy: str,
                      by: str = "") -> tuple[int, dict]:
        """DELETE of a served custom resource (``by``: who, when not an API client).

        kubernetes/kubernetes ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
        store.go`` @0021a864 ``Delete``, ``deletionFinalizersForGarbageCollection``,
        ``updateForGracefulDeletionAndFinalizers``; ``.../endpoints/handlers/delete.go``
        @02e16cb2 (200, the object in the body; 202 only for ``orphanDependents: false``):

        - ``Foreground``: the finalizer ``foregroundDeletion`` is added (once) and, as the
          object now has pending finalizers, it gets a ``deletionTimestamp`` and stays
          readable (``MODIFIED``); the garbage collector deletes its dependents and removes
          the finalizer once no ``blockOwnerDeletion`` dependent is left
          (:meth:`collect_garbage`), then the object is gone (``DELETED``).
        - ``Background`` (the default for custom resources): no finalizer is added; without
          other finalizers the object is removed at once (``DELETED``), the answer is a
          ``Status`` ``Success`` with details name/group/kind/uid (as kube-apiserver v1.36.3
          answers for a custom resource), and the collector takes its dependents
          afterwards.
        - An object that already has a ``deletionTimestamp`` is answered 200 as it is.
        The operator's ``on_delete`` (a controller that owns real resources) is told.
        """
        res = SERVED[plural]
        with self._lock:
            obj = self.objects.get((plural, ns, name))
            if obj is None:
                return 404, status_body(404, "NotFound",
                                        f'{plural}.{res.group} "{name}" not found',
                                        {"name": name, "group": res.group, "kind": plural})
            self.deletes.append({"name": name, "namespace": ns, "propagationPolicy": policy,
                                 **({"by": by} if by else {})})
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                return 200, copy.deepcopy(obj)
            if policy == "Foreground" and FOREGROUND not in meta.get("finalizers", []):
                meta.setdefault("finalizers", []).append(FOREGROUND)
            if self._mark_or_remove(plural, ns, name):
                # removed at once: the custom resource store answers a Success Status, not
                # the object (kube-apiserver v1.36.3, tests/cluster/test_fidelity.py)
                out = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Success", "details": {
                           "name": name, "group": res.group, "kind": plural,
                           "uid": meta.get("uid", "")}}
            else:
                out = copy.deepcopy(obj)
        on_delete = getattr(self.controller, "on_delete", None)
        if on_delete is not None:  # an operator that owns real resources (containers)
            on_delete(self, plural, ns, name)
        self._collect_garbage_soon(ns)
        return 200, out

    def list_objects(self, plural: str, ns: str, query: dict) -> list[dict]:
        with self._lock:
            items = [copy.deepcopy(o) for (p, n, _), o in self.objects.items()
                     if p == plural and n == ns]
        return [o for o in items if _selected(o, query)]

    # ------------------------------------------------------------------ HTTP side
    def start_controller(self, ns: str, name: str, plural: str = "mpijobs") -> None:
        ctl = self.controller
        if ctl is None or plural not in OPERATORS:
            return
        if ctl.plural != plural:  # one scripted outcome, played by this kind's operator
            ctl = dataclasses.replace(ctl, plural=plural)
        t = threading.Thread(target=ctl.run, args=(self, ns, name), daemon=True)
        t.start()
        self._threads.append(t)


def _flag(query: dict, name: str) -> bool:
    """A boolean query parameter, parsed like Go's strconv.ParseBool (``True``, ``true``, ``1``...)."""
    return query.get(name, ["false"])[0] in ("1", "t", "T", "true", "TRUE", "True")


def _merge_patch(target, patch):
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` deletes, the rest
    replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _selected(obj: dict, query: dict) -> bool:
    meta = obj.get("metadata", {})
    for sel in query.get("fieldSelector", []):
        for term in filter(None, sel.split(",")):
            key, _, value = term.partition("=")
            value = value.lstrip("=")
            if key == "metadata.name" and meta.get("name") != value:
                return False
            # Event field (pkg/registry/core/event/strategy.go @00b2d95c)
            if key == "involvedObject.name" and obj.get("involvedObject", {}).get("name") != value:
                return False
    labels = meta.get("labels", {})
    for sel in query.get("labelSelector", []):
        for term in filter(None, sel.split(",")):
            key, _, value = term.partition("=")
            if labels.get(key) != value.lstrip("="):
                return False
    return True


class _Handler(JsonHandler):
    kube: FakeKube

    # -- plumbing

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else {}

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        body = self._body() if method in ("POST", "DELETE", "PUT", "PATCH") else None
        req = Request(method, url.path, query, body=body,
                      authorization=self.headers.get("Authorization", ""))
        self.kube.requests.append(req)
        fault = self.kube._take_fault(method, url.path)
        if fault is not None:
            if fault.reset:
                req.status = -1
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            req.status = fault.status
            self.send_json(fault.status, status_body(
                fault.status, fault.reason, "Internal error occurred: injected fault"
                if fault.reason == "InternalError" else f"{method} {url.path} is forbidden"))
            return
        try:
            req.status = self._route(method, url.path, query, body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):  # client went away
            req.status = -2

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    # -- routes
    def _route(self, method: str, path: str, query: dict, body) -> int:
        if path.startswith(APIS_PREFIX):
            parts = path[len(APIS_PREFIX):].split("/")
            if len(parts) >= 3:
                group, version, rest = parts[0], parts[1], parts[2:]
                ns = ""
                if len(rest) >= 3 and rest[0] == "namespaces":
                    ns, rest = rest[1], rest[2:]
                res = served(group, version, rest[0])
                if res is not None and bool(ns) == res.namespaced and len(rest) <= 3:
                    name = rest[1] if len(rest) > 1 else ""
                    sub = rest[2] if len(rest) > 2 else ""
                    return self._custom(res.plural, method, ns, name, sub, query, body)
        if path.startswith(CORE_PREFIX):
            parts = path[len(CORE_PREFIX):].split("/")
            ns = parts[0]
            if len(parts) >= 2 and parts[1] in ("pods", "events") and method == "GET":
                plural = parts[1]
                if len(parts) == 2:
                    return self._list_or_watch(plural, ns, query)
                if plural == "pods" and len(parts) == 3:
                    return self._get("pods", ns, parts[2])
                if plural == "pods" and len(parts) == 4 and parts[3] == "log":
                    return self._log(ns, parts[2], query)
            if len(parts) == 3 and parts[1] == "pods" and method == "DELETE":
                pod = self.kube.delete_pod(ns, parts[2])
                if pod is None:
                    return self._fail(404, "NotFound", f'pods "{parts[2]}" not found')
                self.send_json(200, pod)
                return 200
        self.send_json(404, status_body(404, "NotFound", f"the server could not find {path}"))
        return 404

    def _fail(self, code: int, reason: str, message: str) -> int:
        self.send_json(code, status_body(code, reason, message))
        return code

    def _custom(self, plural: str, method: str, ns: str, name: str, sub: str, query: dict,
                body) -> int:
        """A served custom resource (:data:`SERVED`): collection, object or ``/status``."""
        res = SERVED[plural]
        writes = ("POST", "DELETE", "PUT", "PATCH")
        if (res.read_only and method in writes) or (sub and sub != "status") or (
                sub and not res.status_subresource):
            return self._fail(405, "MethodNotAllowed", f"{method} {plural}/{sub} not allowed")
        if method == "POST" and not name:
            if body.get("apiVersion") != res.api_version or body.get("kind") != res.kind:
                return self._fail(400, "BadRequest", "wrong apiVersion/kind")
            if body.get("metadata", {}).get("namespace", ns) != ns:
                return self._fail(400, "BadRequest",
                                  "the namespace of the object does not match the URL")
            unknown = k8s_fields.unknown(body)
            validation = query.get("fieldValidation", ["Warn"])[0]
            if unknown and validation == "Strict":
                return self._fail(400, "BadRequest", k8s_fields.strict_message(body, unknown))
            warnings = () if validation == "Ignore" else tuple(
                ("Warning", f'299 - "unknown field \\"{k8s_fields.dotted(p, k)}\\""')
                for p, k in unknown)
            code, out = self.kube.create_object(plural, ns, k8s_fields.pruned(body, unknown))
            self.send_json(code, out, warnings if code == 201 else ())
            if code == 201:
                self.kube.start_controller(ns, out["metadata"]["name"], plural)
            return code
        if method == "GET":
            return self._get(plural, ns, name) if name else self._list_or_watch(
                plural, ns, query)
        if method == "DELETE" and name and not sub:
            policy = (body or {}).get("propagationPolicy") or query.get(
                "propagationPolicy", ["Background"])[0]
            code, out = self.kube.delete_object(plural, ns, name, policy)
            self.send_json(code, out)
            return code
        if method in ("PUT", "PATCH") and sub == "status":
            return self._write_status(plural, ns, name, method, body)
        if method == "PATCH" and name and not sub:
            return self._patch(plural, ns, name, body)
        return self._fail(405, "MethodNotAllowed", method)

    def _patch(self, plural: str, ns: str, name: str, body) -> int:
        """``PATCH`` (JSON merge patch, RFC 7386) of the object; with a status subresource
        ``status`` in the patch is ignored, as the API server does."""
        patch = {k: v for k, v in (body if isinstance(body, dict) else {}).items()
                 if k != "status"}  # (a list: json-patch, refused with 415 in _modify)

        def change(obj: dict) -> None:
            new = _merge_patch(obj, patch)
            if "status" in obj:
                new["status"] = obj["status"]
            obj.clear()
            obj.update(new)

        return self._modify(plural, ns, name, "PATCH", change)

    def _write_status(self, plural: str, ns: str, name: str, method: str, body) -> int:
        """``PUT`` (replace) or ``PATCH`` (JSON merge patch, RFC 7386) of ``.status`` only;
        everything else in the body is ignored, as with a status subresource."""
        new = (body or {}).get("status") or {}

        def change(obj: dict) -> None:
            obj["status"] = (copy.deepcopy(new) if method == "PUT"
                             else _merge_patch(obj.get("status") or {}, new))

        return self._modify(plural, ns, name, method, change)

    def _modify(self, plural: str, ns: str, name: str, method: str, change) -> int:
        """Apply ``change(obj)`` to the stored object under the lock, record ``MODIFIED``
        and answer 200 with it; 404 when absent, 415 for a PATCH that is not a merge patch
        (the only patch type served)."""
        # kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go
        # @00f75347 PatchResource: the Content-Type (before any "; charset") must be one of
        # the resource's patch types, else NewUnsupportedMediaTypeError
        # (.../handlers/negotiation/errors.go @31982a38: 415, reason UnsupportedMediaType,
        # "the body of the request was in an unknown format - accepted media types
        # include: ..."). Deviation: a custom resource also accepts json-patch+json and
        # apply-patch+yaml upstream; the double serves merge-patch only, so it lists that.
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if method == "PATCH" and ctype != MERGE_PATCH:
            return self._fail(415, "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted "
                              f"media types include: {MERGE_PATCH}")
        kube = self.kube
        with kube._lock:
            obj = kube.objects.get((plural, ns, name))
            if obj is None:
                group = SERVED[plural].group
                self.send_json(404, status_body(404, "NotFound",
                                                f'{plural}.{group} "{name}" not found',
                                                {"name": name, "group": group, "kind": plural}))
                return 404
            change(obj)
            kube._record("MODIFIED", plural, obj)
            out = copy.deepcopy(obj)
        self.send_json(200, out)
        return 200

    def _get(self, plural: str, ns: str, name: str) -> int:
        obj = self.kube.get_object(plural, ns, name)
        if obj is None:  # NewNotFound: "<plural>.<group>" and details.group for a group's kind
            group = SERVED[plural].group if plural in SERVED else ""
            what = f"{plural}.{group}" if group else plural
            self.send_json(404, status_body(404, "NotFound", f'{what} "{name}" not found',
                                             {"name": name, **({"group": group} if group
                                                               else {}), "kind": plural}))
            return 404
        self.send_json(200, obj)
        return 200

    def _list_or_watch(self, plural: str, ns: str, query: dict) -> int:
        if _flag(query, "watch"):
            return self._watch(plural, ns, query)
        kube = self.kube
        with kube._lock:
            rv = kube._rv
        items = kube.list_objects(plural, ns, query)
        res = SERVED.get(plural)
        kind = f"{res.kind}List" if res else {"pods": "PodList", "events": "EventList"}[plural]
        api = res.api_version if res else "v1"
        self.send_json(200, {"apiVersion": api, "kind": kind,
                              "metadata": {"resourceVersion": str(rv)}, "items": items})
        return 200

    def _watch(self, plural: str, ns: str, query: dict) -> int:
        kube = self.kube
        timeout = float(query.get("timeoutSeconds", ["1800"])[0])
        deadline = time.monotonic() + timeout
        since = query.get("resourceVersion", [""])[0]
        self._start_chunked("application/json")
        with kube._lock:
            kube.active_watches += 1
            kube.watch_count += 1
            epoch = kube._watch_epoch
        try:
            if since in ("", "0"):  # synthetic ADDED for what exists (cacher.go @00319881)
                with kube._lock:
                    last = kube._rv
                for obj in kube.list_objects(plural, ns, query):
                    self._chunk(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
            else:
                last = int(since)
                with kube._lock:
                    too_old = last < kube._floor
                    floor = kube._floor
                if too_old:  # watch_cache.go @00f3bd44: rv < oldest-1 -> 410 Expired
                    with kube._lock:
                        kube.gone_sent += 1
                    err = status_body(410, "Expired",
                                      f"too old resource version: {last} ({floor})")
                    self._chunk(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
                    self._end_chunked()
                    return 200
            while True:
                with kube._lock:
                    pending = [h for h in kube.history if h[0] > last and h[2] == plural]
                    if not pending:
                        left = deadline - time.monotonic()
                        if left <= 0 or kube._watch_epoch != epoch:
                            break
                        kube._lock.wait(min(left, 0.25))
                        continue
                for rv, etype, _, obj in pending:
                    last = rv
                    if obj["metadata"].get("namespace", "") == ns and _selected(obj, query):
                        self._chunk(json.dumps({"type": etype, "object": obj}).encode() + b"\n")
            self._end_chunked()
        finally:
            with kube._lock:
                kube.active_watches -= 1
        return 200

    def _log(self, ns: str, pod: str, query: dict) -> int:
        kube = self.kube
        if kube.get_object("pods", ns, pod) is None:
            self.send_json(404, status_body(404, "NotFound", f'pods "{pod}" not found'))
            return 404
        follow = _flag(query, "follow")
        tail = query.get("tailLines", [None])[0]
        self._start_chunked("text/plain")
        stamped = _flag(query, "timestamps")

        def text(i: int, line: str) -> bytes:
            stamp = kube.log_times.get((ns, pod), [])
            return (f"{stamp[i]} " if stamped and i < len(stamp) else "").encode() + \
                line.encode() + b"\n"

        with kube._lock:
            lines = [text(i, ln) for i, ln in enumerate(kube.logs.get((ns, pod), []))]
            epoch = kube._log_epoch.get((ns, pod), 0)
        sent = len(lines)
        if tail is not None:
            lines = lines[-int(tail):] if int(tail) > 0 else []
        for line in lines:
            self._chunk(line)
        while follow:
            with kube._lock:
                all_lines = kube.logs.get((ns, pod), [])
                new = [text(i, ln) for i, ln in enumerate(all_lines) if i >= sent]
                pod_obj = kube.objects.get(("pods", ns, pod))
                done = pod_obj is None or pod_obj["status"]["phase"] in ("Succeeded", "Failed")
                if kube._log_epoch.get((ns, pod), 0) != epoch:
                    # the container restarted: this one is no longer running, so its
                    # stream ends (kubelet logs.go @04791b49 waitLogs/isContainerRunning)
                    break
                if not new:
                    if done:
                        break
                    kube._lock.wait(0.25)
                    continue
            for line in new:
                self._chunk(line)
            sent += len(new)
        self._end_chunked()
        return 200
