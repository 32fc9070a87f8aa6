"""What makes a pipeline version's content for ``kfp-gpu submit`` (pure): the hash of the
uploaded YAML, the comparison with a version the KFP server already holds, and the spec
with caching turned off (``--no-cache``)."""

from __future__ import annotations

import copy
import hashlib
import json
import re

#: Length of the content hash in a default version name (hex digits of SHA-256).
HASH_DIGITS = 10
#: How the full content hash is kept in a version's description (read back to compare).
CONTENT_MARK = "content sha256:"
_CONTENT_RE = re.compile(re.escape(CONTENT_MARK) + r"([0-9a-f]{64})")


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the pipeline YAML text as uploaded (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _numbers_as_floats(obj):
    """``obj`` with every int a float (a protobuf ``Struct`` keeps numbers as doubles)."""
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        return float(obj)
    if isinstance(obj, dict):
        return {k: _numbers_as_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_numbers_as_floats(v) for v in obj]
    return obj


def canonical(obj) -> str:
    """Canonical JSON of a spec (sorted keys, no spaces, numbers as floats) for comparing
    what was uploaded with what the server returns."""
    return json.dumps(_numbers_as_floats(obj), sort_keys=True, separators=(",", ":"))


def same_content(version, docs: list, digest: str) -> bool | None:
    """Whether an existing pipeline version holds ``docs`` (the YAML documents uploaded,
    :func:`content_hash` ``digest``) (pure).

    The hash in its ``description`` (:data:`CONTENT_MARK`, written by ``kfp-gpu submit``) decides;
    else its ``pipeline_spec``, compared as :func:`canonical` JSON with the IR alone or, for
    a YAML with a platform spec, with ``{"pipeline_spec", "platform_spec"}`` (the v2beta1
    server's shape, recorded api/07); None when the version shows neither.
    """
    desc = str(getattr(version, "description", None) or "")
    found = _CONTENT_RE.search(desc)
    if found:
        return found.group(1) == digest
    server = getattr(version, "pipeline_spec", None)
    if not server:
        return None
    candidates = [docs[0]]
    if len(docs) > 1:
        candidates.append({"pipeline_spec": docs[0], "platform_spec": docs[1]})
    have = canonical(server)
    return any(canonical(c) == have for c in candidates)


def uncached(docs: list) -> list:
    """The YAML documents with every task's ``cachingOptions.enableCache`` false, in
    ``root.dag`` and in every DAG component (pure; a copy). kfp 2.17's
    ``_override_caching_options`` (kfp/client/client.py) does the same for ``root.dag``
    only."""
    out = copy.deepcopy(docs)
    spec = out[0]
    dags = [((spec.get("root") or {}).get("dag") or {})]
    dags += [c["dag"] for c in (spec.get("components") or {}).values()
             if isinstance(c, dict) and c.get("dag")]
    for dag in dags:
        for task in (dag.get("tasks") or {}).values():
            task.setdefault("cachingOptions", {})["enableCache"] = False
    return out
