"""Access to the KFP API: the bearer token, the health check, and the ``kfp.Client``.

Token: ``$KFP_TOKEN``, else the file named by ``$KF_PIPELINES_SA_TOKEN_PATH`` (default
``/var/run/secrets/kubeflow/pipelines/token``, the projected ServiceAccount token KFP mounts
for in-cluster clients; kfp ``kfp/client/set_volume_credentials.py``). Health:
``GET /apis/v2beta1/healthz`` (KFP v2beta1 REST API, ``backend/api/v2beta1/healthz.proto``).
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "KFP_TOKEN"
#: kfp's own variable for the projected token path (kfp.client.set_volume_credentials).
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
DEFAULT_TOKEN_PATH = "/var/run/secrets/kubeflow/pipelines/token"

#: Minimum KFP backend for an accelerator count given as a pipeline parameter: the driver
#: reads ``resourceType``/``resourceCount`` since kubeflow/pipelines commit 7c931ae201
#: (#11501, backend/src/v2/driver/driver.go), first released in 2.4.0. Constant counts work
#: on any v2 backend (kfp 2.17 also writes the legacy ``type``/``count``).
MIN_BACKEND_PARAMETER_COUNT = (2, 4, 0)
#: Minimum KFP backend for ``taskConfigPassthroughs`` (MPIJob/TrainJob components): commit
#: a6f7fb6e84 (#12185, backend/src/v2/driver/driver.go ``getTaskConfigOptions``), 2.15.0.
#: An older backend ignores them and gives the GPUs to the launcher task pod itself.
MIN_BACKEND_TASK_CONFIG = (2, 15, 0)


@dataclass(frozen=True)
class KfpHealth:
    """The healthz answer (backend/src/apiserver/main.go ``healthzResponse``).

    Attributes:
        ok: the API answered 200 with JSON.
        detail: ``(single-user)`` / ``(multi-user)``, or why it failed.
        tag: ``tag_name`` (the API server's ``TAG_NAME``; ``unknown`` when unset).
        reachable: False when no HTTP answer came at all (connection refused, DNS, TLS,
            timeout): the CLI's exit status 3; an answer with an error status is reachable.
    """

    ok: bool
    detail: str
    tag: str = ""
    reachable: bool = True


def parse_version(tag: str) -> tuple[int, int, int] | None:
    """``2.15.0`` / ``v2.4.1`` / ``2.5.0-rc.1`` -> (2, 15, 0); None when unparsable."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", (tag or "").strip())
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def backend_requirements(spec: dict) -> list[tuple[tuple[int, int, int], str]]:
    """Minimum KFP backend versions a compiled pipeline spec needs, with the reason (pure).

    An executor's accelerator ``resourceCount`` that is a placeholder (``{{$.inputs...}}``)
    -> :data:`MIN_BACKEND_PARAMETER_COUNT`; a component with ``taskConfigPassthroughs`` ->
    :data:`MIN_BACKEND_TASK_CONFIG`.
    """
    out = []
    executors = (spec.get("deploymentSpec") or {}).get("executors") or {}
    for name, ex in executors.items():
        c = ex.get("container") or {}
        count = str(((c.get("resources") or {}).get("accelerator") or {})
                    .get("resourceCount", ""))
        if "{{$" in count:
            out.append((MIN_BACKEND_PARAMETER_COUNT,
                        f"{name}: accelerator count is a pipeline parameter"))
    for name, comp in (spec.get("components") or {}).items():
        if comp.get("taskConfigPassthroughs"):
            out.append((MIN_BACKEND_TASK_CONFIG, f"{name}: uses taskConfigPassthroughs"))
    return out


def version_problems(tag: str, needs: list[tuple[tuple[int, int, int], str]]
                     ) -> tuple[list[str], list[str]]:
    """``(problems, warnings)`` of backend ``tag`` against ``needs`` (pure): older -> a
    problem naming the minimum; ``unknown``/unparsable -> a warning."""
    if not needs:
        return [], []
    have = parse_version(tag)
    if have is None:
        return [], [f"KFP backend version {tag or 'unknown'!r} (healthz tag_name) cannot be "
                    "compared; needs " + "; ".join(f">= {'.'.join(map(str, v))} ({why})"
                                                   for v, why in needs)]
    return [f"KFP backend {tag} is older than {'.'.join(map(str, v))}, needed because {why}"
            for v, why in needs if have < v], []


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


def kfp_health(host: str, token: str | None = None, ca_cert: str | None = None,
               verify: bool = True, timeout: float = 10.0) -> KfpHealth:
    """GET ``<host>/apis/v2beta1/healthz`` -> :class:`KfpHealth` (never raises for network
    or HTTP errors)."""
    # requests comes with kfp; imported when the API is called.
    import requests

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = requests.get(host.rstrip("/") + "/apis/v2beta1/healthz", headers=headers,
                         timeout=timeout, verify=(ca_cert or True) if verify else False)
    except requests.RequestException as e:
        return KfpHealth(False, f"{type(e).__name__}: {e}", reachable=False)
    if r.status_code != 200:
        return KfpHealth(False, f"HTTP {r.status_code}: {r.text[:200].strip()}")
    try:
        body = r.json()
    except ValueError:
        return KfpHealth(False, "healthz answered, but not with JSON")
    mode = "multi-user" if body.get("multi_user") else "single-user"
    return KfpHealth(True, f"({mode})", str(body.get("tag_name") or "unknown"))


def kfp_healthz(host: str, token: str | None = None, ca_cert: str | None = None,
                verify: bool = True, timeout: float = 10.0) -> tuple[bool, str]:
    """``(ok, detail)`` of :func:`kfp_health`; detail says single- or multi-user, or why it
    failed."""
    h = kfp_health(host, token, ca_cert, verify, timeout)
    return h.ok, h.detail


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
