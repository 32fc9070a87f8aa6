"""The code blocks of the docs as Sybil examples, each with the evaluator of its language
(issue 32 item 1; used by tests/test_docs_run.py).

- ``python``: runs in the document's namespace (shared by its blocks, as a reader keeps
  one interpreter open) inside a KFP pipeline context, so a snippet may call components
  and ``dsl.If`` as in a pipeline function; an HTML comment block
  ``<!-- invisible-code-block: python ... -->`` (Sybil's) gives it what the page assumes
  (an upstream task, a job). A block with a ``# needs: <reason>`` line is compiled and its
  imports run; the rest needs what the reason names.
- ``bash`` / ``sh`` / ``shell``: every command is checked (:mod:`tests.doc_commands`); a
  block without ``# needs:`` is run, command by command, and each exit status compared.
- ``console``: ``$ command`` lines are run like bash; the lines under each are its shown
  output, compared line by line in order, ``...`` matching anything and every number
  matching any number (small parameters give other figures).
- ``yaml`` / ``json``: parsed.
- no language: shown output; one that starts like a command (``$ ``, ``kfp-gpu ``,
  ``python ``) fails: tag it. ``text``: a picture or a layout, not evaluated. Any other language fails until an
  evaluator exists here, so nothing in the docs goes untested.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
from pathlib import Path

import yaml
from sybil import Sybil
from sybil.parsers.abstract import AbstractCodeBlockParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

from tests import doc_commands as dc

SHELL = ("bash", "sh", "shell")


def _needs(source: str) -> str | None:
    m = dc.NEEDS.search(source)
    return m.group(1) if m else None


def evaluate_python(example) -> None:
    """Compile the block; run it (or, with ``# needs:``, only its imports)."""
    source, ns = str(example.parsed), example.namespace
    where = f"{example.path}:{example.line}"
    tree = ast.parse(source, where)
    if _needs(source):
        tree.body = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    code = compile(tree, where, "exec", dont_inherit=True)  # not this module's __future__
    from kfp.dsl import pipeline_context

    pipeline = ns.setdefault("_pipeline", pipeline_context.Pipeline("doc-snippets"))
    # A block that defines a pipeline builds it itself (KFP refuses nested pipelines).
    context = contextlib.nullcontext() if "@dsl.pipeline" in source else pipeline
    cwd = os.getcwd()
    os.chdir(ns["_sandbox"])
    try:
        with context:  # one pipeline per page, entered for each of its blocks
            exec(code, ns)  # noqa: S102 - the docs' own snippet, run as a reader would
    finally:
        os.chdir(cwd)


def _run_checked(cmd: dc.Command, ns: dict) -> str:
    problems = dc.check_command(cmd)
    assert not problems, f"{cmd.text}: {'; '.join(problems)}"
    proc = dc.run(cmd, ns["_sandbox"], ns["_tmp"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == cmd.expect, (
        f"`{cmd.text}` exited {proc.returncode}, the doc says {cmd.expect}:\n{out[-3000:]}")
    return out


def evaluate_shell(example) -> None:
    """Check every command; run them unless the block says ``# needs:``."""
    source, ns = str(example.parsed), example.namespace
    commands = dc.split_commands(source)
    assert commands, "a shell block without a command"
    if _needs(source):
        problems = [p for c in commands for p in dc.check_command(c)]
        assert not problems, "; ".join(problems)
        return
    for cmd in commands:
        assert dc.runnable(cmd.argv, cmd.expect), (
            f"`{cmd.text}` cannot run in the doc tests ({dc.program(cmd.argv)[0]}): add a "
            "line '# needs: <what it needs>' to the block")
    for cmd in commands:
        _run_checked(cmd, ns)


def _pattern(line: str) -> re.Pattern:
    parts = re.split(r"(\.\.\.|\d+(?:\.\d+)?)", line.strip())
    rx = "".join(".*" if p == "..." else r"\d+(?:\.\d+)?" if p and p[0].isdigit()
                 else re.escape(p) for p in parts)
    return re.compile(rx)


def compare_output(expected: list[str], actual: str) -> list[str]:
    """The expected lines (patterns, see the module docstring) not found in order."""
    lines, i, missing = actual.splitlines(), 0, []
    for want in (w for w in expected if w.strip()):
        rx = _pattern(want)
        j = next((k for k in range(i, len(lines)) if rx.fullmatch(lines[k].strip())), None)
        if j is None:
            missing.append(want)
        else:
            i = j + 1
    return missing


def console_steps(source: str) -> list[tuple[str, list[str]]]:
    """``[(command text, shown output lines)]`` of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def evaluate_console(example) -> None:
    """Run each ``$`` command and compare its shown output (see the module docstring)."""
    source, ns = str(example.parsed), example.namespace
    steps = console_steps(source)
    assert steps, "a console block without a '$ ' command"
    for text, shown in steps:
        (cmd,) = dc.split_commands(text)
        assert _needs(source) or dc.runnable(cmd.argv, cmd.expect), (
            f"`{text}` cannot run in the doc tests: add a line '# needs: <what it needs>'")
        if _needs(source):
            assert not dc.check_command(cmd), dc.check_command(cmd)
            continue
        out = _run_checked(cmd, ns)
        missing = compare_output(shown, out)
        assert not missing, (f"`{text}` did not print, in this order: {missing}\n"
                             f"it printed:\n{out[-3000:]}")


def evaluate_data(example) -> None:
    """YAML (every document) or JSON parses."""
    source = str(example.parsed)
    if example.region.lexemes["arguments"] == "json":
        json.loads(source)
    else:
        list(yaml.safe_load_all(source))


def evaluate_text(example) -> None:
    """An untagged block is output or a picture, never a command."""
    first = next((ln.strip() for ln in str(example.parsed).splitlines() if ln.strip()), "")
    assert not first.startswith(("$ ", "kfp-gpu ", "python ", ".venv/bin/")), (
        f"an untagged block that starts with a command ({first!r}): tag it bash or console")


def evaluate_nothing(example) -> None:
    """``text``: the author says it is neither a command nor data (a picture, a layout)."""


EVALUATORS = {"python": evaluate_python, "console": evaluate_console,
              "yaml": evaluate_data, "json": evaluate_data, "": evaluate_text,
              "text": evaluate_nothing, **dict.fromkeys(SHELL, evaluate_shell)}


def evaluate_unknown(example) -> None:
    raise AssertionError(f"no evaluator for ```{example.region.lexemes['arguments']} blocks: "
                         "add one in tests/doc_blocks.py")


class AnyBlockParser(AbstractCodeBlockParser):
    """Every fenced block (and Sybil's invisible code blocks), any language or none."""

    language = "any"

    def __init__(self):
        super().__init__([FencedCodeBlockLexer(language=r"[\w+-]*",
                                               mapping={"language": "arguments",
                                                        "source": "source"}),
                          DirectiveInHTMLCommentLexer(directive=r"(invisible-)?code(-block)?",
                                                      arguments=".+")])

    def __call__(self, document):
        for region in self.lexers(document):
            lang = region.lexemes["arguments"].strip()
            region.parsed = region.lexemes["source"]
            region.evaluator = EVALUATORS.get(lang, evaluate_unknown)
            yield region


SYBIL = Sybil(parsers=[AnyBlockParser()])


def parse(path: Path):
    """The Sybil document of ``path`` (its examples in page order)."""
    return SYBIL.parse(path)
