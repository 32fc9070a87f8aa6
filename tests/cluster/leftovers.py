"""What a test module leaves on the plane: every cluster test must pass on a plane that
ran it before (``make cluster-up`` once, ``pytest -m cluster`` twice), so each module must
leave the plane as it found it -- every object it made deleted (its namespaces at least
terminating), none of the plane's own removed. tests/cluster/conftest.py snapshots the
plane around each module and around each session fixture (whose objects, such as the
Trainer runtime or the real node's ResourceSlices, belong to the session) and fails the
module's teardown with the difference.

A snapshot is one ``kubectl get`` of every listable kind the API server serves (its
discovery, so CRDs a tier added count too), as ``(kind, namespace, name)`` keys.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

#: Kinds the control plane and the kubelet make and change by themselves, whatever the
#: tests do: events, leader-election and node heartbeat Leases, Services' Endpoints and
#: EndpointSlices (kube-controller-manager), CSINode (the kubelet, after registration),
#: the APIService kube-apiserver registers for each CRD group version (crdregistration).
VOLATILE = frozenset({"Event", "Lease", "Endpoints", "EndpointSlice", "CSINode",
                      "APIService"})
#: What kube-controller-manager puts in every namespace (root-ca-cert-publisher,
#: serviceaccounts-controller): it comes and goes with its namespace.
PER_NAMESPACE = frozenset({("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")})

Key = tuple[str, str, str]  # (kind, namespace or "", name)


def parse(items: list[dict]) -> tuple[set[Key], set[str]]:
    """From ``items`` (a List's ``items``): the keys outside :data:`VOLATILE` and
    :data:`PER_NAMESPACE` of the objects not being deleted, and the names of the
    namespaces being deleted. An object with a ``deletionTimestamp`` counts as gone: its
    finalizers (a PersistentVolume's ``kubernetes.io/pv-protection`` while its claim's
    namespace terminates) end it without the tests. Pure."""
    keys, terminating = set(), set()
    for i in items:
        kind, meta = i.get("kind", ""), i.get("metadata") or {}
        if kind in VOLATILE or (kind, meta.get("name", "")) in PER_NAMESPACE:
            continue
        if meta.get("deletionTimestamp"):
            if kind == "Namespace":
                terminating.add(meta["name"])
            continue
        keys.add((kind, meta.get("namespace") or "", meta.get("name", "")))
    return keys, terminating


def difference(before, after, session: set[Key]) -> tuple[list[Key], list[Key]]:
    """(left, removed) between two :func:`parse` results: the objects created since
    ``before`` and the objects of ``before`` now gone; neither counting the session's objects
    (``session``) nor anything in a namespace that is being deleted (a test's namespace is
    deleted, not waited for) or was gone already. Pure."""
    (b, b_term), (a, a_term) = before, after
    namespaces = {n for k, _, n in a if k == "Namespace"}
    gone = b_term | a_term

    def counts(key: Key, live: set[str]) -> bool:
        kind, ns, name = key
        if key in session:
            return False
        if kind == "Namespace":
            return name not in gone
        return not ns or (ns in live and ns not in gone)

    live_before = {n for k, _, n in b if k == "Namespace"}
    left = sorted(k for k in a - b if counts(k, namespaces))
    removed = sorted(k for k in b - a if counts(k, namespaces | live_before))
    return left, removed


def describe(module: str, left: list[Key], removed: list[Key], limit: int = 12) -> str:
    """The failure message for ``module``. Pure."""

    def show(keys: list[Key]) -> str:
        shown = [f"{k}/{n}" if not ns else f"{k} {ns}/{n}" for k, ns, n in keys[:limit]]
        more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
        return ", ".join(shown) + more

    parts = []
    if left:
        parts.append(f"left {show(left)}")
    if removed:
        parts.append(f"removed {show(removed)}")
    return (f"{module} did not leave the plane as it found it ({'; '.join(parts)}): a second "
            "`pytest -m cluster` on this plane would meet them; delete what the module "
            "makes in its fixtures' teardown")


def resources(api_resources: str) -> list[str]:
    """The ``resource.group`` names (``kubectl get`` takes them) of the kinds outside
    :data:`VOLATILE` in ``kubectl api-resources --no-headers`` output, whose columns are
    NAME [SHORTNAMES] APIVERSION NAMESPACED KIND. Pure."""
    out = set()
    for line in api_resources.splitlines():
        cols = line.split()
        if len(cols) < 4 or cols[-1] in VOLATILE:
            continue
        group = cols[-3].rpartition("/")[0]
        out.add(f"{cols[0]}.{group}" if group else cols[0])
    return sorted(out)


def snapshot(plane) -> tuple[set[Key], set[str]]:
    """The plane's objects now (:func:`parse` of one ``kubectl get`` of every kind that can
    be listed and deleted, all namespaces)."""
    r = plane.kubectl("api-resources", "--verbs=list,delete", "--no-headers")
    out = plane.kubectl("get", ",".join(resources(r.stdout)), "-A", "-o", "json",
                        "--ignore-not-found", timeout=180)
    return parse(json.loads(out.stdout or '{"items": []}').get("items") or [])


@contextlib.contextmanager
def noted(plane, into: set) -> Iterator[None]:
    """Add to ``into`` the objects that appear on ``plane`` while the block runs (a session
    fixture's, which stay for the session)."""
    before = snapshot(plane)[0]
    yield
    into.update(snapshot(plane)[0] - before)
