"""Unknown fields in a custom resource the API double is sent, as kube-apiserver answers.

A CRD's structural schema prunes every field it does not declare (apiextensions-apiserver
v0.36.3 ``pkg/apiserver/schema/pruning``), and the ``fieldValidation`` query parameter
(KEP-2885; k8s.io/apiserver v0.36.3 ``pkg/endpoints/handlers/rest.go``) says what the
client hears of it: ``Warn`` (the default when unset) answers 201 with one
``Warning: 299 - "unknown field \\"spec.x\\""`` header per field; ``Strict`` refuses the
request (400 ``BadRequest``: ``MPIJob in version "v2beta1" cannot be handled as a MPIJob:
strict decoding error: unknown field "spec.x"``); ``Ignore`` prunes silently. Both texts
were read from kube-apiserver v1.36.3 on the test control plane
(tests/cluster/test_fidelity.py pins them). The schema is the upstream CRD's
(:mod:`tests.support.upstream_crds`, strict); kinds without one (ResourceClaimTemplate) are kept
as sent.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from tests.support import upstream_crds


def unknown(obj: Mapping) -> list[tuple[tuple, str]]:
    """``(path to the parent object, field name)`` of every undeclared field of ``obj``
    (``status`` and ``metadata`` aside: the server ignores the first on create and checks
    the second itself)."""
    body = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    try:
        errs = upstream_crds.errors(body)
    except KeyError:  # no CRD: a built-in kind served as it is
        return []
    out = []
    for e in errs:
        if e.validator != "additionalProperties":
            continue
        declared = set(e.schema.get("properties") or {})
        for key in sorted(set(e.instance) - declared):
            out.append((tuple(e.absolute_path), key))
    return out


def dotted(path: tuple, key: str) -> str:
    """The server's name for a field: ``spec.mpiReplicaSpecs.Worker.template.spec
    .containers[0].imagePull``."""
    text = ""
    for p in (*path, key):
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text


def pruned(obj: Mapping, fields: list[tuple[tuple, str]]) -> dict:
    """A copy of ``obj`` without ``fields``."""
    out = copy.deepcopy(dict(obj))
    for path, key in fields:
        node = out
        for p in path:
            node = node[p]
        node.pop(key, None)
    return out


def strict_message(obj: Mapping, fields: list[tuple[tuple, str]]) -> str:
    """The 400 message of ``fieldValidation=Strict``."""
    kind, version = obj.get("kind", ""), str(obj.get("apiVersion", "")).rpartition("/")[2]
    names = ", ".join(f'unknown field "{dotted(p, k)}"' for p, k in fields)
    return (f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding '
            f"error: {names}")
