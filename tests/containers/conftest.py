"""Fixtures for tests that run the built runtime images as containers (marker ``container``).

The engine is the one ``DOCKER_HOST`` names (``scripts/dockerd.sh start`` prints it); the
images are the local tags ``scripts/build-images.sh --local`` (``make images-local``)
gives them, i.e. the exact references the compiled YAML names. With ``CI=true`` a missing
or broken engine, or a missing image, FAILS the test; elsewhere the test is skipped with
the reason. See tests/containers/README.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.containers.engine import (
    ContainerResult,
    run_container,
)

HERE = Path(__file__).resolve().parent


def in_ci() -> bool:
    """True when the environment variable CI is ``true`` (or ``1``), as CI services set it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def unavailable(reason: str) -> None:
    """Fail under CI (the container tests must run there), skip elsewhere; never returns."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the container tests must run)", pytrace=False)
    pytest.skip(reason)


def mark_under(folder: Path, marker, items) -> None:
    """Give ``marker`` to every collected test whose file is under ``folder``."""
    for item in items:
        if folder in Path(str(item.fspath)).resolve().parents:
            item.add_marker(marker)


def pytest_collection_modifyitems(config, items):
    """Every test under tests/containers carries the ``container`` marker."""
    mark_under(HERE, pytest.mark.container, items)


@pytest.fixture(scope="session")
def run_in(docker_client) -> Callable[..., ContainerResult]:
    """``run_in(ref, command, **run_kwargs)`` -> :class:`ContainerResult` (exit code, output).

    Runs ``command`` (a list: no shell) in a new container of image ``ref`` with the image's
    own user unless ``user=`` is given, waits (``timeout_s=``, default 300 s), collects
    stdout+stderr and removes the container.
    """

    def _run(ref: str, command: list[str], **kwargs) -> ContainerResult:
        return run_container(docker_client, ref, command, **kwargs)

    return _run


@pytest.fixture(scope="session")
def docker_engine(docker_client):
    """The shared ``docker_client`` under the name the local-runner tests use."""
    return docker_client


@pytest.fixture(scope="session")
def horovod_image(image) -> str:
    """The local tag of the horovod image (``image`` fixture: skips if not built)."""
    return image("horovod")
