"""One declaration per pipeline parameter: its type, the values it accepts and what it means.

Each pipeline's entry (``pipelines/<name>.py`` ``ENTRY``, :class:`kfp_gpu.dsl.entry.
PipelineEntry`) carries ``parameters=declare(...)``; from that one table

- ``build()`` checks the ``@dsl.pipeline`` signature against it (every parameter declared,
  same type, default accepted: :func:`check_signature`), so ``kfp-gpu compile`` refuses a
  default outside its range;
- ``kfp-gpu run --local`` and ``kfp-gpu submit`` check every ``-p key=value`` before any
  task starts or anything is uploaded (:func:`validate`, through
  :func:`kfp_gpu.catalog.arguments.checked`): a NaN learning rate, ``epochs=0`` or a dropout
  of 1.5 end in one line naming the accepted range, not in a traceback from inside a task;
- ``kfp-gpu params PIPELINE`` and docs/parameters.md show it
  (:func:`kfp_gpu.catalog.params.rows`).

The components keep their own checks (defence in depth: a component can be used outside
these pipelines). Types are the KFP IR parameter types (``pipeline_spec.proto``
``ParameterType``: STRING, NUMBER_INTEGER, NUMBER_DOUBLE, BOOLEAN) that
:mod:`kfp_gpu.catalog.arguments` parses ``-p`` text into.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kfp_gpu.dsl.paths import PathRule

STRING, INTEGER, DOUBLE, BOOLEAN = "STRING", "NUMBER_INTEGER", "NUMBER_DOUBLE", "BOOLEAN"
TYPE_WORDS = {STRING: "text", INTEGER: "an integer", DOUBLE: "a number", BOOLEAN: "true or false"}


@dataclass(frozen=True)
class Param:
    """One pipeline parameter.

    Attributes:
        name: the ``@dsl.pipeline`` argument.
        type: KFP IR type (:data:`STRING`, :data:`INTEGER`, :data:`DOUBLE`, :data:`BOOLEAN`).
        meaning: one line for ``--help``, the docs and error messages (with units).
        low / high: inclusive bounds for numbers (None = unbounded); ``low_open`` /
            ``high_open`` make them exclusive. Numbers must be finite (no NaN, no inf).
        choices: the accepted texts (empty = any text).
        required: text must be non-empty.
        rule: for text, a check raising ``ValueError`` (e.g. a Kubernetes name rule of
            :mod:`kfp_gpu.dsl.k8s_rules`), described by ``rule_words``.
        path: for text naming a file or folder: its keywords, store URI schemes and
            whether it is an input (:class:`kfp_gpu.dsl.paths.PathRule`); None = not
            a path.
    """

    name: str
    type: str
    meaning: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    required: bool = False
    rule: Callable[[str], object] | None = None
    rule_words: str = ""
    path: PathRule | None = None

    @property
    def path_keywords(self) -> tuple[str, ...] | None:
        """For an input path: the values that are not paths (``PathRule.keywords``)."""
        return self.path.keywords if self.path is not None else None

    def accepted(self) -> str:
        """The accepted values in words, e.g. ``an integer >= 1``, ``a number in [0, 1)``."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        word = TYPE_WORDS[self.type]
        if self.type == STRING:
            return self.rule_words or ("non-empty text" if self.required else "text")
        if self.low is not None and self.high is not None:
            return (f"{word} in {'(' if self.low_open else '['}{number_text(self.low)}, "
                    f"{number_text(self.high)}{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{word} {'>' if self.low_open else '>='} {number_text(self.low)}"
        if self.high is not None:
            return f"{word} {'<' if self.high_open else '<='} {number_text(self.high)}"
        return word

    def problem(self, value) -> str | None:
        """Why ``value`` is refused (None when accepted)."""
        if self.type == BOOLEAN:
            return None if isinstance(value, bool) else "not a boolean"
        if self.type == STRING:
            if not isinstance(value, str):
                return "not text"
            if self.choices and value not in self.choices:
                return "not one of the choices"
            if self.required and not value.strip():
                return "empty"
            try:
                if self.rule is not None:
                    self.rule(value)
            except ValueError:
                return "breaks its rule"
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "not a number"
        if self.type == INTEGER and not isinstance(value, int):
            return "not an integer"
        if not math.isfinite(value):
            return "not a finite number"
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return "too small"
        if self.high is not None and (value > self.high
                                      or (self.high_open and value == self.high)):
            return "too large"
        return None

    def check(self, value) -> None:
        """Raise ``ValueError`` (one line: name, value, accepted values, meaning) unless
        ``value`` is accepted.

        Raises:
            ValueError: the value is refused.
            kfp_gpu.inputs.errors.MalformedUri: a store URI not of the form :attr:`path`
                accepts (:meth:`PathRule.check_uri`, naming the form).
        """
        if self.problem(value) is not None:
            raise ValueError(f"parameter {self.name}={value!r} is refused: accepted is "
                             f"{self.accepted()} ({self.meaning})")
        if self.path is not None and isinstance(value, str):
            self.path.check_uri(self.name, value)


def number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def integer(name: str, meaning: str, low: int | None = None, high: int | None = None) -> Param:
    """An integer parameter in ``[low, high]``."""
    return Param(name, INTEGER, meaning, low, high)


def number(name: str, meaning: str, low: float | None = None, high: float | None = None,
           *, low_open: bool = False, high_open: bool = False) -> Param:
    """A finite float parameter between ``low`` and ``high`` (``*_open``: exclusive)."""
    return Param(name, DOUBLE, meaning, low, high, low_open, high_open)


def text(name: str, meaning: str, choices: Sequence[str] = (), required: bool = False,
         rule: Callable[[str], object] | None = None, rule_words: str = "",
         path_keywords: Sequence[str] | None = None, schemes: Sequence[str] = (),
         bucket_root: bool = False) -> Param:
    """A string parameter (``choices``: the accepted values; ``required``: non-empty;
    ``rule``: a check raising ``ValueError``, ``rule_words`` saying what it accepts;
    ``path_keywords``: an input path, with the values that are not paths; ``schemes``: the
    store URI schemes a path may have, ``bucket_root``: a folder that may be a bucket's
    root; see :class:`kfp_gpu.dsl.paths.PathRule`)."""
    path = None
    if path_keywords is not None or schemes:
        path = PathRule(None if path_keywords is None else tuple(path_keywords),
                        tuple(schemes), bucket_root)
    return Param(name, STRING, meaning, choices=tuple(choices), required=required, rule=rule,
                 rule_words=rule_words, path=path)


def flag(name: str, meaning: str) -> Param:
    """A boolean parameter."""
    return Param(name, BOOLEAN, meaning)


def declare(*params: Param) -> dict[str, Param]:
    """Name -> :class:`Param`, in declaration order.

    Raises:
        ValueError: a name declared twice.
    """
    out: dict[str, Param] = {}
    for p in params:
        if p.name in out:
            raise ValueError(f"parameter {p.name!r} declared twice")
        out[p.name] = p
    return out


def validate(declared: Mapping[str, Param], values: Mapping[str, object]) -> None:
    """Check typed pipeline arguments against the declaration.

    Raises:
        ValueError: an undeclared name (naming the accepted ones) or a refused value
            (:meth:`Param.check`).
    """
    for key, value in values.items():
        if key not in declared:
            raise ValueError(f"unknown parameter {key!r}; accepted: "
                             f"{', '.join(sorted(declared)) or '(none)'}")
        declared[key].check(value)


def spec_of(pipeline) -> dict:
    """The IR of a ``@dsl.pipeline`` object as the compiled YAML's first document holds it
    (``pipeline.pipeline_spec``, kfp 2.17 ``dsl/graph_component.py``, through protobuf's
    ``json_format.MessageToDict``, as kfp's compiler writes it)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(pipeline.pipeline_spec)


def signature(pipeline) -> dict[str, tuple[str, object, bool]]:
    """Name -> (IR type, default, has default) of a ``@dsl.pipeline`` (its component spec)."""
    aliases = {"String": STRING, "Integer": INTEGER, "Float": DOUBLE, "Boolean": BOOLEAN}
    out = {}
    for k, v in (pipeline.component_spec.inputs or {}).items():
        out[k] = (aliases.get(str(v.type), str(v.type)), v.default, bool(v.optional))
    return out


def check_signature(declared: Mapping[str, Param], pipeline) -> None:
    """The ``@dsl.pipeline`` ``pipeline`` takes exactly the declared parameters, with the
    declared types, and each default is accepted (called by every pipeline's ``build``, so
    ``kfp-gpu compile`` refuses a bad default).

    Raises:
        ValueError: a parameter missing from either side, a type that differs, or a default
            the declaration refuses.
    """
    sig = signature(pipeline)
    name = getattr(pipeline, "name", "pipeline")
    missing, extra = sorted(set(sig) - set(declared)), sorted(set(declared) - set(sig))
    if missing or extra:
        raise ValueError(f"{name}: parameters not declared: {missing}; declared but not "
                         f"parameters: {extra}")
    for key, (ptype, default, _) in sig.items():
        if declared[key].type != ptype:
            raise ValueError(f"{name}: parameter {key} is {ptype} but declared "
                             f"{declared[key].type}")
        if default is not None:
            declared[key].check(default)


def documented(declared: Mapping[str, Param]):
    """Decorator for a pipeline function, applied under ``@dsl.pipeline``: its docstring's
    ``Args:`` become each parameter's meaning and accepted values, which KFP's compiler
    copies into the compiled YAML (``root.inputDefinitions.parameters.<name>.description``,
    kfp 2.17 ``dsl/component_factory.py`` ``extract_component_interface`` reads the
    docstring), so the KFP UI shows them where a run is started."""
    def apply(func):
        func.__doc__ = "Pipeline parameters.\n\nArgs:\n" + "".join(
            f"    {p.name}: {p.meaning}; accepted: {p.accepted()}.\n"
            for p in declared.values())
        return func

    return apply
