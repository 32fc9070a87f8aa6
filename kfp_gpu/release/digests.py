"""Image digests from the registry: ``kfp-gpu compile --registry R --pin-digests``.

The only I/O of pinning: :func:`resolve` asks the registry which manifest each image's tag
names, over the OCI distribution API, and :func:`pin` turns an
:class:`~kfp_gpu.release.images.ImageSet` into its pinned set
(``R/kfp-gpu-<name>@sha256:...``); rewriting the compiled YAML is pure
(:func:`kfp_gpu.release.images.apply`).

Protocol, as followed here:
- ``HEAD /v2/<repository>/manifests/<tag>`` with ``Accept`` listing the OCI image index and
  manifest and the Docker v2 manifest list and manifest (:data:`MANIFEST_TYPES`): the
  response header ``Docker-Content-Digest`` is the digest (opencontainers/distribution-spec
  v1.1.1 spec.md: "Pulling manifests" l. 147-185 -- the Accept header l. 168, 404 when the
  manifest is not found l. 185; "Checking if content exists" l. 204-213 -- HEAD, and the
  header is a SHOULD, l. 213). Without it, a ``GET`` and the sha256 of the body give the
  digest; a GET's header must match the body it came with (l. 182), or the answer is
  refused.
- Token auth: a ``401`` with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``
  is answered by an anonymous ``GET realm?service=...&scope=repository:<repo>:pull``; the
  response's ``token`` (or ``access_token``) goes back as ``Authorization: Bearer``
  (distribution/distribution docs/spec/auth/token.md, "Requesting a Token" and "Token
  Response Fields"). This is how ghcr.io serves public packages. Credentials, when the
  Docker client config has them for the host (``$DOCKER_CONFIG/config.json`` or
  ``~/.docker/config.json``, ``auths.<host>.auth`` = base64 ``user:secret``, as ``docker
  login`` writes it without a credential helper), go to the token request as HTTP Basic, or
  straight to the registry when it challenges with ``Basic``; credential helpers are not
  run (a private registry behind one: log in without the helper, or make the images
  readable).
- Host and repository from the image name as docker splits it (distribution/reference
  v0.6.0 normalize.go splitDockerDomain, l. 126-171: the first path component is the host
  when it is ``localhost`` or contains ``.`` or ``:``, else Docker Hub with ``library/``
  for one-component names; ``docker.io`` serves the API at ``registry-1.docker.io``).
- Scheme: ``http`` for loopback hosts (127.0.0.0/8, ``::1``, and ``localhost``, which
  resolves to them): the registries the Docker engine treats as insecure by default (Docker
  Engine API, schema RegistryServiceConfig, ``InsecureRegistryCIDRs``: "local registries
  (::1/128 and 127.0.0.0/8) are configured as insecure"); ``https`` elsewhere.

Errors: :class:`ImageMissing` (the registry answers, the image or tag is not there: the CLI
exits 2) and :class:`RegistryUnreachable` (no answer, a server error: exit 3).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from kfp_gpu.release import images

#: What the manifest request accepts: OCI index and manifest (opencontainers/image-spec
#: v1.1.0 media-types.md), Docker manifest list and v2 manifest (distribution/distribution
#: docs/spec/manifest-v2-2.md "Media Types"). A multi-platform image's digest is its index.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
#: Seconds per request (connect and read).
TIMEOUT_S = 20.0
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"


class DigestError(Exception):
    """A digest could not be resolved; ``str()`` is one line for the user."""


class ImageMissing(DigestError):
    """The registry answered, but the image (repository or tag) is not there or not
    readable anonymously."""


class RegistryUnreachable(DigestError):
    """No answer from the registry (connection, TLS, timeout) or a server error."""


def split_name(repository: str) -> tuple[str, str]:
    """``host[:port]/path`` -> (API host, repository path), docker's way (module docstring).

    >>> split_name("ghcr.io/acme/kfp-gpu-trainer")
    ('ghcr.io', 'acme/kfp-gpu-trainer')
    >>> split_name("acme/kfp-gpu-trainer")
    ('registry-1.docker.io', 'acme/kfp-gpu-trainer')
    """
    first, _, rest = repository.partition("/")
    if rest and (first == "localhost" or "." in first or ":" in first
                 or first.lower() != first):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, repository
    if host in (DOCKER_HUB, "index.docker.io"):
        host = DOCKER_HUB_API
        if "/" not in path:
            path = f"library/{path}"
    return host, path


def scheme(host: str) -> str:
    """``http`` for a loopback host (``127.0.0.0/8``, ``[::1]``, ``localhost``, any port),
    else ``https``."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]")
    if name == "localhost":
        return "http"
    try:
        return "http" if ipaddress.ip_address(name).is_loopback else "https"
    except ValueError:
        return "https"


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``WWW-Authenticate`` -> (scheme lowercased, parameters).

    >>> parse_challenge('Bearer realm="https://ghcr.io/token",service="ghcr.io"')
    ('bearer', {'realm': 'https://ghcr.io/token', 'service': 'ghcr.io'})
    """
    kind, _, rest = header.strip().partition(" ")
    params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    return kind.lower(), params


def docker_credentials(host: str, config: dict | None = None) -> tuple[str, str] | None:
    """(user, secret) for ``host`` from a Docker client config (``auths.<host>.auth``, base64
    ``user:secret``; keys may carry a scheme, ``https://host``), else None. ``config``
    default: read from ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``.

    >>> docker_credentials("r.example", {"auths": {"https://r.example": {"auth": "dTpw"}}})
    ('u', 'p')
    """
    if config is None:
        where = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
        try:
            config = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    # Docker Hub's entry is keyed by its index, https://index.docker.io/v1/
    hosts = {host, "index.docker.io", DOCKER_HUB} if host == DOCKER_HUB_API else {host}
    for key, entry in (config.get("auths") or {}).items():
        key_host = re.sub(r"^https?://", "", key).split("/")[0]
        if key_host not in hosts or not isinstance(entry, dict):
            continue
        try:
            user, _, secret = base64.b64decode(entry.get("auth", "")).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            continue
        if user and secret:
            return user, secret
    return None


def manifest_url(host: str, path: str, tag: str) -> str:
    """``<scheme>://<host>/v2/<path>/manifests/<tag>`` (distribution-spec end-3)."""
    return f"{scheme(host)}://{host}/v2/{path}/manifests/{tag}"


def resolve(image_set: images.ImageSet, names: Iterable[str] = images.NAMES, *,
            session=None, timeout_s: float = TIMEOUT_S) -> dict[str, str]:
    """Ask the registry for the digest of each image ``names`` of ``image_set`` (its tag).

    Args:
        image_set: registry and tag; its digests, if any, are ignored (the tag is asked).
        names: images to resolve, e.g. those a compiled pipeline names
            (:func:`kfp_gpu.release.images.referenced`).
        session: a ``requests.Session`` (default: a new one).
        timeout_s: seconds per request.

    Returns:
        name -> ``sha256:<hex>``.

    Raises:
        ImageMissing: 404 (or 401/403 after an anonymous token) for an image.
        RegistryUnreachable: connection error, timeout, 5xx, or an answer without a digest.
    """
    import requests

    own = session is None
    session = session or requests.Session()
    try:
        return {n: _digest(session, image_set.repository(n), image_set.tag, timeout_s)
                for n in names}
    finally:
        if own:
            session.close()


def pin(image_set: images.ImageSet, names: Iterable[str] = images.NAMES,
        **kwargs) -> images.ImageSet:
    """``image_set`` with ``names`` pinned to the digests the registry serves for its tag
    (:func:`resolve`; same errors)."""
    return image_set.tagged().pinned(resolve(image_set, names, **kwargs))


def _digest(session, repository: str, tag: str, timeout_s: float) -> str:
    import requests

    host, path = split_name(repository)
    url = manifest_url(host, path, tag)
    ref = f"{repository}:{tag}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    try:
        resp = session.head(url, headers=headers, timeout=timeout_s, allow_redirects=True)
        if resp.status_code == 401:
            headers["Authorization"] = _authorization(
                session, resp.headers.get("WWW-Authenticate", ""), host, path, ref, timeout_s)
            resp = session.head(url, headers=headers, timeout=timeout_s, allow_redirects=True)
        if resp.ok and not resp.headers.get("Docker-Content-Digest"):
            # the header is a SHOULD on HEAD: the manifest's own bytes tell
            resp = session.get(url, headers=headers, timeout=timeout_s, allow_redirects=True)
            if resp.ok:
                body = "sha256:" + hashlib.sha256(resp.content).hexdigest()
                sent = resp.headers.get("Docker-Content-Digest", body).strip()
                if sent != body:
                    raise RegistryUnreachable(f"registry {host} sent digest {sent} for {ref} "
                                              f"with a manifest whose sha256 is {body}")
                return body
    except requests.RequestException as e:
        raise RegistryUnreachable(f"registry {host} unreachable ({_reason(e)}) for {ref}: "
                                  f"check the address, the network and that it serves "
                                  f"{scheme(host)}") from e
    code = resp.status_code
    if code in (401, 403, 404):
        what = "not found" if code == 404 else f"not readable (HTTP {code})"
        raise ImageMissing(f"image {ref} {what} in registry {host}: build and push it first "
                           f"(KFP_GPU_REGISTRY={repository.rsplit('/', 1)[0]} "
                           "scripts/build-images.sh)")
    if not resp.ok:
        raise RegistryUnreachable(f"registry {host} answered HTTP {code} for {ref} ({url})")
    digest = resp.headers["Docker-Content-Digest"].strip()
    if not re.fullmatch(r"sha256:[a-f0-9]{64}", digest):
        raise RegistryUnreachable(f"registry {host} gave no sha256 digest for {ref}: "
                                  f"{digest!r}")
    return digest


def _authorization(session, challenge: str, host: str, path: str, ref: str,
                   timeout_s: float) -> str:
    """The ``Authorization`` header answering a 401's ``challenge``: a Bearer token from the
    realm (anonymous, or with the Docker config's credentials), or Basic credentials."""
    import requests

    kind, params = parse_challenge(challenge)
    creds = docker_credentials(host)
    if kind == "basic" and creds:
        return "Basic " + base64.b64encode(":".join(creds).encode()).decode()
    if kind != "bearer" or "realm" not in params:
        raise ImageMissing(f"image {ref}: the registry needs credentials "
                           f"({challenge or 'no challenge'}) and the Docker config has none "
                           f"for {host} (docker login {host})")
    query = {"scope": params.get("scope") or f"repository:{path}:pull"}
    if "service" in params:
        query["service"] = params["service"]
    try:
        resp = session.get(params["realm"], params=query, timeout=timeout_s, auth=creds)
    except requests.RequestException as e:
        raise RegistryUnreachable(f"token service {params['realm']} unreachable "
                                  f"({_reason(e)}) for {ref}") from e
    if resp.status_code in (401, 403, 404):
        who = "with the Docker config's credentials" if creds else "anonymously"
        raise ImageMissing(f"image {ref}: no pull token {who} (HTTP {resp.status_code} "
                           f"from {params['realm']})")
    if not resp.ok:
        raise RegistryUnreachable(f"token service {params['realm']} answered HTTP "
                                  f"{resp.status_code} for {ref}")
    body = resp.json()
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryUnreachable(f"token service {params['realm']} gave no token for {ref}")
    return f"Bearer {token}"


def _reason(e: Exception) -> str:
    """A short reason for a ``requests`` error: the OS error text when there is one
    (``[Errno 111] Connection refused`` -> ``Connection refused``), a timeout, a TLS error,
    else the exception's class name."""
    import requests

    if isinstance(e, requests.Timeout):
        return "timed out"
    if isinstance(e, requests.exceptions.SSLError):
        return "TLS error"
    m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(e))
    return m.group(1).strip() if m else type(e).__name__
