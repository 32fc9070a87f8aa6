"""The code blocks of the docs as Sybil examples, each with the evaluator of its language
(used by tests/docs/test_docs_run.py).

What a block needs is its ``# needs:`` line, in the vocabulary of :mod:`tests.support.doc_needs`
(``docker``, ``registry``, ``cluster`` run under the ``container`` / ``cluster`` markers;
``gpu``, ``kfp``, ``release``, ``internet``, ``ci`` are checked and then skipped with their
reason); directives above a block (``<!-- docs-test: ... -->``) are read there too.

- ``python``: runs in the document's namespace (shared by its blocks, as a reader keeps
  one interpreter open) inside a KFP pipeline context, so a snippet may call components
  and ``dsl.If`` as in a pipeline function; an HTML comment block
  ``<!-- invisible-code-block: python ... -->`` (Sybil's) gives it what the page assumes
  (an upstream task, a job). A skipped block is compiled and its imports run.
- ``bash`` / ``sh`` / ``shell``: the block as written, as one ``bash -e -o pipefail`` script
  in the sandbox (:func:`tests.support.doc_commands.bash_script`: ``# exit N`` lines must exit N).
  A skipped block, or one marked ``synopsis``, has each command checked instead.
- ``console``: the ``$ command`` lines run as one bash session (a variable one sets is there
  for the next); the lines under each are its output, compared literally but for what the
  page marks (:mod:`tests.support.doc_output`: ``...``, ``<N>``, ``<F>``, ``<T>``).
- ``yaml`` / ``json``: parsed; then compared with the data it shows
  (``source=...``, :mod:`tests.support.doc_sources`), or marked ``illustration``: one of the two.
- no language: shown output; one that starts like a command (``$ ``, ``kfp-gpu ``,
  ``python ``) fails: tag it. ``text``: a picture or a layout, not evaluated, except a
  ``layout`` folder tree, whose entries must exist. Any other language fails until an
  evaluator exists here, so nothing in the docs goes untested.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from sybil import Sybil
from sybil.parsers.abstract import AbstractCodeBlockParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

from tests.support import doc_commands as dc
from tests.support import doc_needs, doc_output, doc_sources

SHELL = ("bash", "sh", "shell")
REPO = Path(__file__).resolve().parents[2]


def language(example) -> str:
    return example.region.lexemes["arguments"].strip()


def needs_of(example) -> doc_needs.Needs:
    return doc_needs.parse_needs(str(example.parsed))


def directives_of(example) -> doc_needs.Directives:
    return doc_needs.directives(example.document.text, example.region.start)


def _no_reinstall(source: str, cwd: Path) -> None:
    """A block that runs ``make`` would run ``scripts/setup.sh`` on the checkout's own
    ``.venv`` (the sandbox links it) when the venv is older than what it is made from:
    refuse that instead of reinstalling this machine's venv from inside a test."""
    if re.search(r"(^|[\s;&|(])make\b", source):
        stale = dc.run_bash("make -q .venv/.installed", cwd, dc.environment())
        assert stale.returncode == 0, (".venv is older than pyproject.toml / requirements / "
                                       "scripts/setup.sh: run `make setup` first")


def _env(example) -> dict[str, str]:
    """The block's environment: the capabilities the test item brought (``_env`` in the
    page's namespace) and the block's ``env`` directive."""
    return dc.environment({**example.namespace.get("_env", {}), **directives_of(example).env})


def evaluate_python(example) -> None:
    """Compile the block; run it (or, when it is skipped, only its imports)."""
    source, ns = str(example.parsed), example.namespace
    needs = needs_of(example)
    where = f"{example.path}:{example.line}"
    tree = ast.parse(source, where)
    if needs.skip:
        tree.body = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    code = compile(tree, where, "exec", dont_inherit=True)  # not this module's __future__
    from kfp.dsl import pipeline_context

    pipeline = ns.setdefault("_pipeline", pipeline_context.Pipeline("doc-snippets"))
    # A block that defines a pipeline builds it itself (KFP refuses nested pipelines).
    context = contextlib.nullcontext() if "@dsl.pipeline" in source else pipeline
    cwd, saved = os.getcwd(), dict(os.environ)
    os.chdir(ns["_sandbox"])
    os.environ.update(ns.get("_env", {}))
    try:
        with context:  # one pipeline per page, entered for each of its blocks
            exec(code, ns)  # noqa: S102 - the docs' own snippet, run as a reader would
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)
    if needs.skip:
        pytest.skip(needs.skip)


def _static_checks(commands: list[dc.Command]) -> None:
    problems = [f"`{c.text}`: {p}" for c in commands for p in dc.check_command(c)]
    assert not problems, "\n".join(problems)


def evaluate_shell(example) -> None:
    """Run the block as written (see the module docstring), or check it."""
    source, ns = str(example.parsed), example.namespace
    needs, directives = needs_of(example), directives_of(example)
    commands = dc.split_commands(source)
    assert commands, "a shell block without a command"
    if directives.synopsis:  # command syntax, not a command: never run
        assert not needs.words, "a synopsis is not run: it needs nothing"
        _static_checks(commands)
        return
    problems = doc_needs.check_block(needs, commands)
    assert not problems, "\n".join(problems)
    if needs.skip:
        _static_checks(commands)
        pytest.skip(needs.skip)
    _no_reinstall(source, ns["_sandbox"])
    proc = dc.run_bash(dc.bash_script(source), ns["_sandbox"], _env(example))
    assert proc.returncode == 0, (f"the block exited {proc.returncode}:\n"
                                  f"{proc.stdout[-4000:]}")


#: What ends each console step's output in the session's output: the step's exit status.
STEP_MARK = "@@docs-step@@"


def console_steps(source: str) -> list[tuple[str, list[str]]]:
    """``[(command text, shown output lines)]`` of a console block; a ``$`` line ending in
    ``\\`` goes on with the next line."""
    steps: list[tuple[str, list[str]]] = []
    going_on = False
    for line in source.splitlines():
        if going_on:
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        elif line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        going_on = bool(steps) and not steps[-1][1] and line.rstrip().endswith("\\")
    return steps


def console_script(steps: list[tuple[str, list[str]]]) -> str:
    """One bash session for the block's commands: after each, its exit status is printed
    after :data:`STEP_MARK`; the session stops at the first one that is not the page's."""
    lines = ["exec 2>&1"]
    for text, _ in steps:
        m = dc.EXIT.search(text.splitlines()[-1])
        want = int(m.group(1)) if m else 0
        lines += [text, (f'__rc=$?; printf "\\n{STEP_MARK} %d\\n" "$__rc"; '
                         f'[ "$__rc" -eq {want} ] || exit 0')]
    return "\n".join(lines) + "\n"


def split_session(out: str) -> list[tuple[str, int]]:
    """The session's output cut at each :data:`STEP_MARK`: ``[(output, exit status)]``."""
    parts = re.split(rf"\n{re.escape(STEP_MARK)} (\d+)\n", out)
    return [(parts[i], int(parts[i + 1])) for i in range(0, len(parts) - 1, 2)]


def check_console(steps: list[tuple[str, list[str]]], out: str) -> None:
    """Each step's exit status and output are what the page shows."""
    done = split_session(out)
    for i, (text, shown) in enumerate(steps):
        assert i < len(done), (f"`{text}` did not run (the session ended before it):\n"
                               f"{out[-3000:]}")
        output, rc = done[i]
        m = dc.EXIT.search(text.splitlines()[-1])
        want = int(m.group(1)) if m else 0
        assert rc == want, f"`{text}` exited {rc}, the page says {want}:\n{output[-3000:]}"
        assert doc_output.matches(shown, output), (
            f"`{text}` did not print what the page shows: "
            f"{doc_output.first_difference(shown, output)}\nit printed:\n{output[-3000:]}")


def evaluate_console(example) -> None:
    """Run the ``$`` commands as one session and compare each one's output."""
    source, ns = str(example.parsed), example.namespace
    steps = console_steps(source)
    assert steps, "a console block without a '$ ' command"
    needs = needs_of(example)
    commands = [c for text, _ in steps for c in dc.split_commands(text)]
    problems = doc_needs.check_block(needs, commands)
    assert not problems, "\n".join(problems)
    if needs.skip:
        _static_checks(commands)
        pytest.skip(needs.skip)
    _no_reinstall("\n".join(text for text, _ in steps), ns["_sandbox"])
    proc = dc.run_bash(console_script(steps), ns["_sandbox"], _env(example))
    check_console(steps, proc.stdout)


def evaluate_data(example) -> None:
    """YAML (every document) or JSON parses, and equals the data it shows (or is marked
    an illustration)."""
    source = str(example.parsed)
    if language(example) == "json":
        shown = [json.loads(source)]
    else:
        shown = list(yaml.safe_load_all(source))
    directives = directives_of(example)
    assert directives.illustration != bool(directives.source), (
        "a YAML/JSON block says what it shows, right above it: <!-- docs-test: "
        "source=KIND:WHAT --> (compared with it, tests/support/doc_sources.py) or <!-- docs-test: "
        "illustration --> (only parsed), one of the two")
    if directives.illustration:
        return
    generated = doc_sources.load(directives.source, example.namespace)
    problems = doc_output.documents_problems(shown, generated)
    assert not problems, f"not what {directives.source} gives:\n" + "\n".join(problems)


def evaluate_text(example) -> None:
    """An untagged block is output or a picture, never a command."""
    first = next((ln.strip() for ln in str(example.parsed).splitlines() if ln.strip()), "")
    assert not first.startswith(("$ ", "kfp-gpu ", "python ", ".venv/bin/")), (
        f"an untagged block that starts with a command ({first!r}): tag it bash or console")


def layout_problems(tree: str, root: Path = REPO) -> list[str]:
    """A folder tree (``name/  what it holds``, children indented under their folder):
    every entry exists, and a folder whose children are listed lists all of its packages
    (sub-folders with an ``__init__.py``)."""
    problems, stack, listed, column = [], [], {}, None
    for line in tree.splitlines():
        m = re.match(r"^( *)([\w.-]+/?)( +|$)", line)
        depth = len(m.group(1)) if m else 0
        if not m or (column is not None and depth >= column):
            continue  # a description going on under the one above
        column = m.end(3) if line[m.end(3):].strip() else None
        depth = len(m.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else root
        path = parent / m.group(2).rstrip("/")
        listed.setdefault(parent, set()).add(path.name)
        if not path.exists():
            problems.append(f"{path.relative_to(root)}: no such file or folder")
        if m.group(2).endswith("/"):
            stack.append((depth, path))
    for folder, names in listed.items():
        if folder == root:
            continue
        packages = {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
        problems += [f"{(folder / n).relative_to(root)}/: a package the layout leaves out"
                     for n in sorted(packages - names)]
    return problems


def evaluate_nothing(example) -> None:
    """``text``: the author says it is neither a command nor data (a picture, a layout);
    a ``layout`` one is checked against the checkout."""
    if directives_of(example).layout:
        problems = layout_problems(str(example.parsed))
        assert not problems, "\n".join(problems)


EVALUATORS = {"python": evaluate_python, "console": evaluate_console,
              "yaml": evaluate_data, "json": evaluate_data, "": evaluate_text,
              "text": evaluate_nothing, **dict.fromkeys(SHELL, evaluate_shell)}


def evaluate_unknown(example) -> None:
    raise AssertionError(f"no evaluator for ```{example.region.lexemes['arguments']} blocks: "
                         "add one in tests/support/doc_blocks.py")


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


def kind_of(example) -> str:
    """How the doc tests treat the block: ``run`` (executed), ``run+compared`` (a console
    block: executed, its output compared), ``compared`` (data compared with its source),
    ``checked`` (parsed and its commands or entries checked; skipped, a synopsis, an
    illustration, a layout), ``shown`` (output or a picture: only kept from looking like a
    command)."""
    lang = language(example)
    if lang in ("yaml", "json"):
        return "compared" if directives_of(example).source else "checked"
    if lang == "text":
        return "checked" if directives_of(example).layout else "shown"
    if lang == "":
        return "shown"
    if needs_of(example).skip or directives_of(example).synopsis:
        return "checked"
    return "run+compared" if lang == "console" else "run"
