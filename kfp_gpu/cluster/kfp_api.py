"""Access to the KFP API: the bearer token, the health check, and the ``kfp.Client``.

Token: ``$KFP_TOKEN``, else the file named by ``$KF_PIPELINES_SA_TOKEN_PATH`` (default
``/var/run/secrets/kubeflow/pipelines/token``, the projected ServiceAccount token KFP mounts
for in-cluster clients; kfp ``kfp/client/set_volume_credentials.py``). Health:
``GET /apis/v2beta1/healthz`` (KFP v2beta1 REST API, ``backend/api/v2beta1/healthz.proto``).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

TOKEN_ENV = "KFP_TOKEN"
#: kfp's own variable for the projected token path (kfp.client.set_volume_credentials).
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
DEFAULT_TOKEN_PATH = "/var/run/secrets/kubeflow/pipelines/token"


def kfp_token() -> str | None:
    """Bearer token for the KFP API: ``$KFP_TOKEN``, else the SA token file, else None."""
    tok = os.environ.get(TOKEN_ENV, "").strip()
    if tok:
        return tok
    path = Path(os.environ.get(TOKEN_PATH_ENV, DEFAULT_TOKEN_PATH))
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def kfp_healthz(host: str, token: str | None = None, ca_cert: str | None = None,
                verify: bool = True, timeout: float = 10.0) -> tuple[bool, str]:
    """GET ``<host>/apis/v2beta1/healthz``: ``(ok, detail)``; detail says single- or
    multi-user, or why it failed. Never raises for network or HTTP errors."""
    # requests comes with kfp; imported when the API is called.
    import requests

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = requests.get(host.rstrip("/") + "/apis/v2beta1/healthz", headers=headers,
                         timeout=timeout, verify=(ca_cert or True) if verify else False)
    except requests.RequestException as e:
        return False, f"{type(e).__name__}: {e}"
    if r.status_code != 200:
        return False, f"HTTP {r.status_code}: {r.text[:200].strip()}"
    try:
        body = r.json()
    except ValueError:
        return False, "healthz answered, but not with JSON"
    mode = "multi-user" if body.get("multi_user") else "single-user"
    return True, f"({mode})"


def kfp_client(host: str, *, token: str | None, namespace: str | None,
               ssl_ca_cert: str | None = None, insecure_skip_tls_verify: bool = False,
               ui_host: str | None = None):
    """A ``kfp.Client`` for ``host`` (kfp ``kfp/client/client.py``); its FutureWarnings about
    defaults are silenced."""
    # kfp's client pulls in kfp_server_api: imported when a client is made.
    import kfp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return kfp.Client(host=host, existing_token=token, ssl_ca_cert=ssl_ca_cert,
                          verify_ssl=False if insecure_skip_tls_verify else None,
                          namespace=namespace or "kubeflow", ui_host=ui_host)
