"""Docs that run (issue 32 item 1): every code block of README.md, docs/*.md,
components/*/README.md and images/README.md is executed or, where it needs a cluster,
Docker or a GPU, checked against what it names; its shown output is compared.

Library: Sybil 10 (``sybil==10.1.0``, the ``dev`` extra). It was chosen over pytest-examples
and mktestdocs because it parses Markdown (fenced blocks, blocks in list items, and its
``<!-- invisible-code-block: python -->`` comments for the set-up a snippet assumes) and
leaves each language's evaluation to us, which the shell and console blocks need; it
keeps one namespace per page, as a reader keeps one interpreter; it has no dependencies,
so it installs beside the pinned kfp 2.17 / protobuf 6 / TensorFlow 2.18 set (pytest-examples
brings black and its own ruff pin; mktestdocs runs only Python and bash blocks, without
per-block set-up, and is barely maintained). The evaluators: :mod:`tests.doc_blocks`;
commands and their small parameters: :mod:`tests.doc_commands`.

Pages are found by glob, so a new page or block is tested without any work by its author.
Each block is a test item (``test_block[README.md:96]``); the Python blocks above it on
its page run first (on demand when it is selected alone), shell blocks only as items. The blocks run in a sandbox
checkout (symlinks to this one, its own ``build/`` and ``local_outputs/``) beside
``shared/data`` (the real data), with ``$KFP_GPU_DATA_DIR`` unset so the documented
default data folder is what the commands use. Blocks that train (``kfp-gpu run --local``,
``mpirun``) are marked ``slow``; ``make test`` runs them (CI too).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import doc_blocks, doc_commands

REPO = Path(__file__).resolve().parents[1]
DOC_GLOBS = ("README.md", "docs/*.md", "components/*/README.md", "images/README.md")
#: Blocks that train or run pipelines (tens of seconds each on 2 cores).
HEAVY = re.compile(r"(\brun\b.*--local|\bmpirun\b|train-resnet|benchmarks/\w+\.py)")


def documents() -> list[str]:
    """The pages under test, repository-relative, sorted."""
    return sorted({str(p.relative_to(REPO)) for g in DOC_GLOBS for p in REPO.glob(g)})


def _items() -> list:
    items = []
    for doc in documents():
        for i, ex in enumerate(doc_blocks.parse(REPO / doc)):
            text = str(ex.parsed)
            lang = ex.region.lexemes["arguments"].strip()
            heavy = (lang in (*doc_blocks.SHELL, "console") and not doc_commands.NEEDS.search(text)
                     and HEAVY.search(text))
            items.append(pytest.param(doc, i, id=f"{doc}:{ex.line}",
                                      marks=[pytest.mark.slow] if heavy else []))
    return items


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory, shared_data) -> tuple[Path, Path]:
    """``(checkout, tmp)``: a checkout of symlinks to this one beside ``shared/data``."""
    root = tmp_path_factory.mktemp("docs")
    checkout = root / "kfp-gpu"
    checkout.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("build", "local_outputs"):
            (checkout / entry.name).symlink_to(entry)
    (root / "shared").mkdir()
    (root / "shared" / "data").symlink_to(shared_data)
    (root / "tmp").mkdir()
    return checkout, root / "tmp"


#: Page -> {"examples": its Sybil examples, "done": how many were visited, "failed": the
#: line of a Python block that failed (the blocks below it lack its names)}.
_PAGES: dict[str, dict] = {}


def _page(doc: str, sandbox: tuple[Path, Path]) -> dict:
    if doc not in _PAGES:
        document = doc_blocks.parse(REPO / doc)
        document.namespace.update(_sandbox=sandbox[0], _tmp=sandbox[1], __name__="__doc__")
        _PAGES[doc] = {"examples": list(document), "done": 0, "failed": None}
    return _PAGES[doc]


@pytest.mark.parametrize("doc,index", _items())
def test_block(doc, index, sandbox):
    """The block runs (or parses, with its ``# needs:`` reason) and shows what it does."""
    page = _page(doc, sandbox)
    for example in page["examples"][page["done"]:index]:  # the Python above, once
        page["done"] += 1
        if example.region.evaluator is doc_blocks.evaluate_python:
            try:
                example.evaluate()
            except Exception:  # noqa: BLE001 - reported by the blocks below it
                page["failed"] = example.line
    example = page["examples"][index]
    python = example.region.evaluator is doc_blocks.evaluate_python
    if python and page["failed"] is not None:
        pytest.fail(f"{doc}: the Python block at line {page['failed']} above this one failed")
    page["done"] = max(page["done"], index + 1)
    try:
        example.evaluate()
    except BaseException:
        if python:
            page["failed"] = example.line
        raise


def test_pages_are_found_by_glob():
    """Every README.md and docs page is under test; each has its blocks found."""
    docs = documents()
    assert {"README.md", "docs/distributed.md", "images/README.md",
            "components/evaluate_classifier/README.md"} <= set(docs)
    assert len([i for i in _items() if i.values[0] == "README.md"]) >= 8


INLINE = re.compile(r"`((?:\.venv/bin/)?kfp-gpu [^`]+|python -m kfp_gpu[^`]*)`")


@pytest.mark.parametrize("doc", documents())
def test_inline_commands_name_real_options(doc):
    """`kfp-gpu ...` and `python -m kfp_gpu...` in the prose: commands and options exist."""
    text = (REPO / doc).read_text(encoding="utf-8")
    problems = []
    for m in INLINE.finditer(text):
        for cmd in doc_commands.split_commands(m.group(1)):
            problems += [f"`{m.group(1)}`: {p}" for p in doc_commands.check_command(cmd)]
    assert not problems, "\n".join(problems)
