"""Docs in step with code: every ``kfp_gpu.`` dotted name and every repository path that
docs/ and the READMEs mention exists (a module, or an attribute of one; a file or folder)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([*REPO.glob("docs/**/*.md"), *REPO.glob("*.md"), *REPO.glob("*/README.md"),
               *REPO.glob("components/*/README.md"), *REPO.glob("tests/*/README.md")])
DOTTED = re.compile(r"\bkfp_gpu(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Repository paths in prose: kfp_gpu/..., components/..., pipelines/..., tests/..., ...
#: Paths in upstream repositories that the docs quote (not ours).
UPSTREAM = {"manifests/base/runtimes"}
PATH = re.compile(r"(?<![\w/.-])((?:kfp_gpu|components|pipelines|benchmarks|scripts|images|"
                  r"manifests|docs)/[A-Za-z0-9_./-]*[A-Za-z0-9_])")


def removed_names() -> dict[str, str]:
    """CHANGELOG.md [Unreleased] "Removed": each old name -> its place now, from the lines
    ``- `OLD` -> NEW`` (a name may continue on the next line)."""
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    section = unreleased.split("### Removed", 1)[1].split("\n### ", 1)[0]
    flat = re.sub(r" ->\n\s+", " -> ", section)
    return dict(re.findall(r"^\s+- `([^`]+)` -> (.+)$", flat, flags=re.MULTILINE))


def resolves(name: str) -> bool:
    """True if ``name`` is a module, or a module followed by attributes that exist."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def mentions(pattern: re.Pattern) -> list[tuple[str, str]]:
    return sorted({(str(d.relative_to(REPO)), m.group(1) if m.groups() else m.group(0))
                   for d in DOCS for m in pattern.finditer(d.read_text(encoding="utf-8"))})


#: The old names the CHANGELOG's "Removed" lists: there they name what is gone.
REMOVED = removed_names()


@pytest.mark.parametrize("doc,name", mentions(DOTTED))
def test_dotted_name_in_docs_imports(doc, name):
    if doc == "CHANGELOG.md" and name in REMOVED:
        assert not resolves(name), f"{doc} lists {name} as removed, but it imports"
        return
    assert resolves(name), f"{doc} names {name}, which does not import"


@pytest.mark.parametrize("doc,path", mentions(PATH))
def test_repository_path_in_docs_exists(doc, path):
    target = path.rstrip(".")
    if any(ch in target for ch in "*<>{}") or target in UPSTREAM:
        pytest.skip("a pattern, not a path")
    if doc == "CHANGELOG.md" and target in REMOVED:
        assert not (REPO / target).exists(), f"{doc} lists {path} as removed, but it exists"
        return
    assert (REPO / target).exists() or (REPO / doc).parent.joinpath(target).exists(), (
        f"{doc} names {path}, which does not exist")


def test_the_stale_names_the_issue_found_are_gone():
    """Names that were in docs/ before the kfp_gpu/mpi rooms."""
    text = "\n".join(d.read_text(encoding="utf-8") for d in DOCS)
    for stale in ("kfp_gpu.device.apply_gpu_share", "kfp_gpu.mpijob.build",
                  "kfp_gpu.mpijob.to_yaml", "kfp_gpu/mpi/local_runner", "kfp_gpu/mpi/local_plan"):
        assert stale not in text
    assert resolves("kfp_gpu.mpi.spec.mpijob.build") and not resolves("kfp_gpu.mpijob.build")


def test_architecture_shows_the_three_rooms_and_where_to_change_things():
    """docs/architecture.md: the mpi rooms in its picture and table, and a "to change X, open
    Y" table whose rows for the Worker template and the launcher's wait name real code."""
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    for room in ("spec/", "launch/", "local/"):
        assert f"| `kfp_gpu/mpi/{room}` |" in text and f"|  {room}" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| ") and line.count("|") >= 4}
    worker = rows["the Worker pod template (resources, RDMA, NCCL env, shm, probes)"]
    assert "`kfp_gpu/mpi/spec/mpijob.py` (`worker_template`)" in worker
    assert resolves("kfp_gpu.mpi.spec.mpijob.worker_template")
    waits = rows["how the launcher waits (watch, timeouts, pending diagnosis)"]
    assert "`kfp_gpu/mpi/launch/watch.py`" in waits and resolves("kfp_gpu.mpi.launch.watch")


def test_local_runs_have_their_own_room():
    """Local runs live in kfp_gpu/local (run, docker, interrupt, log), the
    remote side in kfp_gpu/cluster; the picture and the tables say so, the old names are gone."""
    for module in ("run", "docker", "interrupt", "log"):
        assert resolves(f"kfp_gpu.local.{module}")
        assert not (REPO / "kfp_gpu/cluster" / f"{module}.py").exists()
    for old in ("local_run", "local_docker", "interrupt", "run_log", "params"):
        assert not (REPO / "kfp_gpu/cluster" / f"{old}.py").exists()
    assert resolves("kfp_gpu.catalog.arguments.checked")
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    assert "| `kfp_gpu/local/` |" in text and "| local/ (this machine)|" in text
    assert "(cluster | local)" in text
    docs = "\n".join(d.read_text(encoding="utf-8") for d in DOCS)
    for stale in ("kfp_gpu.cluster.local_run", "kfp_gpu.cluster.local_docker", "local_run (",
                  "kfp_gpu.cluster.run_log", "kfp_gpu.cluster.params", "kfp_gpu.cluster.interrupt"):
        assert stale not in docs
    toml = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"kfp_gpu.cluster | kfp_gpu.local"' in toml


def test_the_changelog_names_each_removed_name_and_the_docs_only_the_new_places():
    """The package rooms (build/ became compiler/, release/ and parameters/ (declared,
    command_line), the input modules inputs/) and the component's old folder: the CHANGELOG
    names each old name and its place now, every new place exists and no old one does;
    the other docs name only the new places, and docs/architecture.md shows each room in
    its picture and its package table."""
    import importlib.util

    moves = removed_names()
    assert "kfp_gpu.build.params" in moves and "kfp_gpu.storage" in moves
    text = "\n".join(d.read_text(encoding="utf-8") for d in DOCS if d.name != "CHANGELOG.md")
    for old, new in moves.items():
        for name in re.findall(r"`([^`]+)`", new):
            if name.startswith("kfp_gpu"):
                assert importlib.util.find_spec(name) is not None, name
            else:
                assert (REPO / name).exists(), name
        if old.startswith("kfp_gpu"):
            root = REPO / "kfp_gpu" / Path(*old.split(".")[1:])
            assert not root.exists() and not root.with_suffix(".py").exists(), old
            assert re.search(rf"{re.escape(old)}(?!\w)", text) is None, old
            assert re.search(rf"{re.escape(old.replace('.', '/'))}(?![\w])", text) is None, old
        else:
            assert not (REPO / old).exists(), old
            assert re.search(rf"{re.escape(Path(old).parent.as_posix())}(?![\w])", text) \
                is None, old
    arch = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    for room in ("compiler", "catalog", "dsl", "release", "inputs"):
        assert f"| `kfp_gpu/{room}/` |" in arch and f"{room}/" in arch.split("```")[1]
    toml = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"kfp_gpu.compiler",\n  # the one room' in toml and '"kfp_gpu.catalog",\n' in toml
