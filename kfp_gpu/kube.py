"""The one Kubernetes API client factory (the ``kubernetes`` Python client).

Used by the MPIJob launcher (in a pod: the service account) and by ``kfp-gpu doctor``
(on a workstation: a kubeconfig). Upstream: kubernetes-client/python
``kubernetes/config/kube_config.py`` (``new_client_from_config``) and
``incluster_config.py`` (``load_incluster_config``, selected by
``KUBERNETES_SERVICE_HOST``, which the kubelet sets in every pod).
"""

from __future__ import annotations

import os
from pathlib import Path


def api_client(kubeconfig: str | None = None, context: str | None = None,
               host: str | None = None):
    """A ``kubernetes.client.ApiClient``.

    Order: ``host`` (a bare API server URL without auth, for tests and proxies); else the
    in-cluster service account when running in a pod and neither ``kubeconfig`` nor
    ``context`` is given; else ``kubeconfig`` / ``$KUBECONFIG`` (a list is merged by the
    client) / ``~/.kube/config`` with ``context``.

    Raises:
        RuntimeError: no usable kubeconfig (the message names what was tried).
    """
    # The kubernetes client is an I/O dependency: imported when a client is made.
    from kubernetes import client, config

    if host:
        cfg = client.Configuration()
        cfg.host = host
        return client.ApiClient(cfg)
    if kubeconfig and os.pathsep in kubeconfig:
        kubeconfig = None  # a $KUBECONFIG list: the client merges it itself
    if not kubeconfig and not context and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
        return client.ApiClient()
    try:
        return config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, OSError, ValueError, TypeError) as e:
        raise RuntimeError(f"cannot load kubeconfig {kubeconfig or '~/.kube/config'}: {e}") from e


#: Where Kubernetes mounts the pod's service-account namespace (kubernetes docs,
#: "Accessing the Kubernetes API from a Pod").
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def pod_namespace(default: str = "default") -> str:
    """The namespace of the pod this runs in (service-account mount), else ``default``."""
    try:
        return Path(NAMESPACE_FILE).read_text(encoding="utf-8").strip() or default
    except OSError:
        return default
