"""Job API calls (the request-sending side of the launcher), each with a request
timeout and retried on transient errors (:mod:`kfp_gpu.mpi.launch.retry`).

Kubernetes calls: ``CustomObjectsApi`` get/create/delete/list/watch of the backend's
resource (:mod:`kfp_gpu.mpi.spec.backends`: ``mpijobs.kubeflow.org`` by default, or
``trainjobs.trainer.kubeflow.org``); deletes use ``propagationPolicy: Foreground`` so the
job's pods go with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping

from kfp_gpu.mpi.launch import retry
from kfp_gpu.mpi.launch.retry import DEFAULT_BACKOFF, Backoff
from kfp_gpu.mpi.spec import backends

#: ``_request_timeout`` of every call that is not a watch: (connect, read) seconds. Without
#: it urllib3 waits forever on a half-open connection to the API server (kubernetes-client
#: python, kubernetes/client/rest.py), and the launcher would hold the Workers' GPUs.
REQUEST_TIMEOUT_S = (10, 60)

#: ``_request_timeout`` of the DELETE after SIGTERM (:mod:`kfp_gpu.mpi.launch.cancel`):
#: (connect, read) seconds. Short, because the component has about a second after its
#: SIGTERM before its container ends (Argo's emissary exits once the command's shell is
#: reaped, see :mod:`kfp_gpu.mpi.launch.cancel`), and a retry on a fresh connection does
#: better than waiting 60 s on a stuck one; :data:`kfp_gpu.mpi.launch.retry.CANCEL_BACKOFF`
#: bounds the attempts.
CANCEL_REQUEST_TIMEOUT_S = (1, 3)

log = logging.getLogger(__name__)


def raw_json(resp) -> dict:
    """The JSON body of a ``_preload_content=False`` response, connection released.

    Pods and Events are read this way: the API's own JSON (camelCase), with no model
    deserialization that could refuse a status the client's models do not expect."""
    import json

    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


class MPIJobClient:
    """Job requests (MPIJob, or TrainJob with ``backend=backends.TRAINJOB``) against one
    API server.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (see :func:`kfp_gpu.kube.api_client`).
        backoff: retry policy for transient errors.
        sleep: the wait between retries (tests pass a fake).
        backend: the job kind (:mod:`kfp_gpu.mpi.spec.backends`), MPIJob by default.
        request_timeout: ``_request_timeout`` of every call but the watch, (connect, read)
            seconds; default :data:`REQUEST_TIMEOUT_S`.
    """

    def __init__(self, api_client, backoff: Backoff = DEFAULT_BACKOFF,
                 sleep: Callable[[float], None] = time.sleep,
                 backend: backends.Backend = backends.MPIJOB,
                 request_timeout: tuple[float, float] = REQUEST_TIMEOUT_S):
        # The kubernetes client is an I/O dependency: imported when a client is made.
        from kubernetes import client

        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.backoff = backoff
        self.sleep = sleep
        self.backend = backend
        self.kind = backend.kind
        self.request_timeout = request_timeout
        self._res = (backend.group, backend.version)

    def with_backoff(self, backoff: Backoff,
                     request_timeout: tuple[float, float] | None = None) -> MPIJobClient:
        """The same client with another retry policy (e.g. ``retry.CANCEL_BACKOFF``) and,
        when given, another request timeout (e.g. :data:`CANCEL_REQUEST_TIMEOUT_S`)."""
        return MPIJobClient(self.api_client, backoff, self.sleep, self.backend,
                            request_timeout or self.request_timeout)

    def _call(self, what: str, fn: Callable, *args, **kwargs):
        kwargs.setdefault("_request_timeout", self.request_timeout)
        return retry.call(self.backoff, what, fn, *args, sleep=self.sleep, **kwargs)

    def get(self, namespace: str, name: str) -> dict | None:
        """The MPIJob, or ``None`` when it does not exist (404)."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self._call(f"get {self.kind}", self.custom.get_namespaced_custom_object,
                              *self._res, namespace, self.backend.plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def create(self, namespace: str, job: Mapping) -> dict:
        """POST the MPIJob; returns the created object (409 and others are raised)."""
        return self._call(f"create {self.kind}", self.custom.create_namespaced_custom_object,
                          *self._res, namespace, self.backend.plural, dict(job))

    def delete(self, namespace: str, name: str) -> None:
        """Delete with ``propagationPolicy: Foreground`` (404 is fine)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            self._call(f"delete {self.kind}", self.custom.delete_namespaced_custom_object,
                       *self._res, namespace, self.backend.plural, name,
                       body=client.V1DeleteOptions(propagation_policy="Foreground"))
            log.info("deleted %s %s/%s (propagationPolicy Foreground)", self.kind, namespace,
                     name)
        except ApiException as e:
            if e.status != 404:
                raise

    def set_owner_references(self, namespace: str, name: str, refs: list[dict]) -> dict:
        """Replace ``metadata.ownerReferences`` (a JSON merge patch, RFC 7386: a list is
        replaced whole; ``patch_namespaced_custom_object`` sends
        ``application/merge-patch+json``); returns the patched object. Needs ``patch``.

        Raises:
            kubernetes.client.exceptions.ApiException: 403 without ``patch``, 404 ...
        """
        return self._call(f"patch {self.kind}", self.custom.patch_namespaced_custom_object,
                          *self._res, namespace, self.backend.plural, name,
                          {"metadata": {"ownerReferences": refs}})

    def list_one(self, namespace: str, name: str) -> tuple[dict | None, str]:
        """``(the MPIJob or None, the list's resourceVersion)`` -- where a WATCH starts."""
        out = self._call(f"list {self.backend.plural}", self.custom.list_namespaced_custom_object,
                         *self._res, namespace, self.backend.plural,
                         field_selector=f"metadata.name={name}")
        items = out.get("items") or []
        return (items[0] if items else None), out["metadata"]["resourceVersion"]

    def watch(self, namespace: str, name: str, resource_version: str,
              timeout_s: int) -> Iterator[dict]:
        """WATCH events (``{"type", "raw_object"}``) of the MPIJob from ``resource_version``;
        ends after ``timeout_s`` (server-side ``timeoutSeconds``). Not retried: the caller
        resumes from the last version it saw."""
        from kubernetes import watch

        yield from watch.Watch().stream(
            self.custom.list_namespaced_custom_object, *self._res, namespace,
            self.backend.plural, field_selector=f"metadata.name={name}",
            resource_version=resource_version, timeout_seconds=timeout_s,
            _request_timeout=(10, timeout_s + 30))



