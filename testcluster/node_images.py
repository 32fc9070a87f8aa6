"""The real node's images and its command runner: the pause image built from Kubernetes'
own source, images imported from Docker into the node's containerd (``ctr``), and what
containerd holds and runs (:func:`node_images`, :func:`containers_of`,
:func:`running_tasks`). Used by :mod:`testcluster.node` and the node tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from testcluster import node_config as cfg

#: The pause container's source in the Kubernetes module (built with gcc, static).
PAUSE_SOURCE = "k8s.io/kubernetes@v1.36.3/build/pause/linux/pause.c"


class NodeError(RuntimeError):
    """A step of bringing the node up failed; the message names the log to read."""


def run(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), capture_output=True, text=True, check=False, **kw)
    if check and r.returncode != 0:
        raise NodeError(f"{' '.join(argv[:4])} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def pause_image_tar(pause_binary: bytes) -> bytes:
    """An OCI image layout tarball of ``pause_binary`` as ``/pause`` (entrypoint), named
    :data:`testcluster.node_config.PAUSE_IMAGE` for ``ctr images import``. Pure."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        info = tarfile.TarInfo("pause")
        info.size, info.mode, info.mtime = len(pause_binary), 0o755, 0
        t.addfile(info, io.BytesIO(pause_binary))
    layer_b = layer.getvalue()
    def digest(b: bytes) -> str:
        return "sha256:" + hashlib.sha256(b).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [digest(layer_b)]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": digest(layer_b), "size": len(layer_b)}]}).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": digest(manifest), "size": len(manifest),
                       "annotations": {"io.containerd.image.name": cfg.PAUSE_IMAGE,
                                       "org.opencontainers.image.ref.name": "3.10.2"}}]})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        def add(name: str, data: bytes) -> None:
            i = tarfile.TarInfo(name)
            i.size, i.mtime = len(data), 0
            t.addfile(i, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", index.encode())
        for b in (layer_b, config, manifest):
            add("blobs/sha256/" + digest(b).split(":")[1], b)
    return out.getvalue()


def pause_binary(cache: Path) -> bytes:
    """Kubernetes' pause, compiled statically (gcc) from the module cache's
    build/pause/linux/pause.c into ``cache`` once."""
    out = cache / "pause"
    if not out.exists():
        gomodcache = run("go", "env", "GOMODCACHE").stdout.strip()
        src = Path(gomodcache) / PAUSE_SOURCE
        if not src.exists():
            raise NodeError(f"{src} missing: bash testcluster/build.sh kubelet first")
        cache.mkdir(parents=True, exist_ok=True)
        run("gcc", "-Os", "-static", "-DVERSION=v3.10.2", "-o", str(out) + ".tmp",
             str(src))
        Path(str(out) + ".tmp").replace(out)
    return out.read_bytes()


# ---------------------------------------------------------------- up
def _ctr_argv(plane, paths: cfg.Paths, *args: str) -> list[str]:
    """``ctr`` against the node's containerd, in the CRI's namespace ``k8s.io``."""
    return [str(plane.bins["containerd"] / "ctr"), "--address", str(paths.containerd_sock),
            "--namespace", "k8s.io", *args]


def _ctr(plane, paths: cfg.Paths, *args: str, check: bool = True, input: bytes | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(_ctr_argv(plane, paths, *args), input=input, capture_output=True,
                       timeout=timeout, check=False)
    if check and r.returncode != 0:
        raise NodeError(f"ctr {' '.join(args[:2])} failed: {r.stderr.decode()[-500:]}")
    return r


def _ctr_import(plane, paths: cfg.Paths, tar: bytes) -> None:
    _ctr(plane, paths, "images", "import", "--no-unpack", "-", input=tar)


def docker_save(image, ref: str):
    """``docker save REF`` of ``image`` (a ``docker.models.images.Image`` tagged ``ref``) as
    a stream of tarball chunks whose ``manifest.json`` names exactly ``ref``, the name
    ``ctr images import`` gives the image. (docker-py's ``save(named=True)`` names the
    image's *first* tag: an image a killed test session left tagged
    ``127.0.0.1:<port>/kfp-gpu-horovod:0.1.0`` for its registry sorts that name first, and
    the node got the image under it, not under the ref the pods use.)

    Raises:
        docker.errors.InvalidArgument: ``ref`` is not one of the image's tags.
    """
    return image.save(named=ref)


def disk_shortfall(image_bytes: int, free: int, total: int,
                   percent: float = cfg.DISK_EVICTION_PERCENT) -> int:
    """Bytes missing for an image of ``image_bytes`` (Docker's uncompressed size) to enter
    the node's containerd and leave the filesystem (``free`` bytes available to non-root,
    as the kubelet's statfs reads them, of ``total``) above the kubelet's disk eviction
    threshold, ``percent`` of ``total``; 0 when it fits. containerd keeps an imported
    image twice: its layers as content and unpacked as an overlayfs snapshot. Pure."""
    need = 2 * image_bytes + total * percent / 100
    return max(0, int(need - free))


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def import_images(plane, refs: list[str], docker_client) -> dict[str, float]:
    """Copy Docker images into the node's containerd (``docker save`` streamed into ``ctr
    images import``): the pods use them as built, no registry. Returns seconds per ref.

    Raises:
        NodeError: ctr refused an image, the node holds no image named ``ref`` after the
            import, or the disk has no room for it above the kubelet's eviction threshold
            (:func:`disk_shortfall`): imported anyway, the kubelet would delete the node's
            images at the next pressure check.
    """
    paths = cfg.Paths(plane.dir / "node")
    times = {}
    for ref in refs:
        img = docker_client.images.get(ref)
        size = int(img.attrs.get("Size") or 0)
        usage = shutil.disk_usage(paths.root)
        short = disk_shortfall(size, usage.free, usage.total)
        if short:
            raise NodeError(
                f"no room on the node's disk for {ref}: {_gib(size)} is about "
                f"{_gib(2 * size)} in containerd (content and unpacked snapshot), "
                f"{_gib(usage.free)} of {_gib(usage.total)} are free, and under "
                f"{cfg.DISK_EVICTION_PERCENT}% free the kubelet deletes the node's images; "
                f"{_gib(short)} more needed (python -m testcluster.reap removes the planes "
                f"killed test sessions left in /tmp)")
        t0 = time.monotonic()
        ctr = subprocess.Popen(_ctr_argv(plane, paths, "images", "import", "-"),
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        try:
            for chunk in docker_save(img, ref):
                ctr.stdin.write(chunk)
        finally:
            ctr.stdin.close()
        err = ctr.stderr.read().decode(errors="replace")
        if ctr.wait(timeout=900) != 0:
            raise NodeError(f"importing {ref} into the node failed: {err[-500:]}")
        if ref not in node_images(plane):
            raise NodeError(f"ctr imported the tarball of {ref} but the node has no image of "
                            f"that name: {sorted(node_images(plane))}")
        times[ref] = time.monotonic() - t0
    return times


#: Log lines that tell why an image left the node, per log of the plane: the kubelet's
#: when disk pressure makes it delete images (k8s.io/kubernetes v1.36.3
#: pkg/kubelet/eviction/eviction_manager.go, pkg/kubelet/images/image_gc_manager.go), and
#: containerd's CRI plugin's for every image deleted, by whoever (containerd v2.4.2
#: internal/cri/server/events.go).
REMOVAL_LOG_MARKS = {
    "kubelet.log": ("Eviction manager: attempting to reclaim", "Removing image to free bytes"),
    "containerd.log": ("ImageDelete event",),
}


def image_removals(plane, limit: int = 10) -> list[str]:
    """The last ``limit`` lines of each of the node's logs about deleting images
    (:data:`REMOVAL_LOG_MARKS`), prefixed with the log's name: why an image left the
    node."""
    out = []
    for name, marks in REMOVAL_LOG_MARKS.items():
        try:
            lines = (plane.dir / "logs" / name).read_text(errors="replace").splitlines()
        except OSError:
            continue
        out += [f"{name}: {ln}" for ln in lines if any(m in ln for m in marks)][-limit:]
    return out


def node_images(plane) -> set[str]:
    """The image references the node's containerd holds (CRI namespace ``k8s.io``)."""
    paths = cfg.Paths(plane.dir / "node")
    return set(_ctr(plane, paths, "images", "ls", "-q").stdout.decode().split())


def containers_of(plane, namespace: str) -> list[str]:
    """Ids of the containers (pause sandboxes included) the node's containerd still holds
    for pods of ``namespace`` (the CRI's ``io.kubernetes.pod.namespace`` label)."""
    paths = cfg.Paths(plane.dir / "node")
    flt = f'labels."io.kubernetes.pod.namespace"=={namespace}'
    return _ctr(plane, paths, "containers", "ls", "-q", flt).stdout.decode().split()


def running_tasks(plane, containers: list[str]) -> list[str]:
    """Those of ``containers`` whose task (process) containerd reports RUNNING."""
    paths = cfg.Paths(plane.dir / "node")
    rows = _ctr(plane, paths, "tasks", "ls").stdout.decode().splitlines()[1:]
    return [r.split()[0] for r in rows
            if r.split() and r.split()[0] in containers and r.split()[-1] == "RUNNING"]


def containerd_answers(plane, paths: cfg.Paths) -> bool:
    """The node's containerd answers ``ctr version``."""
    return _ctr(plane, paths, "version", check=False).returncode == 0


def import_pause(plane, paths: cfg.Paths) -> None:
    """Build the pause image from source (cached) and import it into the node's containerd."""
    _ctr_import(plane, paths, pause_image_tar(pause_binary(plane.bins["kubelet"])))
