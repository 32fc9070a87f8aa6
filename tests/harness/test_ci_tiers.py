"""CI's control-plane tier rule, without Go and without running .ci/run.

The rule (README "CI"): a tier whose build fails fails CI, with the last lines of its build
log; only a tier skipped for CI's time budget skips, printed with its reason, and its
cluster tests skip under ``CI=true``; every fixture of a tier decides by the one function
:func:`tests.cluster.tiers.unavailable`.

The real ``.ci/control-plane.sh`` runs here in a scratch tree beside a stub
``testcluster/build.sh`` (the script ``cd``\\ s to its parent's parent), and the
real failure branch of ``.ci/run`` (its ``wait "$cp_pid" || {...}`` lines, read from the
file) runs against the log it left.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster import tiers as cluster

REPO = Path(__file__).resolve().parents[2]

# The stub build.sh: `--dir TOOL` answers for the tools in $STUB_CACHED; building a tier in
# $STUB_FAIL prints 50 numbered lines and a Go error, then fails, as a broken go.mod does.
STUB = r"""#!/usr/bin/env bash
if [ "$1" = --dir ]; then
  case " ${STUB_CACHED:-} " in *" $2 "*) echo "/cache/$2"; exit 0 ;; esac
  exit 1
fi
echo "  $1: building"
case " ${STUB_FAIL:-} " in
  *" $1 "*)
    for i in $(seq 1 50); do echo "go: downloading line $i"; done
    echo "go: example.com/mod@v9.9.9: missing go.sum entry for go.mod file" >&2
    exit 1 ;;
esac
echo "  $1: built"
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "control-plane.sh", root / ".ci" / "control-plane.sh")
    stub = root / "testcluster" / "build.sh"
    stub.parent.mkdir(parents=True)
    stub.write_text(STUB)
    (root / "build").mkdir()
    return root


def _run(tmp_path: Path, *, elapsed: int = 0, fail: str = "", cached: str = ""):
    """Run the real .ci/control-plane.sh as .ci/run does; (result, skipped-file text)."""
    root = _tree(tmp_path)
    skipped = root / "build" / "control-plane-skipped.txt"
    env = {**os.environ, "STUB_FAIL": fail, "STUB_CACHED": cached}
    r = subprocess.run(["bash", str(root / ".ci" / "control-plane.sh"), str(skipped),
                        str(int(time.time()) - elapsed)], capture_output=True, text=True,
                       env=env, timeout=60, check=False)
    (root / "build" / "control-plane.log").write_text(r.stdout + r.stderr)
    return r, skipped.read_text()


def test_a_failed_tier2_build_fails_with_its_last_build_lines(tmp_path):
    r, skipped = _run(tmp_path, fail="tier2")
    assert r.returncode == 1, r.stdout
    assert skipped == ""  # a failure is never a skip: the tier-2 tests cannot skip on it
    lines = r.stdout.splitlines()
    # the verdict ends the log: the header, the last 30 lines of tier 2's log, the summary
    start = lines.index("=== control plane tier2: build failed; the last 30 lines of "
                        f"{tmp_path}/repo/build/control-plane-tier2.log:")
    tail = lines[start + 1:-1]
    assert len(tail) == 30
    assert tail[-1] == "  | go: example.com/mod@v9.9.9: missing go.sum entry for go.mod file"
    assert tail[0] == "  | go: downloading line 22" and "line 21" not in "".join(tail)
    assert lines[-1].startswith("control plane: build failed for tier2 ")
    # tier 3 still built, so one run names every broken tier
    assert "control plane tier3: ready" in r.stdout


def test_a_failed_tier1_build_stops_at_once(tmp_path):
    r, skipped = _run(tmp_path, fail="tier1")
    assert r.returncode == 1 and skipped == ""
    assert "tier2" not in r.stdout and "build failed for tier1" in r.stdout.splitlines()[-1]


def test_every_tier_built_exits_0(tmp_path):
    r, skipped = _run(tmp_path)
    assert r.returncode == 0 and skipped == "", r.stdout
    assert re.findall(r"^control plane (tier\d|node): ready", r.stdout, re.MULTILINE) == [
        "tier1", "tier2", "node", "tier3"]
    assert "failed" not in r.stdout


def _ci_run_wait_block() -> str:
    """The lines of .ci/run that handle control-plane.sh's exit status."""
    text = (REPO / ".ci" / "run").read_text()
    m = re.search(r'^wait "\$cp_pid" \|\| \{.*?exit 1; \}$', text, re.DOTALL | re.MULTILINE)
    assert m, ".ci/run no longer waits for the control-plane build with `wait \"$cp_pid\" ||`"
    return m.group(0)


def test_ci_run_fails_on_the_failed_build_and_prints_its_tail(tmp_path):
    _run(tmp_path, fail="tier2")
    script = f"set -euo pipefail\ncd {tmp_path}/repo\nbash -c 'exit 1' &\ncp_pid=$!\n" \
             f"{_ci_run_wait_block()}\necho REACHED make test\n"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 1
    assert "REACHED" not in r.stdout
    out = r.stdout.splitlines()
    assert out[0].startswith("=== control plane tier2: build failed")
    assert out[-2] == "  | go: example.com/mod@v9.9.9: missing go.sum entry for go.mod file"


def test_a_budget_skip_skips_with_its_reason_and_the_tests_skip_under_ci(tmp_path,
                                                                           monkeypatch):
    r, skipped = _run(tmp_path, elapsed=55 * 60)  # past every budget (40, 45 and 50 min)
    assert r.returncode == 0, r.stdout
    lines = skipped.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["tier2", "node", "tier3"]
    for ln in lines:
        assert ln.split(": ", 1)[1].startswith(cluster.BUDGET_SKIP + ": CI had run 330")
        assert ln in r.stdout  # printed with its reason, not only written
    # the fixtures' rule with this skipped file, under CI=true
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("KFP_GPU_CP_SKIPPED", skipped)
    for tier in ("tier2", "node", "tier3"):
        with pytest.raises(pytest.skip.Exception, match=f"{tier}: not built \\(time budget\\)"):
            cluster.unavailable("control-plane binaries not built: x", tier)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        cluster.unavailable("control-plane binaries not built: k8s", "tier1")


def test_a_cached_tier_is_used_past_the_budget(tmp_path):
    r, skipped = _run(tmp_path, elapsed=55 * 60, cached="trainer")
    assert r.returncode == 0
    assert [ln.split(":")[0] for ln in skipped.splitlines()] == ["node", "tier3"]
    assert "control plane tier2: ready" in r.stdout


@pytest.mark.parametrize("line", [
    "tier2: build failed (see build/control-plane.log)",  # the old failure line
    "tier3: not built (time budget): CI had run 3000 s",  # another tier's skip
    "",
])
def test_under_ci_anything_but_the_tiers_budget_skip_fails(monkeypatch, line):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("KFP_GPU_CP_SKIPPED", line)
    with pytest.raises(pytest.fail.Exception, match="not built: jobset .*CI=true"):
        cluster.unavailable("control-plane binaries not built: jobset", "tier2")


def test_outside_ci_missing_binaries_skip(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("KFP_GPU_CP_SKIPPED", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not built: kueue"):
        cluster.unavailable("control-plane binaries not built: kueue", "tier3")


def test_every_tier_fixture_uses_the_one_rule_with_its_tier():
    """Each fixture passes its own tier, so a budget skip of tier 3 skips the Kueue tests
    (it once passed none, and they failed) and no fixture decides by itself."""
    sources = {p: (REPO / p).read_text() for p in ("tests/cluster/conftest.py",
                                                   "tests/conftest.py")}
    calls = [c for src in sources.values()
             for c in re.findall(r"unavailable\(str\(e\), \"(tier\d|node)\"\)", src)]
    assert sorted(set(calls)) == ["node", "tier1", "tier2", "tier3"]
    # no other call of the rule, no fixture that skips by itself
    for src in sources.values():
        assert src.count("unavailable(str(e), ") == len(
            re.findall(r"unavailable\(str\(e\), \"(tier\d|node)\"\)", src))
        assert "pytest.skip(" not in src
