"""What the docs state is true: file names and ``module.name`` references
of this repository, paths under tests/ and .github/, the exit codes, the versions a
deprecation names, and the figures' provenance. tests/docs/test_docs_names.py checks the
``kfp_gpu.`` dotted names and the other repository paths; tests/docs/test_docs_run.py runs the
blocks."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from kfp_gpu import __version__
from kfp_gpu.cli import errors
from tests.support import doc_signatures

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted({str(p.relative_to(REPO)) for g in ("README.md", "docs/*.md",
               "components/*/README.md", "images/README.md", "manifests/README.md",
               "testcluster/README.md", "tests/*/README.md") for p in REPO.glob(g)})
SOURCES = ("kfp_gpu", "components", "pipelines", "tests", "testcluster", "benchmarks", "scripts",
           "images")
#: File names in backticks that belong to upstream projects the docs cite, not to us.
UPSTREAM_FILES = {"rest.py", "executor.py", "artifact_types.py", "ephemeral_component.py",
                  "discover_hosts.sh"}
CODE = re.compile(r"`([^`\n]+)`")
FILE = re.compile(r"^[\w.-]+\.(py|sh)$")
#: What follows a dot in a file name, not in ``module.name``.
EXTENSIONS = {"py", "sh", "yaml", "yml", "json", "md", "keras", "io", "npz", "txt", "gz",
              "log", "html", "csv", "toml", "parquet"}
SHORT = re.compile(r"^([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\(.*\))?$")


def _text(doc: str) -> str:
    return (REPO / doc).read_text(encoding="utf-8")


@functools.cache
def _files() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for top in SOURCES:
        for p in (REPO / top).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                out.setdefault(p.name, []).append(p)
    for p in REPO.glob("*"):
        if p.is_file():
            out.setdefault(p.name, []).append(p)
    return out


@functools.cache
def _top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return names


def _modules(name: str) -> list[Path]:
    """Our Python modules whose file is ``<name>.py``."""
    return [p for p in _files().get(f"{name}.py", []) if p.is_relative_to(REPO / "kfp_gpu")
            or p.is_relative_to(REPO / "components") or p.is_relative_to(REPO / "pipelines")]


def _spans(doc: str) -> list[str]:
    """Code spans of the prose (fenced blocks left out: tests/docs/test_docs_run.py runs them)."""
    prose = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", _text(doc), flags=re.DOTALL | re.MULTILINE)
    return CODE.findall(prose)


@pytest.mark.parametrize("doc", DOCS)
def test_file_names_in_the_docs_exist(doc):
    """`local_status.py`: a source file of that name is in the repository; a component's
    README names its own folder's files (or components/shared/'s): "Logic: `trainjob.py`"
    in components/train_resnet_horovod/ is wrong though kfp_gpu/mpi/spec/trainjob.py exists."""
    names = {s for s in _spans(doc) if FILE.match(s) and s not in UPSTREAM_FILES}
    missing = sorted(n for n in names if n not in _files())
    assert not missing, f"{doc} names files that do not exist: {missing}"
    if doc.startswith("components/"):
        folder = (REPO / doc).parent
        here = {p.name for d in (folder, REPO / "components" / "shared") for p in d.iterdir()}
        elsewhere = sorted(n for n in names - here
                           if not re.search(rf"[\w/]+/{re.escape(n)}", _text(doc)))
        assert not elsewhere, f"{doc} names files that are not in its folder: {elsewhere}"


@pytest.mark.parametrize("doc", DOCS)
def test_module_dot_name_references_exist(doc):
    """`trainjob.pvc_mounts`, `mpijob.to_yaml`: where the part before the dot is one of our
    module names, one such module defines the name."""
    problems = []
    for span in _spans(doc):
        m = SHORT.match(span)
        if (not m or m.group(2) in EXTENSIONS or "_" not in m.group(2)  # snake_case: ours;
                or not _modules(m.group(1))):  # model.fit, status.reason: Keras', Kubernetes'
            continue
        if not any(m.group(2) in _top_level_names(p) for p in _modules(m.group(1))):
            problems.append(span)
    assert not problems, f"{doc} names what no module of that name defines: {problems}"


@pytest.mark.parametrize("doc", DOCS)
def test_paths_under_tests_and_github_exist(doc):
    paths = re.findall(r"(?<![\w/.-])((?:tests|\.github)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*])",
                       _text(doc))
    missing = sorted({p for p in paths if not re.search(r"[*<>{}]", p)
                      and not (REPO / p).exists()  # tests/doubles/k8s_api.FakeKube: a module's
                      and not (REPO / f"{p.rsplit('.', 1)[0]}.py").exists()})  # name
    assert not missing, f"{doc} names paths that do not exist: {missing}"


def test_the_exit_code_table_is_the_cli_s():
    """README "Exit codes" lists exactly the statuses kfp_gpu.cli.errors defines."""
    text = _text("README.md")
    table = text[text.index("### Exit codes"):].split("\n## ")[0]
    codes = {int(c) for row in re.findall(r"^\| ([\d /]+) \|", table, re.MULTILINE)
             for c in re.findall(r"\d+", row)}
    assert codes == {errors.OK, errors.FAILED, errors.USAGE, errors.UNREACHABLE,
                     errors.SIGINT, errors.SIGTERM}


@pytest.mark.parametrize("doc", DOCS)
def test_release_versions_named_for_this_package_are_consistent(doc):
    """A deprecation says when it happened (not after this version) and when it ends (after
    it): "renamed in X" / "removed in Y" against kfp_gpu.__version__."""
    def v(text: str) -> tuple[int, ...]:
        return tuple(int(x) for x in text.split("."))

    text = _text(doc)
    for m in re.finditer(r"\b(renamed|removed|deprecated) in (\d+\.\d+\.\d+)", text):
        if m.group(1) == "removed":
            assert v(m.group(2)) > v(__version__), f"{doc}: {m.group(0)} (we are {__version__})"
        else:
            assert v(m.group(2)) <= v(__version__), f"{doc}: {m.group(0)} (we are {__version__})"


def test_summary_figures_in_the_readme_carry_date_machine_and_command():
    """Each shown run summary (a console block with a 'finished in' line) is introduced by
    a paragraph that gives the date, the machine and, in the block, the command."""
    text = _text("README.md")
    for m in re.finditer(r"```console\n\$ (.+)\n(?:.*\n)*?.*finished in", text):
        before = text[:m.start()].rstrip().rsplit("\n\n", 1)[-1]
        assert re.search(r"20\d\d-\d\d-\d\d", before), f"no date before `{m.group(1)}`"
        assert re.search(r"core|Zen|Xeon|EPYC", before), f"no machine before `{m.group(1)}`"


@pytest.mark.parametrize("doc", DOCS)
def test_signatures_and_calls_in_the_prose_fit_the_functions(doc):
    """`job_name(run_id, task_name, *, prefix="mpijob", instance="")` is
    inspect.signature(job_name); `gpu.parse("...")` binds (tests/support/doc_signatures.py)."""
    found = [p for s in doc_signatures.spans(_text(doc)) for p in doc_signatures.problems(s)]
    assert not found, f"{doc}:\n" + "\n".join(found)


def test_the_signature_check_reads_the_docs_and_catches_a_wrong_signature():
    """Not vacuous: the distributed.md span is checked, and the signature it showed before
    (prefix left out, instance third) fails against the keyword-only parameters, against
    the positional ones they were, and as a positional call."""
    shown = doc_signatures.spans(_text("docs/distributed.md"))
    assert 'job_name(run_id, task_name, *, prefix="mpijob", instance="")' in shown
    checked = [s for d in DOCS for s in doc_signatures.spans(_text(d))
               if doc_signatures.names_ours(s)]
    assert len(checked) >= 10, checked
    (wrong,) = doc_signatures.problems('job_name(run_id, task_name, instance="")')
    assert "'instance' is keyword-only, shown as positional or keyword" in wrong

    def positional(run_id, task_name, prefix="mpijob", instance=""):
        """job_name's signature before its parameters became keyword-only."""

    old = doc_signatures.shown_parameters('run_id, task_name, instance=""')
    assert doc_signatures.signature_problem(positional, old) == (
        "positional parameters ['run_id', 'task_name', 'prefix', 'instance'], shown as "
        "['run_id', 'task_name', 'instance']")
    assert "positional" in doc_signatures.problems("job_name(run, task, model_uri)")[0]
    assert doc_signatures.problems("job_name(run, task, instance=model_uri)") == []
    assert doc_signatures.problems('job_name(run_id, task_name, *, prefix="resnet")')[0] \
        .startswith('`job_name(run_id, task_name, *, prefix="resnet")`: \'prefix\' defaults')
