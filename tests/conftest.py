"""Fixtures shared by the unit tests under tests/ (the cluster and container tests have
their own conftest.py below)."""

from __future__ import annotations

import pytest

from tests.kustomize import MANIFESTS, kustomize


@pytest.fixture(scope="module")
def rbac_objects() -> list[dict]:
    """manifests/rbac as ``kubectl kustomize`` renders it (ServiceAccount, Role,
    RoleBinding): the Role the doctor tests' API double enforces."""
    return kustomize(MANIFESTS / "rbac")
