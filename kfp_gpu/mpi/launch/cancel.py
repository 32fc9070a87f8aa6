"""Cancellation: on SIGTERM, DELETE the job first, with a short request timeout, and only
then anything else.

How a KFP run is cancelled (KFP 2.5+ on Argo Workflows 3.5; argoproj/argo-workflows
v3.5.15, the same in v3.6):

1. KFP's Terminate does not delete the pod: the API server merge-patches the Workflow with
   ``spec.activeDeadlineSeconds: 0`` (kubeflow/pipelines
   ``backend/src/apiserver/resource/resource_manager.go`` ``TerminateWorkflow``).
2. The workflow controller finds the running pod past the deadline and queues
   ``terminateContainers`` (``workflow/controller/exec_control.go``
   ``applyExecutionControl``, lines 54-65); the pod cleanup runs ``signalContainers`` with
   SIGTERM and queues ``killContainers`` (SIGKILL) after the pod's
   ``terminationGracePeriodSeconds``, 30 s when unset (``workflow/controller/controller.go``
   lines 531-543 and 591-607; v3.6: ``workflow/controller/pod/queue.go`` lines 68-71).
3. Signalling a container is an exec of ``/var/run/argo/argoexec kill <sig> 1``
   (``workflow/signal/signal.go`` lines 17-44; ``cmd/argoexec/commands/kill.go``: a plain
   ``kill(pid, sig)``), i.e. to PID 1, which is ``argoexec emissary``.
4. The emissary forwards every signal but SIGCHLD/SIGURG to the command's process group
   (``cmd/argoexec/commands/emissary.go`` lines 146-154; ``workflow/executor/os-specific/
   signal_darwin.go``, which is also ``signal_linux.go``: ``Kill`` = ``kill(-pgid, sig)``)
   and reaps once a second (``Wait``, same file, lines 31-61); when the command ends it
   exits, and with PID 1 gone the kernel kills everything left in the container.

So SIGTERM reaches this process and, at the same moment, every process above it in the
component's command (the ``sh`` wrapper); once that has died the emissary exits within
about a second, and this process with it, whatever the grace period says. (The SIGKILL
that ``argoexec kill 9 1`` sends later is not even delivered: a PID namespace's init gets
no signal it has no handler for from inside its namespace, pid_namespaces(7); the kubelet
kills the container when the pod goes.) Hence: the DELETE goes out first, with
:data:`kfp_gpu.mpi.launch.jobs_api.CANCEL_REQUEST_TIMEOUT_S`; the log stream is stopped and
the log line written after it. If the process dies anyway, the ownerReference to the
component's pod (:mod:`kfp_gpu.mpi.launch.owner`) lets the garbage collector delete the job
when the pod goes.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

from kfp_gpu.mpi.launch.jobs_api import CANCEL_REQUEST_TIMEOUT_S, MPIJobClient
from kfp_gpu.mpi.launch.retry import CANCEL_BACKOFF

log = logging.getLogger(__name__)


class CancelSignal(BaseException):
    """Raised in the main thread by the SIGTERM handler of :func:`sigterm_raises`."""


@contextlib.contextmanager
def sigterm_raises(enabled: bool) -> Iterator[None]:
    """While active, SIGTERM raises :class:`CancelSignal` in the main thread (elsewhere, or
    when not ``enabled``, signals are left alone)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise CancelSignal()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def worst_case_delete_s() -> float:
    """Seconds the DELETE after SIGTERM may take at most: every attempt of
    :data:`~kfp_gpu.mpi.launch.retry.CANCEL_BACKOFF` timing out (connect + read of
    :data:`~kfp_gpu.mpi.launch.jobs_api.CANCEL_REQUEST_TIMEOUT_S`) plus the waits between
    them. Kept below Argo's default grace period of 30 s (see the module docstring)."""
    b = CANCEL_BACKOFF
    return b.attempts * sum(CANCEL_REQUEST_TIMEOUT_S) + sum(
        b.delay(k) for k in range(b.attempts - 1))


def delete_after_cancel(jobs: MPIJobClient, namespace: str, name: str) -> None:
    """Delete the job after a SIGTERM, before anything else: further SIGTERMs are ignored
    while deleting; the DELETE (``propagationPolicy: Foreground``) goes out at once with
    :data:`~kfp_gpu.mpi.launch.jobs_api.CANCEL_REQUEST_TIMEOUT_S`, retried with
    :data:`~kfp_gpu.mpi.launch.retry.CANCEL_BACKOFF` (:func:`worst_case_delete_s`); the
    log line comes after it.

    Raises:
        kubernetes.client.exceptions.ApiException: a non-transient error (404 is fine), or
            the last transient one.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a 2nd SIGTERM: keep deleting
    try:
        if name:
            jobs.with_backoff(CANCEL_BACKOFF, CANCEL_REQUEST_TIMEOUT_S).delete(namespace, name)
    finally:
        log.warning("SIGTERM: the run was cancelled; deleting %s %s/%s (DELETE sent first)",
                    jobs.kind, namespace, name)
