"""docs/fidelity.md, the fidelity ledger, checked against the tests it cites.

The ledger's rule: every ``agree`` row names a test that runs the same scenario against the
double (or local runner) and the real plane and compares the two, or replays a recording
of the real answers; a row that no test backs says ``not compared: <why>``; the totals are
the tables' (a ``Totals (checked by tests/harness/test_fidelity_ledger.py): ...`` line is compared
with the counts here), never typed.

What is checked, per table row (every markdown table of the ledger):

- the verdict cell starts with one of :data:`VERDICTS` (a typo fails); ``**differ**``
  names the fixing commit in the ``fixed`` column, a plain ``differ`` says ``kept`` or
  ``open``, ``not compared`` says why;
- every test reference in any cell resolves to a test function of the file it names
  (``file.py::test_name``, ``tests/cluster/file.py::test_name``, or an abbreviation the
  ledger defines as ``**T** = `path` `` before its first section or in the section; a
  trailing ``…`` or ``*`` is a prefix or glob, parametrized ids ``[...]`` are stripped; a
  bare file name must be unique under tests/);
- an ``agree`` row names at least one such test in its real-side column (``real
  scenario``, ``real pods`` or ``replay test``): a cell citing only a ``capture`` or source
  reading does not count; and one of those tests uses, itself or through a helper of its
  module, a name imported from the doubles or local runners (:data:`DOUBLE_MODULES`): a
  test that asks the real plane alone compares nothing;
- the ledger names no path outside the repository (``../``) and every repository path it
  names exists.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "fidelity.md"
DOC_NAME = "docs/fidelity.md"

#: How a verdict cell may start (docs/fidelity.md "Verdicts"); anything else is refused.
VERDICTS = ("agree", "**differ**", "differ", "not compared", "not coverable", "double only",
            "real pods only")
#: The column holding the real side of the comparison, by header (one per table).
REAL_COLUMNS = ("real scenario", "real pods", "replay test")
#: Modules whose names a comparing test uses: the doubles and the local runners.
DOUBLE_MODULES = ("tests.doubles", "kfp_gpu.mpi.local")
TOTALS_PREFIX = "Totals (checked by tests/harness/test_fidelity_ledger.py):"
#: ``**T** = `tests/cluster/test_fidelity.py` `` (also ``path::test_name``).
ABBREVIATION = re.compile(r"\*\*([A-Z])\*\*\s+=\s+`([^`]+)`")
#: A test file named in a cell: a repository path or a bare ``test_x.py``.
FILE_REF = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*test_\w+\.py)(?![\w/])")
#: An abbreviation used in a cell (only the letters the ledger defines count).
ABBR_REF = re.compile(r"(?<![\w/.<-])([A-Z])(?![\w>])")
#: What may follow a file or abbreviation: ``::test_name`` (prefix ``…``, glob ``*``),
#: parametrized ids.
TAIL = re.compile(r"(?:::(test_\w*(?:…|\*)?))?(\[[^\]]*\])?")
#: Repository paths the ledger names (checked to exist).
REPO_PATH = re.compile(r"(?<![\w/.-])((?:tests|kfp_gpu|testcluster|manifests|components|"
                       r"pipelines|docs|images)/[\w./-]*\w)")


@dataclass
class Row:
    line: int
    cells: dict[str, str]
    problem: str = ""  # a row whose cells are not the header's


@dataclass
class Table:
    section: str
    line: int
    header: list[str]
    rows: list[Row] = field(default_factory=list)


@dataclass
class Ledger:
    tables: list[Table]
    #: abbreviation -> target, per section ("" = the part before the first section)
    abbreviations: dict[str, dict[str, str]]
    #: (line number, section, text) of each line starting with :data:`TOTALS_PREFIX`
    totals: list[tuple[int, str, str]]
    #: (line number, text) of each other line with the word "Totals"
    typed_totals: list[tuple[int, str]]

    def abbrs(self, section: str) -> dict[str, str]:
        return {**self.abbreviations.get("", {}), **self.abbreviations.get(section, {})}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse(text: str) -> Ledger:
    lines = text.split("\n")
    tables: list[Table] = []
    abbreviations: dict[str, dict[str, str]] = {}
    totals, typed = [], []
    section, table = "", None
    for i, line in enumerate(lines, 1):
        if line.startswith("## "):
            section, table = line[3:].strip(), None
        if line.startswith(TOTALS_PREFIX):
            totals.append((i, section, line))
        elif re.search(r"\bTotals\b", line):
            typed.append((i, line))
        if not line.startswith("|"):
            table = None
            continue
        if table is None:
            table = Table(section, i, [c.lower() for c in _cells(line)])
            tables.append(table)
        elif re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*", line):
            continue
        else:
            cells = _cells(line)
            table.rows.append(Row(i, dict(zip(table.header, cells)), "" if len(cells) == len(
                table.header) else f"{len(cells)} cells, the header has {len(table.header)}"))
    for m in ABBREVIATION.finditer(text):  # a definition may wrap
        heading = [ln for ln in text[:m.start()].split("\n") if ln.startswith("## ")]
        abbreviations.setdefault(heading[-1][3:].strip() if heading else "", {})[
            m.group(1)] = m.group(2)
    return Ledger(tables, abbreviations, totals, typed)


# -- test references ---------------------------------------------------------------------

@dataclass
class Ref:
    text: str
    file: str  # as written (path or bare name)
    pattern: str | None  # test name pattern; None: the file alone
    problem: str = ""


def references(cell: str, abbrs: dict[str, str]) -> list[Ref]:
    """The test files and tests a cell names."""
    refs = []
    for m in FILE_REF.finditer(cell):
        tail = TAIL.match(cell, m.end())
        refs.append(Ref(m.group(0) + tail.group(0), m.group(1), tail.group(1)))
    for m in ABBR_REF.finditer(cell):
        if m.group(1) not in abbrs:
            continue
        tail = TAIL.match(cell, m.end())
        file, _, name = abbrs[m.group(1)].partition("::")
        refs.append(Ref(m.group(0) + tail.group(0), file, name or tail.group(1),
                        "the abbreviation names a test already" if name and tail.group(1)
                        else ""))
    return refs


@functools.cache
def _test_files(root: Path) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for p in sorted((root / "tests").rglob("test_*.py")):
        found.setdefault(p.name, []).append(p)
    return found


def find_file(name: str, root: Path) -> tuple[Path | None, str]:
    """(the file, "") or (None, why not)."""
    if "/" in name:
        p = root / name
        return (p, "") if p.is_file() else (None, f"{name} does not exist")
    found = _test_files(root).get(name, [])
    if len(found) == 1:
        return found[0], ""
    if not found:
        return None, f"no {name} under tests/"
    return None, (f"{name} is ambiguous ({', '.join(str(p.relative_to(root)) for p in found)}):"
                  " name the path")


@functools.cache
def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def defined_tests(path: Path) -> list[str]:
    return [n.name for n in ast.walk(_module(path))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test")]


def matching(pattern: str, names: list[str]) -> list[str]:
    glob = pattern.replace("…", "*")
    return [n for n in names if fnmatch.fnmatchcase(n, glob)]


def _helper_uses_doubles(module: str) -> bool:
    """Whether ``module`` is a test helper module of this repository (tests.*) that itself
    imports from :data:`DOUBLE_MODULES` (e.g. tests.containers.local_jobs, which runs jobs
    through kfp_gpu.mpi.local)."""
    if not module.startswith("tests."):
        return False
    f = REPO / (module.replace(".", "/") + ".py")
    if not f.is_file():
        return False
    return any(isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(DOUBLE_MODULES)
               for n in ast.walk(_module(f)))


def uses_a_double(path: Path, test: str) -> bool:
    """Whether ``test`` in ``path`` uses, in its body or in a module-level function it
    calls (transitively), a name imported from :data:`DOUBLE_MODULES`."""
    tree = _module(path)
    imported: set[str] = set()
    for node in ast.walk(tree):  # module level and inside functions
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if node.module.startswith(DOUBLE_MODULES) or _helper_uses_doubles(
                        f"{node.module}.{a.name}") or _helper_uses_doubles(node.module):
                    imported.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names
                         if a.name.startswith(DOUBLE_MODULES)}
    functions = {n.name: n for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen, todo = set(), [test]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        used = {n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)}
        if used & imported:
            return True
        todo += sorted(used & functions.keys())
    return False


@dataclass
class Resolved:
    ref: Ref
    path: Path | None
    tests: list[str]
    problem: str = ""


def resolve(ref: Ref, root: Path) -> Resolved:
    path, why = find_file(ref.file, root)
    if path is None or ref.problem:
        return Resolved(ref, path, [], why or ref.problem)
    if ref.pattern is None:
        return Resolved(ref, path, [])
    tests = matching(ref.pattern, defined_tests(path))
    if not tests:
        return Resolved(ref, path, [], f"no test {ref.pattern} in {path.relative_to(root)}")
    return Resolved(ref, path, tests)


def verdict(row: Row) -> str:
    return row.cells.get("verdict", "")


def reference_problems(text: str, root: Path = REPO) -> list[str]:
    """Unresolvable references anywhere; agree rows without a comparing test."""
    ledger, out = parse(text), []
    for section, abbrs in ledger.abbreviations.items():
        for letter, target in abbrs.items():
            file, _, name = target.partition("::")
            r = resolve(Ref(target, file, name or None), root)
            if r.problem:
                out.append(f"{DOC_NAME} ({section or 'introduction'}): **{letter}** = "
                           f"{target}: {r.problem}")
    for table in ledger.tables:
        abbrs = ledger.abbrs(table.section)
        real = next((c for c in REAL_COLUMNS if c in table.header), None)
        if real is None:
            out.append(f"{DOC_NAME}:{table.line}: the table has none of the columns "
                       f"{REAL_COLUMNS}")
        for row in table.rows:
            comparing = []
            for column, cell in row.cells.items():
                for r in (resolve(ref, root) for ref in references(cell, abbrs)):
                    if r.problem:
                        out.append(f"{DOC_NAME}:{row.line}: {r.ref.text}: {r.problem}")
                    elif column == real and r.tests:
                        comparing.append(r)
            if not verdict(row).startswith("agree"):
                continue
            if not comparing:
                out.append(f"{DOC_NAME}:{row.line}: agree, but the {real!r} column names no "
                           f"test (a capture or source reading is no comparison): "
                           f"{row.cells.get(real, '')!r}")
            elif not any(uses_a_double(r.path, t) for r in comparing for t in r.tests):
                out.append(f"{DOC_NAME}:{row.line}: agree, but no test it names "
                           f"({', '.join(r.ref.text for r in comparing)}) uses a double or "
                           f"runner ({', '.join(DOUBLE_MODULES)}): the real side alone")
    return out


# -- verdicts and totals -----------------------------------------------------------------

def category(row: Row) -> str | None:
    """The row's totals category, or None for a verdict outside :data:`VERDICTS`."""
    v = verdict(row)
    start = next((s for s in VERDICTS if v == s or (v.startswith(s) and not
                                                     v[len(s)].isalnum())), None)
    if start in ("**differ**", "differ"):
        if row.cells.get("fixed"):
            return "fixed"
        return "kept" if v.startswith("differ, kept") else (
            "open" if v.startswith("differ, open") else "differ")
    return start


def verdict_problems(text: str) -> list[str]:
    out = []
    for table in parse(text).tables:
        if "verdict" not in table.header:
            out.append(f"{DOC_NAME}:{table.line}: the table has no verdict column")
        for row in table.rows:
            v, cat = verdict(row), category(row)
            where = f"{DOC_NAME}:{row.line}: verdict {v!r}"
            if row.problem:
                out.append(f"{DOC_NAME}:{row.line}: {row.problem} (a '|' inside a cell?)")
            elif cat is None:
                out.append(f"{where} starts with none of {VERDICTS}")
            elif v.startswith("**differ**") and cat != "fixed":
                out.append(f"{where}: a bold differ names its fixing commit under 'fixed'")
            elif cat == "differ":
                out.append(f"{where}: a differ not fixed says 'differ, kept: why' or "
                           f"'differ, open: why'")
            elif cat == "not compared" and not re.match(r"not compared: \S", v):
                out.append(f"{where}: say why ('not compared: <why>')")
    return out


#: Totals categories in the order the totals line names them, with their words.
WORDS = {"agree": "agree", "fixed": "differed and were fixed", "kept": "differ (kept)",
         "open": "differ (open)", "not compared": "not compared",
         "not coverable": "not coverable", "double only": "double only",
         "real pods only": "real pods only"}


def totals_line(rows: list[Row]) -> str:
    counts = Counter(category(r) for r in rows)
    parts = [f"{counts[c]} {w}" for c, w in WORDS.items() if counts[c] or c == "agree"]
    return f"{TOTALS_PREFIX} {len(rows)} rows: {', '.join(parts)}."


def totals_problems(text: str) -> list[str]:
    """The first totals line (before any section) counts every table; one inside a
    section counts that section's tables. Any other "Totals" is typed."""
    ledger, out = parse(text), []
    if not any(section == "" for _, section, _ in ledger.totals):
        out.append(f"{DOC_NAME}: no '{TOTALS_PREFIX} ...' line under the title; it should "
                   f"read: {totals_line([r for t in ledger.tables for r in t.rows])}")
    for line, section, said in ledger.totals:
        rows = [r for t in ledger.tables if section in ("", t.section) for r in t.rows]
        want = totals_line(rows)
        if said.strip() != want:
            out.append(f"{DOC_NAME}:{line}: the totals line says {said.strip()!r}; the "
                       f"tables {'of ' + repr(section) + ' ' if section else ''}give "
                       f"{want!r}")
    out += [f"{DOC_NAME}:{line}: typed totals ({said.strip()[:60]!r}...): write them as "
            f"'{TOTALS_PREFIX} ...' so this test checks them" for line, said in
            ledger.typed_totals]
    return out


def path_problems(text: str, root: Path = REPO) -> list[str]:
    out = []
    for i, line in enumerate(text.split("\n"), 1):
        if "../" in line:
            out.append(f"{DOC_NAME}:{i}: a path outside the repository ('../'): "
                       f"{line.strip()[:80]!r}")
        for m in REPO_PATH.finditer(line):
            if not (root / m.group(1)).exists():
                out.append(f"{DOC_NAME}:{i}: {m.group(1)} is not in the repository")
    return out


# -- the ledger --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ledger_text() -> str:
    return DOC.read_text()


def test_the_ledger_has_its_tables(ledger_text):
    tables = parse(ledger_text).tables
    assert len(tables) >= 6 and all(t.rows for t in tables), [t.line for t in tables]


def test_every_agree_row_names_a_test_comparing_double_and_real(ledger_text):
    assert reference_problems(ledger_text) == []


def test_every_verdict_is_one_of_the_ledgers(ledger_text):
    assert verdict_problems(ledger_text) == []


def test_the_totals_are_the_tables(ledger_text):
    assert totals_problems(ledger_text) == []


def test_the_ledger_cites_only_the_repository(ledger_text):
    assert path_problems(ledger_text) == []


def test_the_kfp_rows_are_the_recorded_files(ledger_text):
    """One row per file of the recorded KFP answers, where the data folder is here."""
    from kfp_gpu.inputs import datadir

    root = datadir.resolve()
    api = root / "kfp-2.17.0" / "api" if root is not None else None
    if api is None or not api.is_dir():
        pytest.skip("no recorded KFP answers (data folder kfp-2.17.0/api)")
    [table] = [t for t in parse(ledger_text).tables if "recorded case" in t.header]
    named = sorted(r.cells["recorded case"].split()[0] for r in table.rows)
    assert named == sorted(p.name for p in api.iterdir())


# -- the checks can fail -----------------------------------------------------------------

SYNTHETIC = """# A ledger

Intro. Abbreviations: **T** = `tests/cluster/test_fidelity.py`.

{totals}

## One table

| behaviour | double | real scenario | verdict | fixed |
|---|---|---|---|---|
| {behaviour} | x.py:f | {real} | {verdict} | {fixed} |
| 404 text | x.py:g | capture | not compared: only a manual capture | |
"""


def synthetic(real: str = "T::test_api_server_answers…", verdict: str = "agree",
              fixed: str = "", totals: str | None = None,
              behaviour: str = "a behaviour") -> str:
    doc = SYNTHETIC.format(real=real, verdict=verdict, fixed=fixed, totals="",
                           behaviour=behaviour)
    if totals is None:
        totals = totals_line([r for t in parse(doc).tables for r in t.rows])
    return SYNTHETIC.format(real=real, verdict=verdict, fixed=fixed, totals=totals,
                            behaviour=behaviour)


def test_a_good_synthetic_ledger_passes():
    doc = synthetic()
    assert reference_problems(doc) == verdict_problems(doc) == totals_problems(doc) == []
    assert path_problems(doc) == []
    assert TOTALS_PREFIX + " 2 rows: 1 agree, 1 not compared." in doc


@pytest.mark.parametrize("real, expected", [
    ("T::test_no_such_test", "no test test_no_such_test in tests/cluster/test_fidelity.py"),
    ("T::test_api_server_answers_as_the_double", "no test test_api_server_answers_as_the"),
    ("test_no_such_file.py::test_x", "no test_no_such_file.py under tests/"),
    ("test_doctor.py::test_doctor_says_ok…", "test_doctor.py is ambiguous"),
    ("capture (status dropped)", "names no test"),
    ("M updateMPIJobStatus (read)", "names no test"),
    ("tests/cluster/test_kueue.py", "names no test"),
    ("tests/cluster/test_kueue.py::test_kueue_queue_waits_for_quota_then_runs",
     "the real side alone"),
])
def test_a_bad_reference_is_reported(real, expected):
    problems = reference_problems(synthetic(real=real))
    assert problems and all(p.startswith(f"{DOC_NAME}:11: ") for p in problems), problems
    assert any(expected in p for p in problems), problems


def test_prefixes_globs_and_parametrized_ids_resolve():
    for real in ("T::test_a_failed_launcher…[OnFailure, Never]",
                 "tests/cluster/test_mpijob_lifecycle.py::test_launcher_restarts_*",
                 "T::test_trainjob_failure_and_hostfile…; capture"):
        assert reference_problems(synthetic(real=real)) == [], real


def test_a_bad_reference_in_any_row_is_reported():
    doc = synthetic(real="capture", verdict="not compared: only a capture",
                    behaviour="see T::test_gone")
    assert reference_problems(doc) == [
        f"{DOC_NAME}:11: T::test_gone: no test test_gone in tests/cluster/test_fidelity.py"]


@pytest.mark.parametrize("verdict, fixed, expected", [
    ("agre", "", "starts with none of"),
    ("agreed", "", "starts with none of"),
    ("same", "", "starts with none of"),
    ("**differ** (text)", "", "names its fixing commit"),
    ("differ (text)", "", "'differ, kept: why'"),
    ("not compared", "", "say why"),
])
def test_a_verdict_outside_the_vocabulary_is_reported(verdict, fixed, expected):
    problems = verdict_problems(synthetic(real="capture", verdict=verdict, fixed=fixed))
    assert len(problems) == 1 and problems[0].startswith(f"{DOC_NAME}:11: "), problems
    assert expected in problems[0]


def test_a_row_with_a_stray_cell_is_reported():
    problems = verdict_problems(synthetic(behaviour="a | b"))
    assert problems == [f"{DOC_NAME}:11: 6 cells, the header has 5 (a '|' inside a cell?)"]


def test_wrong_or_typed_totals_are_reported():
    wrong = synthetic(totals=TOTALS_PREFIX + " 2 rows: 2 agree.")
    assert totals_problems(wrong) == [(
        f"{DOC_NAME}:5: the totals line says '{TOTALS_PREFIX} 2 rows: 2 agree.'; the tables "
        f"give '{TOTALS_PREFIX} 2 rows: 1 agree, 1 not compared.'")]
    typed = totals_problems(synthetic(totals="Totals: 2 rows, 1 agree."))
    assert len(typed) == 2 and "no 'Totals (checked by" in typed[0], typed
    assert typed[1].startswith(f"{DOC_NAME}:5: typed totals ('Totals: 2 rows"), typed
    fixed = synthetic(verdict="**differ** (no group)", fixed="abc1234 double")
    assert totals_problems(fixed) == []
    assert "2 rows: 0 agree, 1 differed and were fixed, 1 not compared." in fixed


def test_paths_outside_the_repository_are_reported():
    doc = synthetic(behaviour="as ../outside/notes.md says, tests/no_such_dir/x.py")
    problems = path_problems(doc)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{DOC_NAME}:11: a path outside the repository ('../')")
    assert problems[1] == f"{DOC_NAME}:11: tests/no_such_dir/x.py is not in the repository"
