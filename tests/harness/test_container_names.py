"""Container tests name what they create uniquely per test session.

Two test sessions on one Docker engine (two helpers, CI and a developer) ran the same job
names: container names are engine-wide, so one session's run found or removed the other's
containers (test_run_local_command failed 3 times in 15). Checked here without an engine:
the token differs between sessions, and no container test names a job, a job's pod
template or a network with a fixed literal.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = sorted((REPO / "tests/containers").glob("*.py"))


def test_two_sessions_draw_different_tokens():
    code = "from tests.containers import engine; print(engine.unique('lmpi-cli'))"
    got = {subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip() for _ in range(3)}
    assert len(got) == 3 and all(g.startswith("lmpi-cli-") and len(g) == 15 for g in got)


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _fixed_names(tree: ast.AST) -> list[str]:
    """Literal names of jobs (calls or dicts with a namespace beside the name), of networks
    (``networks.create("...")``) and of the job file helper ``_smoke_yaml(..., "name")``."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kw = {k.arg: k.value for k in node.keywords}
            func = ast.unparse(node.func)
            if "namespace" in kw and "name" in kw and _literal(kw["name"]):
                bad.append(f"{func}(name={kw['name'].value!r})")
            if func.endswith("networks.create") and node.args and _literal(node.args[0]):
                bad.append(f"{func}({node.args[0].value!r})")
            if func == "_smoke_yaml" and len(node.args) > 2 and _literal(node.args[2]):
                bad.append(f"_smoke_yaml(..., {node.args[2].value!r})")
        if isinstance(node, ast.Dict):
            keys = {k.value: v for k, v in zip(node.keys, node.values) if _literal(k)}
            if "namespace" in keys and _literal(keys.get("name")):
                bad.append(f"{{'name': {keys['name'].value!r}, 'namespace': ...}}")
    return bad


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_container_test_uses_a_fixed_job_or_network_name(path):
    assert _fixed_names(ast.parse(path.read_text(encoding="utf-8"))) == []
