"""``make test``'s two xdist workers (conftest.py :func:`xdist_group`): every test that uses
the one control plane lands in one group, every test of the engine's session fixtures and
the test registry in one group, and a docs page's blocks stay together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import conftest

REPO = Path(__file__).resolve().parents[2]


def _collected() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "tests", "components"], cwd=REPO,
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return [ln for ln in out.splitlines() if "::" in ln]


def _block_needing(page: str, need: str) -> str:
    """The test id of the first code block of ``page`` whose ``# needs:`` line is ``need``
    (the id names the line of the block's opening fence)."""
    lines = (REPO / page).read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"# needs: {need}"))
    fence = max(i for i in range(at) if lines[i].startswith("```"))
    return f"tests/docs/test_docs_run.py::test_block[{page}:{fence + 1}]"


def test_plane_and_engine_tests_each_share_one_group():
    ids = _collected()
    groups = {i: conftest.xdist_group(i) for i in ids}
    cluster = [i for i in ids if i.startswith("tests/cluster/")]
    containers = [i for i in ids if i.startswith("tests/containers/")]
    assert cluster and containers
    assert {groups[i] for i in cluster} == {"plane"}
    assert {groups[i] for i in containers} == {"engine"}
    # the docs blocks that need the plane or the registry run beside those tests
    assert groups[_block_needing("docs/cluster.md", "cluster")] == "plane"
    assert groups[_block_needing("docs/install.md", "registry")] == "engine"
    # a page's blocks are one group; other modules are one group each
    readme = {g for i, g in groups.items() if i.startswith("tests/docs/test_docs_run.py::"
                                                           "test_block[README.md:")}
    assert readme == {"docs:README.md"}
    assert groups["tests/harness/test_xdist_groups.py::test_plane_and_engine_tests_each_share_one_"
                  "group"] == "module:tests/harness/test_xdist_groups.py"


def test_a_page_goes_with_its_strongest_need(tmp_path, monkeypatch):
    page = tmp_path / "p.md"
    monkeypatch.setattr(conftest, "REPO", tmp_path)
    conftest._page_group.cache_clear()
    try:
        page.write_text("```bash\n# needs: docker -- an engine\nls\n```\n")
        assert conftest.xdist_group("tests/docs/test_docs_run.py::test_block[p.md:1]") == "engine"
        conftest._page_group.cache_clear()
        page.write_text("```bash\n# needs: docker\nls\n```\n```bash\n# needs: cluster\nls\n```\n")
        assert conftest.xdist_group("tests/docs/test_docs_run.py::test_block[p.md:5]") == "plane"
        conftest._page_group.cache_clear()
        page.write_text("```bash\n# needs: gpu -- cluster docker words after -- do not count\n"
                        "ls\n```\n")
        assert conftest.xdist_group(
            "tests/docs/test_docs_run.py::test_block[p.md:1]") == "docs:p.md"
    finally:
        conftest._page_group.cache_clear()
