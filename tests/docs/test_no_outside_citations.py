"""The repository carries its own design knowledge: no file of it -- code,
scripts, docs, workflows -- cites a document outside the repository as the place a fact
lives (``../shared/CONTROL_PLANE.md``, ``DESIGN.md``). Facts the code relies on are written
here: tests/cluster/README.md ("How the plane is built and run"), docs/, images/README.md.

The one outside folder the repository may name is the data folder, ``../shared/data``
(kfp_gpu.inputs.datadir's documented default), and paths under it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Design documents that live beside the checkout, not in it.
OUTSIDE_DOCS = {"DESIGN.md", "CONTROL_PLANE.md"}
#: A path into the folder beside the checkout that is not the data folder.
OUTSIDE_PATH = re.compile(r"(?:\.\./)+shared/(?!data(?:/|\b))[\w./-]*"
                          r"|/shared/(?!data(?:/|\b))[\w.-]+\.md\b")
TEXT = {".py", ".sh", ".md", ".yml", ".yaml", ".toml", ".cfg", ".txt", ".json", ".ini", ""}


def _repo_files() -> list[Path]:
    """The files git tracks or would track (untracked, not ignored), this test left out."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    me = Path(__file__).resolve()
    return [REPO / f for f in out if f and (REPO / f).is_file() and (REPO / f) != me
            and (REPO / f).suffix in TEXT]


def _outside_docs() -> set[str]:
    """:data:`OUTSIDE_DOCS` plus the .md files beside the checkout (../shared/*.md), where
    that folder exists, unless the repository has a file of that name."""
    beside = REPO.parent / "shared"
    names = OUTSIDE_DOCS | ({p.name for p in beside.glob("*.md")} if beside.is_dir() else set())
    ours = {p.name for p in _repo_files()}
    return {n for n in names if n not in ours}


def citations(text: str, outside_docs: set[str]) -> list[str]:
    """The outside citations in ``text``: paths into ../shared other than the data folder,
    and the names of design documents that live outside the repository."""
    found = [m.group(0) for m in OUTSIDE_PATH.finditer(text)]
    for name in sorted(outside_docs):
        found += re.findall(rf"(?<![\w/.-]){re.escape(name)}\b", text)
    return found


@pytest.mark.parametrize("text, expected", [
    ("the recipe: ../shared/CONTROL_PLANE.md", ["../shared/CONTROL_PLANE.md"]),
    ('see DESIGN.md "Images and releases"', ["DESIGN.md"]),
    ("recorded in /work/shared/DESIGN.md", ["/shared/DESIGN.md"]),
    ("data in ../shared/data/imdb and ../shared/data", []),
    ("/work/shared/data/README.md lists them", []),
    ("components/shared/shards.py, /mnt/shared/run-1, docs/design.md", []),
])
def test_the_rule_finds_outside_citations_and_spares_the_data_folder(text, expected):
    assert citations(text, OUTSIDE_DOCS) == expected


def test_no_file_cites_a_document_outside_the_repository():
    docs = _outside_docs()
    bad = []
    for path in _repo_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for c in citations(line, docs):
                bad.append(f"{path.relative_to(REPO)}:{lineno}: {c}")
    assert not bad, ("cited outside the repository (write the fact here, e.g. in "
                     "tests/cluster/README.md or docs/, and cite that):\n" + "\n".join(bad))


# ------------------------------------------------------------------ the project's tracker
#: A reference to an issue of a tracker: "issue 22", "Issue 11 item 16", "issues 7 and 9".
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+")
#: What makes it an upstream citation: the repository named right before it on the line
#: ("kubeflow/pipelines issue 11173", "pytest-dev/pytest-xdist issue 1386").
REPOSITORY_BEFORE = re.compile(r"[\w.-]+/[\w.-]+ $")
#: Files that still cite the tracker, each being rewritten by another change at the time this
#: rule was written; each must still have a citation (else take it off the list).
PENDING = {"tests/cluster/test_dra.py", "tests/cluster/test_fidelity.py"}


def tracker_citations(line: str) -> list[str]:
    """The issue references in ``line`` that name no repository: a tracker readers of the
    code do not have. An upstream issue is cited with its repository (``OWNER/REPO issue
    N``), or better with the upstream file that holds the fact."""
    return [m.group(0) for m in ISSUE.finditer(line)
            if not REPOSITORY_BEFORE.search(line[:m.start()])]


@pytest.mark.parametrize("line, expected", [
    ("(issue 22 item 4)", ["issue 22"]),
    ('"""Issue 11 item 16: no task_config', ["Issue 11"]),
    ("the findings of issues 7 and 9", ["issues 7"]),
    ("(kubeflow/mpi-operator issue 608; its workaround)", []),
    ("pytest-dev/pytest-xdist issue 1386, fix PR 1388 open", []),
    ("kubeflow/pipelines PR #12185; the issue it fixes", []),
    ("mpi-operator issue 615", ["issue 615"]),
])
def test_the_rule_tells_tracker_citations_from_upstream_ones(line, expected):
    assert tracker_citations(line) == expected


def test_no_file_cites_the_projects_issue_tracker():
    """Code, docs, workflows and tests cite the upstream source of a fact or say why, never
    an issue number of the project's tracker (which readers of the code do not have)."""
    bad, pending = [], set()
    for path in _repo_files():
        rel = path.relative_to(REPO).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for c in tracker_citations(line):
                if rel in PENDING:
                    pending.add(rel)
                else:
                    bad.append(f"{rel}:{lineno}: {c}")
    assert not bad, ("cites the project's tracker (cite the upstream file, or say why):\n"
                     + "\n".join(bad))
    assert pending == PENDING, f"no citation left in {sorted(PENDING - pending)}: unlist them"
