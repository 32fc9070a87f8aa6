"""Fixtures shared across tests/: the unit tests' rbac objects, and the ones several
folders share in one instance per session -- the Docker engine and the built images
(``docker_client``, ``image``: tests/containers, tests/cluster's real node and the docs'
``# needs: docker`` blocks), the test registry with the images pushed (``registry``,
``pushed``), and the test control plane (``plane``: tests/cluster and the docs' ``# needs:
cluster`` blocks; one per machine, as its mpi-operator binds port 8080). The cluster and
container tests have their own conftest.py below for the rest."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testcluster import controlplane, reap
from tests.cluster.tiers import unavailable as tier_unavailable
from tests.containers.conftest import unavailable
from tests.containers.engine import LABEL, image_ref, remove_labelled
from tests.containers.registry_server import pushed, registry  # noqa: F401 - fixtures
from tests.support.kustomize import MANIFESTS, kustomize


@pytest.fixture(scope="module")
def rbac_objects() -> list[dict]:
    """manifests/rbac as ``kubectl kustomize`` renders it (ServiceAccount, Role,
    RoleBinding): the Role the doctor tests' API double enforces."""
    return kustomize(MANIFESTS / "rbac")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[object]:
    """A ``docker.DockerClient`` for the engine at ``DOCKER_HOST`` (pinged once).

    Containers the tests start carry the label ``kfp-gpu-test=<session id>``; whatever is
    left of them (and of networks with that label) is removed when the session ends.
    """
    try:
        import docker
    except ImportError:
        unavailable("the docker Python SDK is not installed (dev extra: pip install -e '.[dev]')")
    where = os.environ.get("DOCKER_HOST", "(DOCKER_HOST unset: the default socket)")
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except docker.errors.DockerException as exc:
        unavailable(f"no Docker engine at {where}: {exc} (start one: scripts/dockerd.sh start)")
    session = uuid.uuid4().hex[:12]
    client.kfp_gpu_session = session  # read by run_container's labels
    yield client
    remove_labelled(client, {LABEL: session})
    client.close()


@pytest.fixture(scope="session")
def image(docker_client) -> Callable[[str], str]:
    """``image(name)`` -> the local tag of built image ``name`` (trainer, horovod, launcher).

    The tag is the reference the compiled YAML names (``<registry>/kfp-gpu-<name>:<version>``,
    the default ImageSet). A missing image skips the test (fails it under CI).
    """
    import docker

    def _image(name: str) -> str:
        ref = image_ref(name)
        try:
            docker_client.images.get(ref)
        except docker.errors.ImageNotFound:
            unavailable(f"image {ref} is not built (make images-local)")
        return ref

    return _image


@pytest.fixture(scope="session")
def plane() -> Iterator[controlplane.Plane]:
    """The running control plane: the one ``make cluster-up`` left running (in
    ``$KFP_GPU_CLUSTER_DIR``, default ~/.cache/kfp-gpu/cluster) if it answers, else one
    brought up in a temporary folder and taken down when the session ends. Binaries come
    from testcluster/build.sh; where they are absent the test is skipped with that reason,
    and with ``CI=true`` it fails instead (:func:`tests.cluster.tiers.unavailable`)."""
    shared = Path(os.environ.get("KFP_GPU_CLUSTER_DIR") or controlplane.DEFAULT_DIR)
    if (shared / "kubeconfig").exists():
        try:
            running = controlplane.attach(shared)
        except controlplane.Unavailable as e:
            tier_unavailable(str(e), "tier1")
        if running.kubectl("get", "--raw", "/readyz", check=False).returncode == 0:
            yield running
            return
        if os.environ.get("KFP_GPU_CLUSTER_DIR"):
            pytest.fail(f"the control plane in {shared} does not answer: make cluster-down "
                        "and cluster-up again", pytrace=False)
    try:
        controlplane.binaries()
    except controlplane.Unavailable as e:
        tier_unavailable(str(e), "tier1")
    # a plane a killed session left holds ~9 GB and its node's network: gone first
    reap.reap(log=lambda line: print(line, file=sys.stderr))
    where = controlplane.scratch_dir()  # short: the real node's sockets live under it
    try:
        p = controlplane.up(where, name=f"kfp-gpu-{uuid.uuid4().hex[:6]}")
    except BaseException:
        with contextlib.suppress(Exception):  # what up made; the error is up's
            controlplane.down(where)
        raise
    try:
        yield p
    finally:
        controlplane.down(where, p.name)
