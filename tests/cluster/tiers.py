"""The one rule for a control-plane fixture whose tier is missing (skip or fail), shared
by tests/conftest.py (``plane``) and tests/cluster/conftest.py (the other tiers)."""

from __future__ import annotations

import os

import pytest

from tests.containers.conftest import in_ci

#: How .ci/control-plane.sh names a tier it skipped for CI's time budget, in
#: ``$KFP_GPU_CP_SKIPPED`` (one line per tier: ``tier2: not built (time budget): ...``).
BUDGET_SKIP = "not built (time budget)"


def unavailable(reason: str, tier: str) -> None:
    """The one rule for a fixture of control-plane ``tier`` ("tier1", "tier2", "tier3",
    "node")
    whose binaries are missing; never returns.

    - .ci/control-plane.sh skipped the tier for CI's time budget (a line
      ``<tier>: not built (time budget): ...`` in ``$KFP_GPU_CP_SKIPPED``): skip with
      that line, under CI too;
    - else under ``CI=true``: fail -- the cluster tests must run there, and a tier whose
      build failed has already failed .ci/run (a line of any other kind, e.g. an older
      ``tier2: build failed``, does not skip);
    - else (a developer's machine without the binaries): skip with ``reason``.

    Raises:
        pytest.skip.Exception, pytest.fail.Exception (``Failed``): as above.
    """
    for line in os.environ.get("KFP_GPU_CP_SKIPPED", "").splitlines():
        if line.startswith(f"{tier}: {BUDGET_SKIP}"):
            pytest.skip(f"CI skipped control-plane {line.strip()}")
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the cluster tests must run; {tier} was not "
                    "skipped for time, so it must be built)", pytrace=False)
    pytest.skip(reason)
