"""The launcher's RBAC said once: the Role's rules
(manifests/rbac/role.yaml), the ``grants:`` line of its header comment, the ``grants:`` line
of the launcher's docstring (kfp_gpu.mpi.launch.launcher) and the doctor's table
(kfp_gpu.cluster.doctor.rbac.LAUNCHER_PERMISSIONS) must all name the same
(resource, verb) pairs. The comment once listed ``pods: watch`` and left out ``patch``,
which the rules grant and the launcher uses (a retry takes over the ownerReference)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kfp_gpu.cluster.doctor import rbac
from kfp_gpu.mpi.launch import launcher

ROLE = Path(__file__).resolve().parents[2] / "manifests" / "rbac" / "role.yaml"


def grants(text: str) -> set[tuple[str, str]]:
    """(resource, verb) pairs of a ``grants: <resources>: <verbs>; ...`` paragraph, which
    may continue on following lines (``#`` comment markers and indentation dropped) up to
    the first blank or non-continued line."""
    lines = [ln.lstrip("# ").rstrip() for ln in text.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("grants:"))
    para = lines[start][len("grants:"):]
    for ln in lines[start + 1:]:
        if not ln or ln.startswith("(") or ":" not in ln:
            break
        para += " " + ln
    out = set()
    for part in para.split(";"):
        resources, _, verbs = part.rpartition(":")
        for res in re.split(r",\s*", resources.strip()):
            for verb in re.split(r",\s*", verbs.strip()):
                out.add((res, verb))
    return out


def role_rules() -> set[tuple[str, str]]:
    role = yaml.safe_load(ROLE.read_text())
    return {(res, verb) for rule in role["rules"] for res in rule["resources"]
            for verb in rule["verbs"]}


def test_role_comment_rules_docstring_and_doctor_table_agree():
    table = {(res, verb) for _group, res, verb in rbac.LAUNCHER_PERMISSIONS}
    assert role_rules() == table
    assert grants(ROLE.read_text().split("apiVersion:")[0]) == table
    assert grants(launcher.__doc__) == table
    # the doctor reviews each pair in the group the Role grants it in
    role = yaml.safe_load(ROLE.read_text())
    groups = {(g, res, verb) for rule in role["rules"] for g in rule["apiGroups"]
              for res in rule["resources"] for verb in rule["verbs"]}
    assert set(rbac.LAUNCHER_PERMISSIONS) == groups


def test_the_parser_sees_a_disagreeing_comment():
    """The old header comment (before the table was said once), in the same form: the check above
    would have failed on it."""
    old = ("# grants: mpijobs, trainjobs: create, get, list, watch, delete; pods: get, list, "
           "watch;\n#   pods/log: get; events: list\n")
    table = {(res, verb) for _group, res, verb in rbac.LAUNCHER_PERMISSIONS}
    assert ("pods", "watch") in grants(old) - table
    assert ("mpijobs", "patch") in table - grants(old)
    with pytest.raises(StopIteration):
        grants("no such line")
