"""Comparing what a page shows with what was produced (used by
tests/support/doc_blocks.py).

Console output is literal. A page marks what may differ, and nothing else does:

- a line that is only ``...``: any number of lines (none included);
- ``...`` inside a line: any text there;
- ``<N>`` an integer, ``<F>`` a number (``0.8413``, ``-1``, ``12``), ``<T>`` a duration as
  the CLI prints it (``85.0 s``).

Lines are compared without trailing blanks; blank lines at the end of either are dropped.

A YAML/JSON block that shows generated data is an excerpt of it: every key it shows must be
there with the value shown (recursively); a list shows every item unless its last item is
``...`` (then the items shown are the first ones); the scalar ``...`` stands for any value.
"""

from __future__ import annotations

import functools
import re

#: The named placeholders of console output and what each matches.
PLACEHOLDERS = {"<N>": r"\d+", "<F>": r"-?\d+(?:\.\d+)?(?:e-?\d+)?", "<T>": r"\d+(?:\.\d+)? s"}
_TOKEN = re.compile(r"(\.\.\.|<N>|<F>|<T>)")


def line_pattern(shown: str) -> re.Pattern:
    """The regular expression of one shown line (see the module docstring)."""
    parts = _TOKEN.split(shown.rstrip())
    return re.compile("".join(".*" if p == "..." else PLACEHOLDERS[p] if p in PLACEHOLDERS
                              else re.escape(p) for p in parts))


def _trim(lines: list[str]) -> list[str]:
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def matches(shown: list[str], actual: str) -> bool:
    """Whether ``actual`` (a command's whole output) is what the ``shown`` lines show."""
    want, got = _trim(shown), _trim(actual.splitlines())
    pats = [None if w.strip() == "..." else line_pattern(w) for w in want]

    @functools.cache
    def at(i: int, j: int) -> bool:
        if i == len(pats):
            return j == len(got)
        if pats[i] is None:  # any number of lines
            return any(at(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and bool(pats[i].fullmatch(got[j])) and at(i + 1, j + 1)

    return at(0, 0)


def first_difference(shown: list[str], actual: str) -> str:
    """A short explanation of where ``shown`` and ``actual`` part (for a failure message)."""
    want, got = _trim(shown), _trim(actual.splitlines())
    j = 0
    for w in want:
        if w.strip() == "...":
            continue
        rx = line_pattern(w)
        k = next((k for k in range(j, len(got)) if rx.fullmatch(got[k])), None)
        if k is None:
            return f"no line matches {w!r} (after line {j} of the output)"
        j = k + 1
    return "every shown line is there, but lines the page does not show are printed " \
           "(add a '...' line where output may vary)"


def excerpt_problems(shown, generated, where: str = "") -> list[str]:
    """Where ``shown`` (parsed YAML/JSON) is not an excerpt of ``generated``."""
    if shown == "...":
        return []
    if isinstance(shown, dict):
        if not isinstance(generated, dict):
            return [f"{where or '/'}: shown a mapping, generated {type(generated).__name__}"]
        out = []
        for key, value in shown.items():
            if key not in generated:
                out.append(f"{where}/{key}: not in what is generated (keys there: "
                           f"{sorted(map(str, generated))})")
            else:
                out += excerpt_problems(value, generated[key], f"{where}/{key}")
        return out
    if isinstance(shown, list):
        if not isinstance(generated, list):
            return [f"{where}: shown a list, generated {type(generated).__name__}"]
        prefix = bool(shown) and shown[-1] == "..."
        items = shown[:-1] if prefix else shown
        if len(items) > len(generated) or (not prefix and len(items) != len(generated)):
            return [f"{where}: {len(items)} items shown, {len(generated)} generated"
                    + ("" if prefix else " (end the list with '...' for the first ones)")]
        out = []
        for i, item in enumerate(items):
            out += excerpt_problems(item, generated[i], f"{where}[{i}]")
        return out
    if shown != generated:
        return [f"{where}: shown {shown!r}, generated {generated!r}"]
    return []


def documents_problems(shown: list, generated: list) -> list[str]:
    """Each shown document against the generated one of the same kind and name (else the
    one at the same position)."""
    out = []
    for i, doc in enumerate(shown):
        if doc is None:
            continue
        key = _key(doc)
        same = [g for g in generated if key and _key(g) == key]
        if same:
            target = same[0]
        elif i < len(generated) and not key:
            target = generated[i]
        else:
            out.append(f"document {i} ({key}): none generated with that kind and name "
                       f"(generated: {[_key(g) for g in generated]})")
            continue
        out += [f"document {i}: {p}" for p in excerpt_problems(doc, target)]
    return out


def _key(doc) -> tuple | None:
    if isinstance(doc, dict) and "kind" in doc:
        return (doc["kind"], (doc.get("metadata") or {}).get("name"))
    return None
