"""Signatures and calls of our functions in the docs' prose, compared with the functions
(used by tests/docs/test_docs_facts.py). A code span that is a whole call form, ``NAME(ARGS)``
with ARGS not empty, whose NAME is a public function or class of kfp_gpu (``job_name``,
``names.job_name``, ``kfp_gpu.mpi.spec.names.job_name``) is checked against
:func:`inspect.signature`, as one of two things (:func:`is_signature`):

- a signature (``job_name(run_id, task_name, *, prefix="mpijob", instance="")``): ARGS
  parse as a parameter list with a ``*``/``/`` marker or ``*args``/``**kwargs``, or as
  one whose defaults are literals or names, that names only the function's parameters and
  shows all those without a default. Then every parameter shown has the function's kind
  (positional, keyword-only, ...), the positional ones are its first ones in order, and a
  default shown as a literal is its default. So ``job_name(run_id, task_name,
  instance="")`` fails for a keyword-only ``instance``, and for a positional one that is
  not the third (it reads as the third positional);
- else a call (``parse("dra:mig=1g.10gb")``, ``job_name(run, task, instance=uri)``,
  ``launch(..., pending_timeout_s=600)``): it binds
  (:meth:`inspect.Signature.bind_partial`: no extra positional argument, no unknown
  keyword). ARGS that are not Python (``apply_to_task(count=<param>)``) are not checked.

NAME is resolved without importing every module: the top-level ``def``/``class`` names of
kfp_gpu/, components/ and pipelines/ (``kfp_gpu.components``/``kfp_gpu.pipelines``) are
read with :mod:`ast`; only the modules that define the name are imported. A bare name
defined by several modules must fit one of them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Source folder -> the package it is installed as (pyproject.toml package-dir).
PACKAGES = {"kfp_gpu": "kfp_gpu", "components": "kfp_gpu.components",
            "pipelines": "kfp_gpu.pipelines"}
#: A whole span that is a call form: a (dotted) name and parentheses around the rest.
CALL_FORM = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.DOTALL)
SPAN = re.compile(r"`([^`]+)`")


@functools.cache
def definitions() -> dict[str, tuple[str, ...]]:
    """Public top-level function and class name -> the modules defining it (sorted)."""
    out: dict[str, set[str]] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            if "tests" in rel.parts or "__pycache__" in rel.parts:
                continue
            parts = [p for p in rel.parts if p != "__init__"]
            module = ".".join([package, *parts])
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in tree.body:
                if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                        and not node.name.startswith("_")):
                    out.setdefault(node.name, set()).add(module)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def candidates(name: str) -> list[object]:
    """The kfp_gpu functions/classes ``name`` (bare, ``module.name`` with any trailing part
    of the module path, or fully dotted) can mean; [] when it names none of ours."""
    *qual, attr = name.split(".")
    modules = [m for m in definitions().get(attr, ())
               if not qual or m == ".".join(qual) or m.endswith("." + ".".join(qual))]
    objs = []
    for m in modules:
        obj = getattr(importlib.import_module(m), attr, None)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and \
                getattr(obj, "__module__", "").startswith("kfp_gpu"):
            objs.append(obj)
    return objs


@dataclass(frozen=True)
class Shown:
    """One parameter as a doc shows it: name, :class:`inspect.Parameter` kind, and its
    default's source text ("" when none is shown)."""

    name: str
    kind: inspect._ParameterKind
    default: str = ""


def shown_parameters(args: str) -> list[Shown] | None:
    """ARGS of a span read as a parameter list, or None when they are not one (a call)."""
    try:
        fn = ast.parse(f"def _f({args}): pass").body[0]
    except SyntaxError:
        return None
    a = fn.args
    P = inspect.Parameter
    positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + \
                 [(x, P.POSITIONAL_OR_KEYWORD) for x in a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [Shown(x.arg, k, ast.unparse(d) if d is not None else "")
           for (x, k), d in zip(positional, defaults, strict=True)]
    if a.vararg:
        out.append(Shown(a.vararg.arg, P.VAR_POSITIONAL))
    out += [Shown(x.arg, P.KEYWORD_ONLY, ast.unparse(d) if d is not None else "")
            for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg:
        out.append(Shown(a.kwarg.arg, P.VAR_KEYWORD))
    return out


def signature_problem(obj: object, shown: list[Shown]) -> str:
    """Why the parameter list ``shown`` is not ``obj``'s signature ("" when it is)."""
    P = inspect.Parameter
    real = inspect.signature(obj).parameters
    for s in shown:
        if s.name not in real:
            return f"no parameter {s.name!r} (it has {list(real)})"
        if real[s.name].kind != s.kind:
            return (f"{s.name!r} is {real[s.name].kind.description}, shown as "
                    f"{s.kind.description}")
        if s.default and real[s.name].default is not P.empty:
            try:
                value = ast.literal_eval(s.default)
            except ValueError:
                continue  # a name (images.DEFAULT_REGISTRY): not compared
            if value != real[s.name].default:
                return f"{s.name!r} defaults to {real[s.name].default!r}, shown as {s.default}"
    positional = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
    shown_pos = [s.name for s in shown if s.kind in positional]
    real_pos = [n for n, p in real.items() if p.kind in positional]
    if shown_pos != real_pos[:len(shown_pos)]:
        return f"positional parameters {real_pos}, shown as {shown_pos}"
    required = [n for n, p in real.items() if p.default is P.empty
                and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    missing = [n for n in required if n not in {s.name for s in shown}]
    return f"required parameters left out: {missing}" if missing else ""


def is_signature(obj: object, shown: list[Shown] | None) -> bool:
    """Whether a span's argument list reads as ``obj``'s signature rather than a call
    (``job_name(run, task, instance=uri)``, ``pod_fragment(container=NAME)``): it shows a
    ``*``/``/`` marker or ``*args``/``**kwargs``; or it parses as a parameter list whose
    defaults are literals or names, names only parameters ``obj`` has and shows every one
    without a default."""
    if shown is None:
        return False
    P = inspect.Parameter
    if any(s.kind in (P.POSITIONAL_ONLY, P.KEYWORD_ONLY, P.VAR_POSITIONAL, P.VAR_KEYWORD)
           for s in shown):
        return True
    real = inspect.signature(obj).parameters
    required = {n for n, p in real.items() if p.default is P.empty
                and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)}
    return (all(s.name in real for s in shown) and required <= {s.name for s in shown}
            and all(_simple(s.default) for s in shown))


def _simple(default: str) -> bool:
    """A default as a signature shows it: none, a literal, or a (dotted) name."""
    if not default:
        return True
    node = ast.parse(default, mode="eval").body
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return isinstance(node, ast.Name | ast.Attribute)


def call_problem(obj: object, args: str) -> str:
    """Why the call ``NAME(args)`` does not bind to ``obj`` ("" when it does or when
    ``args`` is not Python, e.g. elided with prose)."""
    try:
        call = ast.parse(f"_f({args})", mode="eval").body
    except SyntaxError:
        return ""
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return ""
    positional = [a for a in call.args
                  if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
    try:
        inspect.signature(obj).bind_partial(*[None] * len(positional),
                                            **{k.arg: None for k in call.keywords})
    except TypeError as e:
        return str(e)
    return ""


def names_ours(span: str) -> bool:
    """Whether ``span`` is a call form with arguments naming a function or class of ours
    (what :func:`problems` checks)."""
    m = CALL_FORM.match(span.strip())
    return bool(m and m.group(2).strip() and candidates(m.group(1)))


def problems(span: str) -> list[str]:
    """What is wrong with ``span`` as a signature or call of ours ([] when right, or when it
    names none of ours). A bare name several modules define must fit one of them."""
    m = CALL_FORM.match(span.strip())
    if not m:
        return []
    name, args = m.group(1), m.group(2)
    objs = candidates(name) if args.strip() else []  # `f()`: the function named, not a call
    if not objs:
        return []
    shown = shown_parameters(args)
    found = [signature_problem(o, shown) if is_signature(o, shown) else call_problem(o, args)
             for o in objs]
    if any(not f for f in found):
        return []
    return [f"`{span}`: {f} ({o.__module__}.{o.__qualname__}{inspect.signature(o)})"
            for o, f in zip(objs, found, strict=True)]


def spans(text: str) -> list[str]:
    """The code spans of markdown ``text`` outside fenced blocks (a span may wrap a line)."""
    prose = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.DOTALL | re.MULTILINE)
    return [re.sub(r"\s*\n\s*", " ", s) for s in SPAN.findall(prose)]
