"""The plane's API audit log: which requests the service accounts sent (the launcher runs as
one in a pipeline's namespace), so a test can count the requests a client cost the API
server. ``apiserver_request_total`` on kube-apiserver's /metrics cannot: its labels are
verb, group, version, resource, subresource, scope, component, code
(k8s.io/apiserver pkg/endpoints/metrics/metrics.go ``requestCounter``), no user or user
agent. An audit event names both (``user.username``, ``userAgent``).

Sources:
- kwokctl (sigs.k8s.io/kwok@v0.8.0) ``options.kubeAuditPolicy``
  (pkg/apis/config/v1alpha1/kwokctl_configuration_types.go): the policy file is copied into
  the cluster's workdir and kube-apiserver started with ``--audit-policy-file`` and
  ``--audit-log-path=<cluster>/logs/audit.log`` (pkg/kwokctl/runtime/binary/cluster.go,
  cluster_setup.go, pkg/kwokctl/components/kube_apiserver.go).
- audit.k8s.io/v1 ``Policy`` (k8s.io/apiserver pkg/apis/audit/v1/types.go): the first
  matching rule sets the level; ``userGroups`` matches the requester's groups
  (``system:serviceaccounts`` for every service account); level ``Metadata`` logs the
  request's metadata (user, user agent, verb, objectRef, response code), no bodies;
  ``omitStages: [RequestReceived]`` keeps one event per request, two for a long-running
  one (a WATCH or a log stream: ``ResponseStarted``, then ``ResponseComplete``), told apart
  by ``auditID``.

Only service accounts' requests are logged: the controllers of the plane (kube-controller-
manager, kube-scheduler, kwok, the operators) use the admin kubeconfig, so the log stays
small. Pure apart from :func:`write_policy` and :func:`read`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

#: The audit policy: Metadata for service accounts, nothing for anyone else.
POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
          "omitStages": ["RequestReceived"],
          "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
                    {"level": "None"}]}


def write_policy(plane_dir: Path) -> Path:
    """Write :data:`POLICY` into the plane's folder; its path (kwokctl's
    ``kubeAuditPolicy``)."""
    path = Path(plane_dir) / "audit-policy.yaml"
    path.write_text(yaml.safe_dump(POLICY))
    return path


def log_path(plane) -> Path | None:
    """The audit log of ``plane``'s kwokctl cluster (``<workdir>/clusters/<name>/logs/
    audit.log``), or None when the plane was brought up without one."""
    found = sorted(Path(plane.workdir).glob("clusters/*/logs/audit.log"))
    return found[0] if found else None


def read(path: Path, offset: int = 0) -> tuple[list[dict], int]:
    """The audit events in ``path`` from byte ``offset`` on, and the offset after them (a
    caller reads what a test added: remember the size first). A last line still being
    written is left for the next read."""
    events = []
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        if line.strip():
            events.append(json.loads(line))
    return events, offset + end


def requests_of(events: Iterable[Mapping], username: str) -> dict[str, dict]:
    """The requests (one per ``auditID``, its last stage kept) that ``username`` sent.
    Pure."""
    out: dict[str, dict] = {}
    for e in events:
        if (e.get("user") or {}).get("username") == username:
            out[e["auditID"]] = dict(e)
    return out


def kind_of(event: Mapping) -> str:
    """``verb resource[/subresource]`` of an audit event, e.g. ``watch mpijobs``,
    ``get pods/log``. Pure."""
    ref = event.get("objectRef") or {}
    res = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return f"{event.get('verb', '')} {res}".strip()


def tally(requests: Mapping[str, Mapping]) -> Counter:
    """How many requests of each :func:`kind_of`. Pure."""
    return Counter(kind_of(e) for e in requests.values())
