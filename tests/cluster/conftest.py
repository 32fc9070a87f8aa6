"""Fixtures for tests on the real control plane (marker ``cluster``): see README.md here.

``plane`` (tests/conftest.py, shared with the docs' ``# needs: cluster`` blocks) is one
control plane per test session: the one ``make cluster-up`` left running (in
``$KFP_GPU_CLUSTER_DIR``, default ~/.cache/kfp-gpu/cluster) if it answers, else one
brought up in a temporary folder and taken down when the session ends. The fixtures here
add its tiers (JobSet and Trainer, Kueue, the real node); where a tier's binaries are
absent its tests are skipped with that reason, and with ``CI=true`` they fail instead (CI
builds them first; :func:`tests.cluster.tiers.unavailable`).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testcluster import controlplane
from tests.cluster import kube, leftovers, objects
from tests.cluster.tiers import unavailable
from tests.containers.conftest import mark_under

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Every test under tests/cluster carries the ``cluster`` marker; a ``chaos`` one (it
    stops the plane's own processes, test_chaos.py, test_chaos_node.py, test_chaos_etcd.py,
    or takes minutes: test_preemption.py, test_load.py, test_secret_leaks.py) runs only
    when ``-m`` names ``chaos`` (``make chaos``)."""
    mark_under(HERE, pytest.mark.cluster, items)
    if "chaos" not in (config.getoption("markexpr", "") or ""):
        skip = pytest.mark.skip(reason="a chaos scenario: make chaos (pytest -m chaos)")
        for item in items:
            if item.get_closest_marker("chaos"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def api(plane):
    """A ``kubernetes.client.ApiClient`` for the plane's admin kubeconfig."""
    from kfp_gpu.kube import api_client

    c = api_client(str(plane.kubeconfig))
    yield c
    c.close()


@pytest.fixture()
def namespace(plane, api, request) -> Iterator[str]:
    """A namespace of this test's own, deleted afterwards (not waited for)."""
    base = request.node.name.lower().replace("_", "-")
    ns = f"t-{''.join(c for c in base if c.isalnum() or c == '-')[:40].strip('-')}-" \
         f"{uuid.uuid4().hex[:5]}"
    kube.create_namespace(api, ns)
    yield ns
    kube.delete_namespace(api, ns)


@pytest.fixture(autouse=True)
def stop_launches(request) -> Iterator[None]:
    """After each cluster test, every :class:`tests.cluster.jobs.Launch` it left running
    (a failed assertion before its ``outcome``) is stopped: its job deleted, its thread
    joined, so no launcher thread outlives its test (one test scans the process's
    threads). A Launch that will not stop fails the test's teardown."""
    from tests.cluster import jobs

    before = set(jobs.LIVE)
    yield
    mine = jobs.LIVE - before
    jobs.LIVE.difference_update(mine)
    left = [t for t in mine if t.is_alive()]
    if left:
        admin = request.getfixturevalue("api")
        stuck = [t.job["metadata"]["name"] for t in left if not t.stop(admin)]
        assert not stuck, f"launcher threads still running after their job was deleted: {stuck}"


#: The objects session fixtures made on the plane (the Trainer runtime, CRDs, the real
#: node's slices...): they stay for the session, so no module is blamed for them. Each
#: session fixture that makes objects does so inside ``leftovers.noted(plane,
#: SESSION_OBJECTS)`` (a conftest's pytest_fixture_setup hook is not called for session
#: fixtures: their request's node is the session).
SESSION_OBJECTS: set = set()


@pytest.fixture(scope="module", autouse=True)
def leaves_the_plane_as_found(request, plane) -> Iterator[None]:
    """Each module leaves the plane as it found it (:mod:`tests.cluster.leftovers`), so
    every cluster test passes again on a plane that ran it (``make cluster-up`` once,
    ``pytest -m cluster`` twice): the module's teardown fails with what it left or
    removed."""
    before = leftovers.snapshot(plane)
    yield
    left, removed = leftovers.difference(before, leftovers.snapshot(plane), SESSION_OBJECTS)
    if left or removed:
        pytest.fail(leftovers.describe(request.module.__name__, left, removed), pytrace=False)


@pytest.fixture(scope="session")
def tier2(plane):
    """The plane with JobSet v0.12.0 and Trainer v2.3.0 running (started once, on demand)."""
    from testcluster import operators

    try:
        plane.bins.update(controlplane.binaries(controlplane.TIER2))
    except controlplane.Unavailable as e:
        unavailable(str(e), "tier2")
    with leftovers.noted(plane, SESSION_OBJECTS):
        operators.start_tier2(plane)
    return plane


@pytest.fixture(scope="session")
def trainer_crds(plane) -> str:
    """Trainer v2.3.0's CRDs (schema only; the controller is tier 2) and the project's
    ClusterTrainingRuntime (:func:`tests.cluster.objects.install_trainer_runtime`): what a
    TrainJob needs to be accepted on any plane, with or without Trainer's webhook (``make
    cluster-up`` runs it); returns the runtime's name."""
    from testcluster import modules

    with leftovers.noted(plane, SESSION_OBJECTS):
        plane.apply(modules.crds("trainer"))
        return objects.install_trainer_runtime(plane)


@pytest.fixture(scope="session")
def trainer_runtime(tier2) -> str:
    """Tier 2 (JobSet, Trainer) running and the project's ClusterTrainingRuntime
    (manifests/trainer) applied; returns its name."""
    with leftovers.noted(tier2, SESSION_OBJECTS):
        return objects.install_trainer_runtime(tier2)


@pytest.fixture(scope="session")
def kueue(plane) -> controlplane.Plane:
    """The plane with Kueue (tier 3, :mod:`testcluster.kueue`) running: started once by
    :func:`testcluster.kueue.start_tier3` unless it already runs."""
    from testcluster import kueue as kueue_mod

    try:
        plane.bins.update(controlplane.binaries(controlplane.TIER3))
    except controlplane.Unavailable as e:
        unavailable(str(e), "tier3")
    with leftovers.noted(plane, SESSION_OBJECTS):
        kueue_mod.start_tier3(plane)
    return plane


@pytest.fixture(scope="session")
def real_node(plane) -> controlplane.Plane:
    """The plane with its real node (:mod:`testcluster.node`: kubelet, containerd, runc,
    CNI, CoreDNS, dra-example-driver): the one ``make cluster-up NODE=1`` made, else added
    to the plane now (and removed with it)."""
    try:
        plane.bins.update(controlplane.binaries(controlplane.NODE))
    except controlplane.Unavailable as e:
        unavailable(str(e), "node")
    if not controlplane.has_node(plane.dir):
        with leftovers.noted(plane, SESSION_OBJECTS):
            controlplane.start_node(plane)
    return plane


@pytest.fixture()
def pvs(api):
    """Deletes the PersistentVolumes a test made (cluster-scoped: the namespace's deletion
    does not; :func:`tests.cluster.real_node.bind_pvcs` adds their names)."""
    made: list[str] = []
    yield made
    from kubernetes import client

    for pv in made:
        client.CoreV1Api(api).delete_persistent_volume(pv)


@pytest.fixture(scope="module")
def supervised(real_node):
    """The plane with its real node, whose supervisor must run (the chaos scenarios stop
    its processes on purpose; a plane brought up before the supervisor existed has none:
    bring it down and up again)."""
    from testcluster import supervise

    if not supervise.running(real_node.dir):
        pytest.fail(f"the plane in {real_node.dir} has no supervisor: make cluster-down and "
                    "make cluster-up NODE=1 again", pytrace=False)
    return real_node


@pytest.fixture(scope="module")
def horovod(supervised, request) -> str:
    """The horovod image's ref in the real node's containerd: used as it is when the node
    holds it already (no Docker engine needed then), else copied by ``node_image``."""
    from testcluster import node_images
    from tests.containers.engine import image_ref

    ref = image_ref("horovod")
    if ref in node_images.node_images(supervised):
        return ref
    return request.getfixturevalue("node_image")("horovod")


#: The images the real-pod tests run, in the order they first need them.
NODE_IMAGES = ("horovod", "launcher", "trainer")


@pytest.fixture(scope="session")
def node_image(real_node, docker_client, image):
    """``node_image(name)`` -> the ref of built image ``name`` (horovod, launcher,
    trainer), copied from the Docker engine into the real node's containerd on first use
    (``docker save`` | ``ctr images import``: no registry). A copy the session started in
    the background (:func:`_preload_node_images`) is waited for, not repeated. An image
    that left the node after its copy fails the test with what the node logged about
    deleting images (:func:`testcluster.node_images.image_removals`: the kubelet under
    disk pressure, containerd's ImageDelete events) instead of a pod that tries to pull it
    from ghcr.io."""
    from testcluster import node_images

    done: dict[str, str] = {}

    def _get(name: str) -> str:
        if name in done and done[name] not in node_images.node_images(real_node):
            why = node_images.image_removals(real_node) or ["(no image deletion logged)"]
            pytest.fail(f"{done[name]} left the real node's containerd after its copy:\n  "
                        + "\n  ".join(why), pytrace=False)
        if name not in done:
            ref = image(name)
            copied = _PRELOAD.get(name)
            if copied is not None:
                copied.wait()
            if ref not in node_images.node_images(real_node):
                node_images.import_images(real_node, [ref], docker_client)
            done[name] = ref
        return done[name]

    return _get


#: name -> set when the session's background copy of that image into the node has ended.
_PRELOAD: dict[str, threading.Event] = {}


@pytest.fixture(scope="session", autouse=True)
def _preload_node_images(request) -> None:
    """When the session selected real-pod tests (marker ``node``), bring up the real node
    at the first cluster test and copy the three images into its containerd in a
    background thread, one after the other in the order the tests need them: the copies
    (about 3 minutes on 2 cores, mostly the trainer's and horovod's 2 GB each) then overlap
    the kwok-node tests that run first instead of holding up the first real pod. Where the
    node or the images are unavailable nothing is started here; the tests that need them
    skip or fail by their own fixtures' rule, and a copy that failed here is made again
    (and its error reported) by :func:`node_image`."""
    if not any(item.get_closest_marker("node") for item in request.session.items):
        return
    try:
        plane = request.getfixturevalue("real_node")
        refs = {n: request.getfixturevalue("image")(n) for n in NODE_IMAGES}
    except (pytest.skip.Exception, pytest.fail.Exception):
        return
    import docker

    from testcluster import node_images

    have = node_images.node_images(plane)
    wanted = [(n, ref) for n, ref in refs.items() if ref not in have]
    for name, _ in wanted:
        _PRELOAD[name] = threading.Event()

    def copy_all() -> None:
        try:
            # its own connection: the tests use theirs meanwhile
            with contextlib.closing(docker.from_env(timeout=900)) as client:
                for name, ref in wanted:
                    with contextlib.suppress(Exception):
                        node_images.import_images(plane, [ref], client)
                    _PRELOAD[name].set()
        finally:  # whatever happened, nobody waits for a copy that will not come
            for event in _PRELOAD.values():
                event.set()

    threading.Thread(target=copy_all, name="node-images", daemon=True).start()
