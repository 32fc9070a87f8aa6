"""Validate objects against the upstream CRDs in ``<data dir>/upstream``, read in place.

The CRD files (``kubeflow.org_mpijobs.yaml`` of kubeflow/mpi-operator,
``trainer.kubeflow.org_trainjobs.yaml`` / ``..._clustertrainingruntimes.yaml`` of
kubeflow/trainer; see ``upstream/README.md`` beside them) are never copied into the
repository. Each ``spec.versions[].schema.openAPIV3Schema`` is a structural OpenAPI v3
schema (Kubernetes "CustomResourceDefinition" docs, "Specifying a structural schema"); it
is turned into a JSON Schema for the ``jsonschema`` library:

- ``x-kubernetes-int-or-string: true`` -> ``anyOf: [{type: integer}, {type: string}]``
  (added when the CRD generator did not write the ``anyOf`` itself), so ``"500m"`` and
  ``8`` pass and ``true`` or ``{}`` do not; the ``pattern`` next to it then only applies to
  strings, as in the API server.
- ``nullable: true`` -> ``null`` is also accepted.
- ``x-kubernetes-list-type: map`` + ``x-kubernetes-list-map-keys``: two items with the same
  key values are an error (the API server refuses duplicate ``env`` names, containers, ...).
  ``x-kubernetes-list-type: set``: items must be unique.
- ``x-kubernetes-preserve-unknown-fields: true``: any extra fields are accepted there.
- strict (the default): an object schema with ``properties`` rejects unknown fields
  (``additionalProperties: false``), as ``kubectl apply`` does with its default
  ``--validate=strict``; without strict they are accepted (the API server then prunes them).
- every other ``x-kubernetes-*`` key (``x-kubernetes-validations`` CEL rules,
  ``x-kubernetes-map-type``, ``x-kubernetes-embedded-resource``) is ignored: CEL rules are
  not evaluated here.

``metadata`` is ``type: object`` in CRD schemas; the API server checks it separately
(names, labels). Use the builders' own name checks for that.

API::

    from tests.support import upstream_crds
    upstream_crds.validate(trainjob_dict)            # raises CRDValidationError (JSON path)
    v = upstream_crds.validator("TrainJob")          # a jsonschema validator
    sorted(e.json_path for e in v.iter_errors(obj))

Kinds are looked up by ``kind`` (``MPIJob``, ``TrainJob``, ``ClusterTrainingRuntime``) or
``(apiVersion, kind)``; the data directory is ``$KFP_GPU_DATA_DIR`` or ``../shared/data``
beside the checkout (the rule of the conftest's ``data_dir``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import jsonschema
import yaml
from jsonschema import ValidationError, validators

REPO = Path(__file__).resolve().parents[2]

_SKIP_KEYS = {"x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
              "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "nullable"}


class CRDValidationError(ValueError):
    """An object does not match its upstream CRD schema.

    Attributes:
        errors: the ``jsonschema.ValidationError`` list (each has ``.json_path``).
        paths: the JSON paths (``$.spec.trainer.numNodes``) of the errors, in order.
    """

    def __init__(self, what: str, errors: list[ValidationError]):
        self.errors = errors
        self.paths = [e.json_path for e in errors]
        lines = [f"  {e.json_path}: {e.message[:300]}" for e in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        super().__init__(f"{what} does not match the upstream CRD schema:\n"
                         + "\n".join(lines) + more)


def upstream_dir() -> Path:
    """``<data dir>/upstream`` (fails loudly when missing: the tests need the real CRDs)."""
    base = Path(os.environ.get("KFP_GPU_DATA_DIR", REPO.parent / "shared" / "data"))
    d = base.resolve() / "upstream"
    if not d.is_dir():
        raise FileNotFoundError(f"upstream CRD directory not found: {d} (set KFP_GPU_DATA_DIR)")
    return d


@cache
def _crds() -> dict[tuple[str, str], tuple[Path, dict]]:
    """``(apiVersion, kind) -> (file, openAPIV3Schema)`` for every CRD under upstream/."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: dict[tuple[str, str], tuple[Path, dict]] = {}
    for path in sorted(upstream_dir().rglob("*.yaml")):
        with path.open(encoding="utf-8") as f:
            for doc in yaml.load_all(f, Loader=loader):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for version in spec.get("versions") or []:
                    api_version = f"{spec['group']}/{version['name']}"
                    schema = (version.get("schema") or {}).get("openAPIV3Schema")
                    if schema:
                        out[(api_version, spec["names"]["kind"])] = (path, schema)
    return out


def kinds() -> list[tuple[str, str]]:
    """Every ``(apiVersion, kind)`` an upstream CRD defines."""
    return sorted(_crds())


def _key(kind: str, api_version: str | None) -> tuple[str, str]:
    matches = [k for k in _crds() if k[1] == kind and api_version in (None, k[0])]
    if len(matches) != 1:
        known = ", ".join(f"{a} {k}" for a, k in kinds())
        what = f"{api_version} {kind}" if api_version else kind
        problem = "more than one upstream CRD" if matches else "no upstream CRD"
        raise KeyError(f"{problem} for {what} (known: {known})")
    return matches[0]


def to_json_schema(schema: Mapping, strict: bool = True) -> dict:
    """The JSON Schema for one CRD ``openAPIV3Schema`` (see the module docstring)."""
    out: dict = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") and key not in _SKIP_KEYS:
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {k: to_json_schema(v, strict) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            out[key] = to_json_schema(value, strict)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(v, strict) for v in value]
        elif key not in _SKIP_KEYS:
            out[key] = copy.deepcopy(value)
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if strict and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    if schema.get("x-kubernetes-list-type") == "map":
        out["x-list-map-keys"] = list(schema.get("x-kubernetes-list-map-keys") or [])
    elif schema.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def _list_map_keys(validator, keys, instance, schema) -> Iterator[ValidationError]:
    """``x-kubernetes-list-type: map``: no two items with the same key values."""
    if not validator.is_type(instance, "array"):
        return
    seen: dict[tuple, int] = {}
    for i, item in enumerate(instance):
        if not isinstance(item, Mapping):
            continue
        key = tuple(item.get(k) for k in keys)
        if key in seen:
            shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, key, strict=True))
            yield ValidationError(f"duplicate entry ({shown}) at items {seen[key]} and {i}: a "
                                  f"list-map keyed by {keys} needs unique keys", path=[i])
        else:
            seen[key] = i


_Validator = validators.extend(jsonschema.Draft202012Validator,
                               {"x-list-map-keys": _list_map_keys})


@cache
def _validator(api_version: str, kind: str, strict: bool):
    path, schema = _crds()[(api_version, kind)]
    json_schema = to_json_schema(schema, strict)
    json_schema["$comment"] = f"from {path}"
    return _Validator(json_schema)


def validator(kind: str, api_version: str | None = None, *, strict: bool = True):
    """A ``jsonschema`` validator for ``kind`` (``MPIJob``, ``TrainJob``,
    ``ClusterTrainingRuntime``...) from its upstream CRD; ``api_version`` picks the version
    when a CRD serves several.

    Raises:
        KeyError: no (or more than one) upstream CRD defines ``kind``.
    """
    return _validator(*_key(kind, api_version), strict)


def errors(obj: Mapping, *, strict: bool = True) -> list[ValidationError]:
    """All schema errors of ``obj`` (dispatched on its apiVersion and kind), path order."""
    v = validator(obj.get("kind", ""), obj.get("apiVersion"), strict=strict)
    return sorted(v.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)),
                                                     e.message))


def validate(obj: Mapping, *, strict: bool = True) -> None:
    """Check ``obj`` against the upstream CRD of its ``apiVersion``/``kind``.

    Raises:
        CRDValidationError: listing each error with its JSON path.
        KeyError: no upstream CRD for the object's apiVersion/kind.
    """
    found = errors(obj, strict=strict)
    if found:
        name = (obj.get("metadata") or {}).get("name", "")
        raise CRDValidationError(f"{obj.get('apiVersion')} {obj.get('kind')} {name}".strip(),
                                 found)
