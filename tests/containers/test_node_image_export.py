"""The Docker half of copying an image into the real node (testcluster/node_images.py
``docker_save``): the tarball names exactly the reference the pods use, whatever other
tags the image carries.

CI found it (2026-11-28/29): a test session killed after tests/containers/test_registry.py
had tagged the horovod and launcher images ``127.0.0.1:<port>/kfp-gpu-<name>:0.1.0`` left
those tags in the engine's persistent data root (the session-scoped ``pushed`` fixture
untags them at the session's end, which never came). docker-py's ``save(named=True)`` names the image's *first* tag, which
was that one, so ``ctr images import`` gave the node the images under the registry's name
and every real-pod test's pod tried to pull ``ghcr.io/kfp-gpu/...``; the trainer image,
never left tagged, ran. Needs a Docker engine (DOCKER_HOST) and the built launcher image.
"""

from __future__ import annotations

import json
import tarfile

import pytest

from testcluster import node_images

pytestmark = pytest.mark.container

#: A name that sorts before ``ghcr.io/...`` and ``127.0.0.1:...`` in the image's tags.
FIRST = "0.invalid/kfp-gpu-launcher"


class _Chunks:
    """A read-only file over an iterator of byte chunks (tarfile's stream mode reads it)."""

    def __init__(self, chunks):
        self._it, self._buf = iter(chunks), b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            nxt = next(self._it, None)
            if nxt is None:
                break
            self._buf += nxt
        out, self._buf = (self._buf, b"") if n < 0 else (self._buf[:n], self._buf[n:])
        return out


def saved_repo_tags(chunks) -> list[str]:
    """The ``RepoTags`` of every image in a ``docker save`` tarball (its manifest.json)."""
    with tarfile.open(fileobj=_Chunks(chunks), mode="r|") as t:
        for m in t:
            if m.name == "manifest.json":
                return [tag for entry in json.load(t.extractfile(m))
                        for tag in entry.get("RepoTags") or []]
    raise AssertionError("no manifest.json in the tarball")


def test_the_tarball_names_the_ref_not_the_images_first_tag(docker_client, image):
    ref = image("launcher")
    img = docker_client.images.get(ref)
    img.tag(FIRST, tag="tag-order-test")
    try:
        img.reload()
        # the situation CI met: another name is the image's first tag
        assert img.tags[0] == f"{FIRST}:tag-order-test", img.tags
        assert saved_repo_tags(img.save(named=True)) == [img.tags[0]]
        assert saved_repo_tags(node_images.docker_save(img, ref)) == [ref]
    finally:
        docker_client.images.remove(f"{FIRST}:tag-order-test")  # untag only
    img.reload()
    assert f"{FIRST}:tag-order-test" not in img.tags
