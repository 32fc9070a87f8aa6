"""Storage I/O: local paths and ``gs://`` URIs, with atomic writes.

``gs://`` goes through google-cloud-storage; its client honours
``STORAGE_EMULATOR_HOST`` (used by the tests with the ``gcp-storage-emulator`` server).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

GCS_SCHEME = "gs://"


def is_gcs(uri: str) -> bool:
    """True for ``gs://bucket/object`` URIs."""
    return uri.startswith(GCS_SCHEME)


def split_gcs(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "a/b")``.

    Raises:
        ValueError: if ``uri`` is not a ``gs://bucket/object`` URI.
    """
    if not is_gcs(uri):
        raise ValueError(f"not a gs:// URI: {uri!r}")
    bucket, _, name = uri[len(GCS_SCHEME):].partition("/")
    if not bucket or not name:
        raise ValueError(f"gs:// URI needs a bucket and an object name: {uri!r}")
    return bucket, name


def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project="test", credentials=AnonymousCredentials())
    return storage.Client()


@contextlib.contextmanager
def local_copy(uri: str) -> Iterator[Path]:
    """Yield a local path holding the content of ``uri`` (a local path or ``gs://``).

    A ``gs://`` object is downloaded to a temporary file that is removed afterwards;
    the file keeps the object's suffix (``.csv.gz``, ``.parquet``) so readers can sniff it.

    Raises:
        FileNotFoundError: if the local file or the GCS object does not exist.
    """
    if not is_gcs(uri):
        path = Path(uri).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"input not found: {uri}")
        yield path
        return
    from google.api_core import exceptions as gexc

    bucket, name = split_gcs(uri)
    suffix = "".join(Path(name).suffixes)
    with tempfile.TemporaryDirectory(prefix="kfp-gpu-") as tmp:
        dest = Path(tmp) / f"object{suffix}"
        try:
            _client().bucket(bucket).blob(name).download_to_filename(str(dest))
        except gexc.NotFound as e:
            raise FileNotFoundError(f"input not found: {uri}") from e
        yield dest


def upload(local: str | os.PathLike, uri: str) -> None:
    """Copy a local file, or a directory tree, to ``uri`` (a local path or ``gs://``).

    Local destinations are written atomically (temporary sibling, then rename).
    """
    local = Path(local)
    if not is_gcs(uri):
        if local.is_dir():
            with atomic_dir(uri) as tmp:
                shutil.copytree(local, tmp, dirs_exist_ok=True)
        else:
            with atomic_file(uri) as tmp:
                shutil.copyfile(local, tmp)
        return
    bucket_name, prefix = split_gcs(uri)
    bucket = _client().bucket(bucket_name)
    files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
    for f in files:
        name = prefix if local.is_file() else f"{prefix.rstrip('/')}/{f.relative_to(local).as_posix()}"
        bucket.blob(name).upload_from_filename(str(f))


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    Readers never see a half-written file; on error the temporary file is removed.
    ``suffix`` ends the temporary name (for writers that insist on an extension).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``path``; on success it replaces ``path``.

    An existing ``path`` (e.g. from an earlier attempt) is replaced as a whole.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / "d")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def download_dir(source: str, dest: str | os.PathLike) -> list[str]:
    """Copy a directory (e.g. the model rank 0 wrote) from ``source`` to ``dest``.

    Args:
        source: ``gs://bucket/prefix`` (google-cloud-storage; honours
            ``STORAGE_EMULATOR_HOST``) or a local/shared-PVC directory path.
        dest: local directory (e.g. a KFP ``Model`` artifact's ``.path``); written atomically.

    Returns:
        The relative file names copied (sorted).

    Raises:
        FileNotFoundError: nothing at ``source``.
    """
    if not is_gcs(source):
        src = Path(source)
        if not src.is_dir():
            raise FileNotFoundError(f"model directory not found: {source}")
        upload(src, str(dest))
        return sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    bucket_name, prefix = split_gcs(source.rstrip("/"))
    client = _client()
    blobs = [b for b in client.list_blobs(bucket_name, prefix=prefix.rstrip("/") + "/")
             if not b.name.endswith("/")]
    if not blobs:
        raise FileNotFoundError(f"model not found: {source}")
    names = []
    with atomic_dir(dest) as tmp:
        for b in blobs:
            rel = b.name[len(prefix.rstrip("/")) + 1:]
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            b.download_to_filename(str(target))
            names.append(rel)
    return sorted(names)
