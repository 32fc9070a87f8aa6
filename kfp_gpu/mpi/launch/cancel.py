"""Cancellation: KFP cancels a run by deleting its pods, so the launcher gets SIGTERM; the
MPIJob is then deleted (``propagationPolicy: Foreground``) within the pod's grace period."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

from kfp_gpu.mpi.launch.jobs_api import MPIJobClient
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


def delete_after_cancel(jobs: MPIJobClient, namespace: str, name: str) -> None:
    """Delete the MPIJob after a SIGTERM: further SIGTERMs are ignored while deleting, and
    the delete is retried with :data:`kfp_gpu.mpi.launch.retry.CANCEL_BACKOFF` (inside the
    default 30 s ``terminationGracePeriodSeconds``)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a 2nd SIGTERM: keep deleting
    log.warning("SIGTERM: the run was cancelled; deleting %s %s/%s", jobs.kind, namespace,
                name)
    if name:
        jobs.with_backoff(CANCEL_BACKOFF).delete(namespace, name)
