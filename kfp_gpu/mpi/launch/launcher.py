"""Launch an MPIJob or a TrainJob and follow it to the end: the I/O side of distributed
training. The job's apiVersion/kind picks a :class:`kfp_gpu.mpi.spec.backends.Backend` (API
coordinates, terminal conditions, launcher pod selector and container); "MPIJob" below
stands for either (a TrainJob ends with ``Complete``/``Failed`` and its launcher pod is
found by JobSet's labels, container ``node``).

After the remote-runner pattern of Google Cloud Pipeline Components (GCPC: a small
launcher container creates the remote job, records it in an output so that a retried or
resumed task finds it again, polls it to a terminal state and cancels it when the run is
cancelled), with the official ``kubernetes`` Python client:

1. **Create or re-attach**: ``POST`` the MPIJob; ``409 AlreadyExists`` (a previous
   attempt created it: names are deterministic per run and task,
   :func:`kfp_gpu.mpi.spec.names.job_name`) -> ``GET`` it. Never a second create. That is
   the only re-attach path: a KFP retry runs in a new pod, which never sees a record an
   earlier attempt wrote (:mod:`~kfp_gpu.mpi.launch.attach`).
2. **Record**: ``{"apiVersion", "kind", "namespace", "name", "uid"}`` is written
   atomically (:func:`kfp_gpu.inputs.storage.write_text`) as the task's output, right after the
   create or attach and before the watch.
3. **Watch** ``status.conditions`` (v2beta1 JobCondition types Created, Running,
   Restarting, Suspended, Succeeded, Failed) with LIST + WATCH from the list's
   ``resourceVersion``; a watch that ends (``timeoutSeconds``) resumes from the last seen
   version; ``410 Gone`` (history compacted) -> re-LIST for a fresh version; 5xx, 429 and
   connection errors -> retried with bounded exponential backoff (:class:`~kfp_gpu.mpi.launch.retry.Backoff`).
4. **Stream the launcher pod's log** (pods labelled ``training.kubeflow.org/job-name=<name>``,
   ``training.kubeflow.org/job-role=launcher`` by the MPI Operator) in a thread, keeping
   the last lines.
5. **Pending timeout**: a job that is not Running after ``pending_timeout_s`` (Workers
   Unschedulable, ImagePullBackOff, ...) is deleted and fails with the pods' reason
   (:mod:`~kfp_gpu.mpi.launch.pending`). A job suspended after it ran (preempted by
   Kueue) is reported in one line and waited for; once admitted again its pods have the
   same budget (:mod:`~kfp_gpu.mpi.launch.preemption`).
6. **Owner**: the job is created with an ownerReference to the component's pod
   (:mod:`~kfp_gpu.mpi.launch.owner`), so garbage collection removes it if the launcher dies
   without cancelling.
7. **Cancel**: on SIGTERM (KFP's Terminate: Argo signals the running container, see
   :mod:`~kfp_gpu.mpi.launch.cancel`) the DELETE of the MPIJob (``propagationPolicy:
   Foreground``, a short request timeout) is the first request sent, before the log stream
   is stopped; then :class:`~kfp_gpu.mpi.launch.records.LaunchCancelled` is raised.
8. **Failed** -> :class:`~kfp_gpu.mpi.launch.records.MPIJobFailed` with the condition's reason/message and the last
   launcher log lines; **Succeeded** -> :class:`~kfp_gpu.mpi.launch.records.LaunchResult`.
9. **Nobody reconciles**: while waiting, a job whose status does not change while its
   operator's leader Lease is not renewed for twice the Lease's duration is told in one
   line, and its recovery in another (:mod:`~kfp_gpu.mpi.launch.stall`); the wait goes on.
10. **Node lost**: a pod deleted from a lost node ends the job: deleted, ``NodeLost``
   (:mod:`~kfp_gpu.mpi.launch.node_lost`: no operator fails it while the node is away).

Each step is its own module: :mod:`.attach` (1-2), :mod:`.watch` (3), :mod:`.logs` (4),
:mod:`.cancel` (5), over the request layer :mod:`.jobs_api` and :mod:`.retry`; records and
errors in :mod:`.records`, the trainer's figures in :mod:`.metrics`. This module composes
them (:func:`launch`) and is the ``python -m kfp_gpu.mpi.launch.launcher`` command.

RBAC the launcher's service account needs in the namespace: manifests/rbac/role.yaml, one
table with ``kfp_gpu.cluster.doctor.rbac.LAUNCHER_PERMISSIONS`` (tests/unit/test_launcher_rbac.py
keeps this list, the Role's rules, its comment and the table equal)::

    grants: mpijobs, trainjobs: create, delete, get, list, patch, watch; pods: get, list;
      pods/log: get; events: list; resourceclaimtemplates: create, delete, get, patch

(``patch``: a retry takes over the owner reference; ``pods`` get/list: the launcher pod's
log, the pending diagnosis, the owner's uid, the node check; ``events`` list: the pending diagnosis;
``resourceclaimtemplates`` (resource.k8s.io): a ``dra`` job's claim template, ``patch`` to
add a job to the owners of a template it shares.)
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from kfp_gpu.kube import api_client
from kfp_gpu.mpi.launch import attach, cancel, claims, node_lost, owner, pending, stall, watch
from kfp_gpu.mpi.launch.jobs_api import MPIJobClient
from kfp_gpu.mpi.launch.logs import LauncherLogs
from kfp_gpu.mpi.launch.records import (
    LaunchCancelled,
    LaunchResult,
    MPIJobFailed,
    PendingTimeout,
    ResourceRecord,
    condition,
    phase,
)
from kfp_gpu.mpi.launch.retry import DEFAULT_BACKOFF, Backoff
from kfp_gpu.mpi.spec import backends

log = logging.getLogger(__name__)

#: Exit status of :func:`main` after a SIGTERM (128 + 15, the shell convention).
EXIT_CANCELLED = 143


class Launcher:
    """One MPIJob's launcher: create/re-attach, watch, logs, cancel (see the module doc).

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (see :func:`kfp_gpu.kube.api_client`).
        backoff: retry policy for transient errors.
        watch_timeout_s: server-side ``timeoutSeconds`` of each WATCH request.
        log_sink: called with each launcher log line (default: print to stdout).
        tail_lines: launcher log lines kept for errors/results.
        launcher_container: container name of the launcher pod; default the backend's
            (``launcher``; ``node`` in a TrainJob).
        log_poll_s: seconds between looks for the launcher pod.
        replace_timeout_s: seconds to wait for a Failed MPIJob to go before re-creating it.
        backend: the job kind (:mod:`kfp_gpu.mpi.spec.backends`); default MPIJob.
        pending_timeout_s: seconds the job may take to reach Running before it is deleted
            and fails with the pods' reason (:mod:`kfp_gpu.mpi.launch.pending`); 0 = no limit.
        owner_pod: the component's pod (:func:`kfp_gpu.mpi.launch.owner.from_environment`); a
            job this launcher creates names it in ``ownerReferences``. None = no owner.
        operator_lease: the operator's leader Lease to check while waiting
            (:func:`kfp_gpu.mpi.launch.stall.lease_for`): ``"auto"`` (the backend's upstream
            one), ``"NAMESPACE/NAME"``, or ``"none"``.

    Raises:
        ValueError: ``operator_lease`` is none of those.

    Attributes:
        namespace, name: the MPIJob followed (set by :meth:`create_or_attach`; set them
            yourself to :meth:`delete` a known job).
    """

    def __init__(self, api_client, *, backoff: Backoff = DEFAULT_BACKOFF,
                 watch_timeout_s: int = 60, log_sink: Callable[[str], None] | None = None,
                 tail_lines: int = 50, launcher_container: str | None = None,
                 log_poll_s: float = 2.0, sleep: Callable[[float], None] = time.sleep,
                 replace_timeout_s: float = 120.0, backend: backends.Backend | None = None,
                 pending_timeout_s: float = pending.DEFAULT_TIMEOUT_S,
                 owner_pod: owner.OwnerPod | None = None, operator_lease: str = "auto"):
        self.backend = backend or backends.MPIJOB
        stall.lease_for(self.backend.name, operator_lease)  # a bad spec fails before anything
        self.operator_lease = operator_lease
        launcher_container = launcher_container or self.backend.launcher_container
        self.jobs = MPIJobClient(api_client, backoff, sleep, self.backend)
        self.watch_timeout_s = watch_timeout_s
        self.log_sink = log_sink or (lambda line: print(line, flush=True))
        self.tail_lines, self.launcher_container = tail_lines, launcher_container
        self.log_poll_s, self.replace_timeout_s = log_poll_s, replace_timeout_s
        self.namespace, self.name = "", ""
        self.logs: LauncherLogs | None = None
        self.pending_timeout_s, self.owner_pod = pending_timeout_s, owner_pod

    def create_or_attach(self, job: Mapping, record_path: str | os.PathLike
                         ) -> tuple[dict, bool]:
        """:func:`kfp_gpu.mpi.launch.attach.create_or_attach`; then follows the job it returns
        (switching to the backend of ``job``'s kind if it is not the one given). A ``dra``
        job's ResourceClaimTemplate is checked before and created after the job, owned by
        it (:mod:`kfp_gpu.mpi.launch.claims`); when it cannot be made, the job is deleted.

        Raises:
            kfp_gpu.mpi.launch.claims.ClaimTemplateFailed: the job's template could not be
                made; the job was deleted (one line).
            kfp_gpu.mpi.launch.claims.ClaimTemplateConflict: before any create, the
                template name holds another request.
        """
        self.namespace, self.name = attach.job_identity(job)
        backend = backends.for_object(job)
        if backend is not self.backend:
            if self.launcher_container == self.backend.launcher_container:
                self.launcher_container = backend.launcher_container
            self.backend = backend
            self.jobs = MPIJobClient(self.jobs.api_client, self.jobs.backoff, self.jobs.sleep,
                                     backend)
        pod = owner.resolve(self.jobs.core, self.owner_pod)
        job = owner.with_owner(job, pod)
        claims.check_before_create(self.jobs, job)  # dra: DRA served, the template name free
        obj, reattached = attach.create_or_attach(
            self.jobs, job, record_path, replace_timeout_s=self.replace_timeout_s,
            poll_s=self.log_poll_s)
        # owned by the job; when it cannot be made, the job is deleted (no orphan)
        claims.ensure_template_or_delete_job(self.jobs, obj, poll_s=self.log_poll_s)
        if reattached:
            obj = self._take_ownership(obj, pod)
        meta = obj.get("metadata") or {}
        self.namespace = meta.get("namespace") or self.namespace
        self.name = meta.get("name") or self.name
        return obj, reattached

    def _take_ownership(self, obj: dict, pod: owner.OwnerPod | None) -> dict:
        """Make this attempt's pod the owner of a re-attached job
        (:func:`kfp_gpu.mpi.launch.owner.handed_over`); a failed PATCH (e.g. 403: no ``patch`` in
        the Role) is logged and the job followed as it is."""
        refs = owner.handed_over(obj, pod)
        if refs is None:
            return obj
        meta = obj.get("metadata") or {}
        try:
            obj = self.jobs.set_owner_references(meta.get("namespace"), meta.get("name"), refs)
            log.info("%s %s/%s is now owned by pod %s", self.jobs.kind, meta.get("namespace"),
                     meta.get("name"), pod.name)
        except Exception as e:  # noqa: BLE001 - the owner is a backstop, never a failure
            log.warning("could not make pod %s the owner of %s %s (%s): if the earlier "
                        "attempt's pod is deleted, garbage collection deletes the job",
                        pod.name, self.jobs.kind, meta.get("name"),
                        getattr(e, "status", "") or e)
        return obj

    def start_logs(self) -> None:
        """Follow the launcher pod's log (:class:`kfp_gpu.mpi.launch.logs.LauncherLogs`)."""
        self.logs = LauncherLogs(self.jobs.core, self.namespace, self.name,
                                 sink=self.log_sink, tail_lines=self.tail_lines,
                                 container=self.launcher_container, poll_s=self.log_poll_s,
                                 selector=self.backend.launcher_selector(self.name))
        self.logs.start()

    def log_tail(self) -> list[str]:
        """The launcher log lines kept so far."""
        return list(self.logs.tail) if self.logs else []

    def stop_logs(self, grace_s: float = 10.0) -> list[str]:
        """Let the log stream drain (up to ``grace_s``), stop it, return the tail."""
        return self.logs.stop(grace_s) if self.logs else []

    def events(self) -> list[str]:
        """``type reason: message`` of the Events about the MPIJob (best effort)."""
        return self.logs.events() if self.logs else []

    def wait(self) -> dict:
        """:func:`kfp_gpu.mpi.launch.watch.wait_for_end` for the job followed, with a
        :class:`~kfp_gpu.mpi.launch.pending.PendingGuard` of ``pending_timeout_s``, a
        :class:`~kfp_gpu.mpi.launch.stall.StallNotice` on ``operator_lease`` and a
        :class:`~kfp_gpu.mpi.launch.node_lost.NodeLossGuard`."""
        where = (self.jobs.core, self.backend, self.namespace, self.name)
        guard = pending.PendingGuard(*where, self.pending_timeout_s)
        notice = stall.notice_for(self.jobs, self.namespace, self.name, self.operator_lease)
        try:
            return watch.wait_for_end(self.jobs, self.namespace, self.name,
                                      watch_timeout_s=self.watch_timeout_s,
                                      log_tail=self.log_tail, guard=guard,
                                      observer=notice.seen if notice else None,
                                      lost=node_lost.NodeLossGuard(*where))
        finally:
            if notice is not None:
                notice.stop()

    def delete(self) -> None:
        """Delete the MPIJob (``propagationPolicy: Foreground``; 404 is fine)."""
        if self.name:
            self.jobs.delete(self.namespace, self.name)

    def cancel(self) -> LaunchCancelled:
        """After SIGTERM: delete the job (the first request, short timeout:
        :func:`kfp_gpu.mpi.launch.cancel.delete_after_cancel`), then stop the logs; the
        error to raise."""
        try:
            cancel.delete_after_cancel(self.jobs, self.namespace, self.name)
        finally:
            if self.logs:
                self.logs.abort()
        return LaunchCancelled(f"cancelled; {self.backend.kind} {self.namespace}/{self.name} "
                               "deleted (propagationPolicy Foreground)")

    def run(self, job: Mapping, record_path: str | os.PathLike) -> tuple[dict, list[str], bool]:
        """Create/re-attach, follow logs, wait: ``(final object, log tail, reattached)``.

        Raises:
            MPIJobFailed: the MPIJob vanished (with events and the log tail).
            PendingTimeout, NodeLost: it did not start in ``pending_timeout_s``, or a pod of
                it was deleted from a lost node; it was deleted.
        """
        _, reattached = self.create_or_attach(job, record_path)
        self.start_logs()
        try:
            final = self.wait()
        except cancel.CancelSignal:
            raise  # launch() deletes the job first, then stops the logs
        except MPIJobFailed as e:
            if isinstance(e, (PendingTimeout, node_lost.NodeLost)):
                log.error("%s %s/%s: %s: %s; deleting it", self.backend.kind, self.namespace,
                          self.name, e.reason, e.message)
                self.delete()
            raise type(e)(e.name, e.reason, e.message, self.stop_logs(), self.events(),
                          kind=self.backend.kind) from None
        except BaseException:
            # any other error (a 403, an API that went away): no thread left polling
            if self.logs:
                self.logs.abort()
            raise
        return final, self.stop_logs(), reattached


def launch(job: Mapping, record_path: str | os.PathLike, api=None, *,
           backoff: Backoff = DEFAULT_BACKOFF, watch_timeout_s: int = 60,
           log_sink: Callable[[str], None] | None = None, tail_lines: int = 50,
           handle_sigterm: bool = True, log_poll_s: float = 2.0,
           pending_timeout_s: float = pending.DEFAULT_TIMEOUT_S,
           owner_pod: owner.OwnerPod | None = None, operator_lease: str = "auto") -> LaunchResult:
    """Run the MPIJob or TrainJob ``job`` (a dict from :func:`kfp_gpu.mpi.spec.mpijob.build` or
    :func:`kfp_gpu.mpi.spec.trainjob.build`) to completion.

    Args:
        job: the MPIJob or TrainJob (``metadata.name`` and ``metadata.namespace`` set); its
            apiVersion/kind picks the backend (:func:`kfp_gpu.mpi.spec.backends.for_object`).
        record_path: where the :class:`~kfp_gpu.mpi.launch.records.ResourceRecord` JSON goes (a KFP
            output path); written, never read (re-attach is by name and 409).
        api: a ``kubernetes.client.ApiClient``; default :func:`kfp_gpu.kube.api_client`.
        backoff, watch_timeout_s, log_sink, tail_lines, log_poll_s, pending_timeout_s,
            owner_pod, operator_lease: see :class:`Launcher`.
        handle_sigterm: install the SIGTERM -> delete handler (main thread only).

    Returns:
        :class:`~kfp_gpu.mpi.launch.records.LaunchResult` when the job Succeeded (a TrainJob:
        ``Complete``).

    Raises:
        MPIJobFailed: the job Failed (reason, message, events, last launcher log lines).
        PendingTimeout: the job was not Running after ``pending_timeout_s``; deleted.
        NodeLost: a pod of the job was deleted from a lost node; deleted.
        LaunchCancelled: SIGTERM arrived; the job was deleted (Foreground).
        kfp_gpu.mpi.launch.claims.ClaimTemplateFailed: a ``dra`` job's claim template could
            not be made after the job was created; the job was deleted (Foreground).
        kfp_gpu.mpi.launch.claims.ClaimTemplateConflict: the template name holds another
            request; nothing was created.
        ValueError: ``job`` is neither an MPIJob nor a TrainJob, or ``operator_lease`` is
            not a Lease spec.
        kubernetes.client.exceptions.ApiException: non-transient API errors.
    """
    backend = backends.for_object(job)
    launcher = Launcher(api or api_client(), backoff=backoff, watch_timeout_s=watch_timeout_s,
                        log_sink=log_sink, tail_lines=tail_lines, log_poll_s=log_poll_s,
                        backend=backend, pending_timeout_s=pending_timeout_s,
                        owner_pod=owner_pod, operator_lease=operator_lease)
    launcher.namespace, launcher.name = attach.job_identity(job)
    with cancel.sigterm_raises(handle_sigterm):
        try:
            final, tail, reattached = launcher.run(job, record_path)
        except cancel.CancelSignal:
            raise launcher.cancel() from None
    if phase(final) == "Failed":
        c = condition(final, backend.failure) or {}
        raise MPIJobFailed(launcher.name, c.get("reason", "Failed"), c.get("message", ""),
                           tail, launcher.events(), kind=backend.kind)
    return LaunchResult(record=ResourceRecord.of(final), status="Succeeded",
                        conditions=list((final.get("status") or {}).get("conditions") or []),
                        log_tail=tail, reattached=reattached)


# ---------------------------------------------------------------- command line
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kfp_gpu.mpi.launch.launcher --job job.yaml --record record.json [--kubeconfig F]``

    Exit status: 0 Succeeded, 1 Failed (the job, or its claim template: one line on
    stderr), :data:`EXIT_CANCELLED` after SIGTERM.
    """
    import argparse
    from pathlib import Path

    import yaml

    p = argparse.ArgumentParser(
        prog="python -m kfp_gpu.mpi.launch.launcher",
        description="Create (or re-attach to) the MPIJob or TrainJob in --job, follow it and "
        "its launcher log until it ends, delete it on SIGTERM.",
        epilog=f"Exit status: 0 Succeeded, 1 Failed, {EXIT_CANCELLED} after SIGTERM.")
    p.add_argument("--job", required=True, metavar="FILE", help="MPIJob or TrainJob YAML/JSON file")
    p.add_argument("--record", required=True, metavar="FILE",
                   help="where the resource record (apiVersion, kind, name, uid) is written")
    p.add_argument("--kubeconfig", default=None, metavar="FILE",
                   help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--host", default=None, metavar="URL", help="API server URL without auth (tests)")
    p.add_argument("--watch-timeout", type=int, default=60, metavar="S",
                   help="seconds per WATCH request (default 60)")
    p.add_argument("--backoff-initial", type=float, default=1.0, metavar="S",
                   help="first retry wait after an API error (default 1)")
    p.add_argument("--pending-timeout", type=float, default=pending.DEFAULT_TIMEOUT_S,
                   metavar="S", help="seconds the job may take to reach Running "
                   f"(0 = no limit; default {pending.DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--operator-lease", default="auto", metavar="NS/NAME",
                   help="the operator's leader Lease, to tell a job nobody reconciles "
                   "(default auto: the operator's upstream one; none: no check)")
    a = p.parse_args(argv)
    try:
        stall.lease_for("mpijob", a.operator_lease)
    except ValueError as e:
        p.error(str(e))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # the watch tells an outage itself
    job = yaml.safe_load(Path(a.job).read_text(encoding="utf-8"))
    api = api_client(a.kubeconfig, host=a.host)
    try:
        result = launch(job, a.record, api, watch_timeout_s=a.watch_timeout,
                        backoff=Backoff(initial_s=a.backoff_initial), log_poll_s=0.5,
                        pending_timeout_s=a.pending_timeout, owner_pod=owner.from_environment(),
                        operator_lease=a.operator_lease)
    except LaunchCancelled as e:
        print(str(e), file=sys.stderr, flush=True)
        return EXIT_CANCELLED
    except (MPIJobFailed, claims.ClaimTemplateFailed, claims.ClaimTemplateConflict) as e:
        print(str(e), file=sys.stderr, flush=True)
        return 1
    print(f"{result.record.kind} {result.record.namespace}/{result.record.name}: "
          f"{result.status}", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
