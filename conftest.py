"""Shared fixtures: the real data in ../shared/data and a small prepared IMDB subset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent


def data_dir() -> Path:
    """$KFP_GPU_DATA_DIR, else ../shared/data beside the checkout."""
    return Path(os.environ.get("KFP_GPU_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = data_dir()
    if not (d / "imdb" / "imdb_50k.csv.gz").exists():
        pytest.fail(f"real test data not found in {d}: set KFP_GPU_DATA_DIR")
    return d


@pytest.fixture(scope="session")
def imdb_csv(shared_data) -> Path:
    return shared_data / "imdb" / "imdb_50k.csv.gz"


@pytest.fixture(scope="session")
def imdb_small(tmp_path_factory, imdb_csv) -> dict:
    """prep_text on a seeded 2,000 + 2,000 subset of the real IMDB reviews."""
    from kfp_gpu.components.prep_text import prep

    out = tmp_path_factory.mktemp("imdb_small")
    stats = prep.run(source=str(imdb_csv), train_path=str(out / "train"),
                     test_path=str(out / "test"), vocabulary_path=str(out / "vocab.txt"),
                     max_rows_per_split=2000, num_words=10000)
    return {"dir": out, "train": str(out / "train"), "test": str(out / "test"),
            "vocab": str(out / "vocab.txt"), "stats": stats}


@pytest.fixture
def kfp_client_env(monkeypatch, tmp_path):
    """An environment in which ``kfp.Client`` and ``kfp-gpu submit`` see nothing of this
    machine's: HOME in ``tmp_path`` (kfp writes ~/.config/kfp/context.json), no KFP token
    unless a test sets one, no CI commit variables, no KFP host, no kubeconfig or in-cluster
    service (no cluster to read task logs from)."""
    from kfp_gpu.cluster import kfp_api

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(kfp_api.TOKEN_ENV, raising=False)
    monkeypatch.setenv(kfp_api.TOKEN_PATH_ENV, str(tmp_path / "no-token"))
    for var in ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILD_SOURCEVERSION", "KFP_HOST",
                "KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)


#: ``pytest -n 2 --dist loadgroup`` (pytest-xdist; ``make test``): the tests that share one
#: test control plane (marker cluster or node: its mpi-operator binds port 8080, so one plane
#: per machine runs it) run in one worker, those that share the engine's session fixtures
#: and the test registry (marker container) in one worker; every other module's tests stay
#: together (as ``--dist loadfile``: a module fixture is made once). A docs page's blocks
#: stay together too (a block may use a file an earlier block wrote), in the group of the
#: strongest need among them. Without xdist the marks do nothing.
XDIST_GROUPS = (("plane", ("cluster", "node")), ("engine", ("container",)))


def _xdist_group(item) -> str:
    for group, markers in XDIST_GROUPS:
        if any(item.get_closest_marker(m) for m in markers):
            return group
    return f"module:{item.nodeid.split('::', 1)[0]}"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Put each test in its xdist group (:data:`XDIST_GROUPS`), after every conftest has
    added its markers; a docs page's blocks (``test_block[PAGE:LINE]``) in one group."""
    pages: dict[str, list] = {}
    for item in items:
        spec = getattr(item, "callspec", None)
        if item.nodeid.startswith("tests/test_docs_run.py::test_block[") and spec:
            pages.setdefault(spec.params["doc"], []).append(item)
            continue
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
    for page, blocks in pages.items():
        groups = {_xdist_group(b) for b in blocks}
        group = next((g for g, _ in XDIST_GROUPS if g in groups), f"docs:{page}")
        for b in blocks:
            b.add_marker(pytest.mark.xdist_group(group))
