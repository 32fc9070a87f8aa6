"""Bounded exponential backoff for transient Kubernetes API errors."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


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


#: The default policy of API calls.
DEFAULT_BACKOFF = Backoff()

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


def short(e: BaseException) -> str:
    """One-line description of an API error for logs."""
    text = f"{type(e).__name__}: {getattr(e, 'status', '')} {getattr(e, 'reason', '') or e}"
    return text.strip()[:200]


def call(backoff: Backoff, what: str, fn: Callable, *args,
         sleep: Callable[[float], None] = time.sleep, **kwargs):
    """``fn(*args, **kwargs)`` retried on transient errors with ``backoff``.

    A run of failures is logged in two lines: a warning at the first, and the number of
    retries once it answers (the retries themselves at debug level).

    Raises:
        the last error after ``backoff.attempts`` failures, or any non-transient error.
    """
    began = 0.0
    for k in range(backoff.attempts):
        try:
            out = fn(*args, **kwargs)
        except Exception as e:
            if not is_transient(e) or k == backoff.attempts - 1:
                raise
            d = backoff.delay(k)
            if k == 0:  # one line per outage, not per retry
                began = time.monotonic()
                log.warning("%s: transient error (%s); retrying up to %d times", what,
                            short(e), backoff.attempts - 1)
            else:
                log.debug("%s: transient error (%s); retry %d/%d in %.1fs", what, short(e),
                          k + 1, backoff.attempts - 1, d)
            sleep(d)
            continue
        if k:
            log.info("%s: answered after %d retries (%.1f s)", what, k, time.monotonic() - began)
        return out
    raise AssertionError("unreachable")
