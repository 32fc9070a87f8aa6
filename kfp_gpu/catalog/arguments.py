"""Pipeline parameters given on the command line (``-p key=value``), typed once.

One parser for ``kfp-gpu run --local`` and ``kfp-gpu submit``: a catalog pipeline's values
are typed by its declaration (:func:`checked`), a compiled pipeline from elsewhere by its
spec (:func:`types_of_spec`); both are KFP IR parameter types
(``root.inputDefinitions.parameters.<name>.parameterType`` in the compiled YAML: STRING,
NUMBER_INTEGER, NUMBER_DOUBLE, BOOLEAN, LIST, STRUCT; kfp ``pipeline_spec.proto``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

_WORDS = {"NUMBER_INTEGER": "an integer", "NUMBER_DOUBLE": "a number", "BOOLEAN": "a boolean",
          "LIST": "a JSON list", "STRUCT": "a JSON object"}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def split_pairs(pairs: list[str]) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}`` (text values).

    Raises:
        ValueError: an item without ``=`` or without a key.
    """
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--param takes key=value, got {p!r}")
        out[key.strip()] = value
    return out


def types_of_spec(spec: Mapping) -> dict[str, str]:
    """Parameter name -> IR type of a compiled pipeline (the IR dict)."""
    defs = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    return {k: v.get("parameterType", "STRING") for k, v in defs.items()}


def to_bool(v: str) -> bool:
    """``true/false/1/0/yes/no/on/off`` (any case) as a bool.

    Raises:
        ValueError: anything else.
    """
    low = v.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"not a boolean: {v!r} (accepted: true/false/1/0/yes/no)")


def coerce(raw: str, ptype: str):
    """``raw`` as a value of IR type ``ptype`` (unknown types stay text).

    Raises:
        ValueError: ``raw`` does not parse as ``ptype``.
    """
    if ptype == "NUMBER_INTEGER":
        return int(raw)
    if ptype == "NUMBER_DOUBLE":
        return float(raw)
    if ptype == "BOOLEAN":
        return to_bool(raw)
    if ptype in ("LIST", "STRUCT"):
        return json.loads(raw)
    return raw


def checked(pipeline_name: str, raw: Mapping[str, str], local: bool = False) -> dict:
    """``-p`` text values of catalog pipeline ``pipeline_name``, typed by its parameter
    declaration (``PARAMETERS``, :mod:`kfp_gpu.dsl.parameters`) and checked against it:
    what ``run --local`` and ``submit`` call before any task starts or anything is uploaded.
    ``local``: the run is on this machine, so input paths must exist here too, and a
    ``gs://``/``s3://`` input in its store (asked once, cheaply: a submitted run's tasks
    read the store with the cluster's credentials and endpoint, which this machine may not
    have, so there they check it themselves).

    Raises:
        ValueError: unknown pipeline or parameter, a value that does not parse as its type,
            one outside its declared range (one line naming the accepted values), a store
            URI of the wrong form (``MalformedUri``), or a parameter without a default
            left out.
        FileNotFoundError: ``local`` and an input path or store object that does not exist.
        kfp_gpu.inputs.uris.StoreUnreachable: ``local`` and the store of an input does
            not answer.
    """
    from kfp_gpu.catalog import params
    from kfp_gpu.dsl import parameters, paths

    declared = params.declared(pipeline_name)
    values = typed(raw, {k: p.type for k, p in declared.items()})
    parameters.validate(declared, values)
    params.missing(pipeline_name, list(values))
    if local:
        paths.check_local_paths(declared, values)
        paths.check_remote_inputs(declared, values)
    return values


def typed(raw: Mapping[str, str], types: Mapping[str, str]) -> dict:
    """Text values -> values of the pipeline's parameter types.

    Raises:
        ValueError: an unknown parameter (naming the accepted ones) or a value that does
            not parse as its parameter's type.
    """
    out = {}
    for key, value in raw.items():
        if key not in types:
            raise ValueError(f"unknown parameter {key!r}; accepted: "
                             f"{', '.join(sorted(types)) or '(none)'}")
        try:
            out[key] = coerce(value, types[key])
        except ValueError as e:
            kind = _WORDS.get(types[key], types[key])
            raise ValueError(f"parameter {key}: {value!r} is not {kind} ({e})") from None
    return out
