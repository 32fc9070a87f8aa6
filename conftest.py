"""Shared fixtures: the real data in ../shared/data and a small prepared IMDB subset."""

from __future__ import annotations

import functools
import os
import re
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
#: test control plane (tests/cluster: its mpi-operator binds port 8080, so one plane per
#: machine runs it) run in one worker, those that share the engine's session fixtures and
#: the test registry (tests/containers) in one worker; every other module's tests stay
#: together (as ``--dist loadfile``: a module fixture is made once), and so do a docs
#: page's blocks (a block may use a file an earlier block wrote), in the plane's or the
#: engine's group where a block of the page needs either (``# needs:`` cluster, or docker
#: / registry: tests/support/doc_needs.py). Without xdist nothing changes.
XDIST_FOLDERS = (("plane", "tests/cluster/"), ("engine", "tests/containers/"))
XDIST_PAGE_NEEDS = (("plane", {"cluster"}), ("engine", {"docker", "registry"}))
_DOC_BLOCK = re.compile(r"^tests/docs/test_docs_run\.py::test_block\[(?P<page>.+):\d+\]$")


def xdist_group(nodeid: str) -> str:
    """The xdist group of the test ``nodeid`` (see :data:`XDIST_FOLDERS`)."""
    path = nodeid.split("::", 1)[0]
    for group, folder in XDIST_FOLDERS:
        if path.startswith(folder):
            return group
    block = _DOC_BLOCK.match(nodeid)
    if block:
        return _page_group(block["page"])
    return f"module:{path}"


@functools.cache
def _page_group(page: str) -> str:
    from tests.support.doc_needs import NEEDS_LINE

    words = {w for line in NEEDS_LINE.findall((REPO / page).read_text())
             for w in line.split("--", 1)[0].split()}
    return next((g for g, needs in XDIST_PAGE_NEEDS if needs & words), f"docs:{page}")


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` by :func:`xdist_group`. pytest-xdist 3.8's own loadgroup reads
    ``xdist_group`` marks by rewriting node ids, which pytest 9.2's structured node ids
    ignore, so every test would be scheduled alone (pytest-dev/pytest-xdist issue 1386,
    fix PR 1388 open); its scope scheduler (xdist/scheduler/loadscope.py) takes the group
    from the node id instead, through its ``_split_scope``."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return GroupScheduling(config, log)
