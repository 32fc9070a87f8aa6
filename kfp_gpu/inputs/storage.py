"""Storage I/O: local paths, ``gs://`` and ``s3://`` URIs, with atomic writes.

``gs://`` goes through google-cloud-storage; its client honours
``STORAGE_EMULATOR_HOST`` (used by the tests with the ``gcp-storage-emulator`` server).

``s3://`` (AWS S3 and S3-compatible stores: MinIO, SeaweedFS, the artifact store of an
on-prem KFP) goes through fsspec's ``s3fs`` (aiobotocore over botocore), configured only
by the standard AWS environment variables, as botocore reads them:

- ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``: the endpoint, e.g.
  ``http://minio-service.kubeflow:9000`` (botocore ``configprovider.py``
  ``EndpointConfigProvider``: the service-specific variable first, then the global one;
  ``args.py`` ``_compute_configured_endpoint_url`` uses it when the client is given no
  ``endpoint_url``, which s3fs passes only when set, ``s3fs/core.py`` ``set_session``).
- ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN``):
  botocore ``credentials.py`` ``EnvProvider``.
- ``AWS_DEFAULT_REGION``: botocore ``configprovider.py`` (``region``). botocore itself
  reads ``AWS_REGION`` only on AWS compute (``resolve_auto_mode``), so :func:`s3_region`
  passes ``AWS_REGION`` as the region when ``AWS_DEFAULT_REGION`` is unset.

``kfp-gpu compile --secret-env SECRET`` puts these variables on every task from a
Kubernetes Secret (:mod:`kfp_gpu.dsl.task_settings`).

Errors, classed by type (:mod:`kfp_gpu.inputs.errors`; exit 2 for the input, 3 for the
environment, in ``kfp-gpu`` and in a task's record alike): a URI without a bucket or an
object name raises :class:`~kfp_gpu.inputs.errors.MalformedUri`
(:func:`kfp_gpu.inputs.uris.check_uri`); a missing object, key or bucket
``FileNotFoundError`` (s3fs translates S3's ``NoSuchKey`` / ``NoSuchBucket``, s3fs
``errors.py``; google-cloud-storage's ``NotFound`` is turned into it here), as a missing
local file does; an endpoint that does not answer leaves botocore's
``EndpointConnectionError`` (aiobotocore ``httpsession.py``) or google-cloud-storage's
``RetryError`` over a requests ``ConnectionError``, which
:func:`kfp_gpu.inputs.errors.is_connection_failure` recognises. :func:`probe` is the cheap
check ``kfp-gpu run --local`` makes before any task starts: one request, short timeouts,
no retries, and :class:`~kfp_gpu.inputs.uris.StoreUnreachable` naming the endpoint.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kfp_gpu.inputs import errors
from kfp_gpu.inputs.uris import StoreUnreachable, check_uri, endpoint

GCS_SCHEME = "gs://"
S3_SCHEME = "s3://"
#: The object-store schemes this module reads and writes besides local paths.
REMOTE_SCHEMES = (GCS_SCHEME, S3_SCHEME)
#: Seconds :func:`probe` waits for a connection and for an answer.
PROBE_TIMEOUT_S = 10.0


def is_gcs(uri: str) -> bool:
    """True for ``gs://bucket/object`` URIs."""
    return uri.startswith(GCS_SCHEME)


def is_s3(uri: str) -> bool:
    """True for ``s3://bucket/key`` URIs."""
    return uri.startswith(S3_SCHEME)


def is_remote(uri: str) -> bool:
    """True for a URI of an object store this module handles (``gs://`` or ``s3://``),
    False for a local (or mounted PVC) path."""
    return uri.startswith(REMOTE_SCHEMES)


def _split(uri: str, scheme: str) -> tuple[str, str]:
    _, bucket, name = check_uri(uri, (scheme.removesuffix("://"),))
    return bucket, name


def split_gcs(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "a/b")``.

    Raises:
        kfp_gpu.inputs.errors.MalformedUri: ``uri`` is not a ``gs://bucket/object`` URI.
    """
    return _split(uri, GCS_SCHEME)


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``.

    Raises:
        kfp_gpu.inputs.errors.MalformedUri: ``uri`` is not an ``s3://bucket/key`` URI.
    """
    return _split(uri, S3_SCHEME)


def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project="test", credentials=AnonymousCredentials())
    return storage.Client()


def s3_region(environ=None) -> str | None:
    """The region to give the S3 client: None when ``AWS_DEFAULT_REGION`` is set (botocore
    reads it itself) or neither is set; else ``AWS_REGION`` (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get("AWS_DEFAULT_REGION"):
        return None
    return env.get("AWS_REGION") or None


def _s3(timeout: float | None = None):
    """A fresh ``s3fs.S3FileSystem`` (no fsspec instance cache: the environment, e.g. the
    endpoint, is read again on each call). ``timeout``: seconds to connect and to wait for
    an answer, with one attempt only (botocore ``Config`` ``connect_timeout``,
    ``read_timeout``, ``retries.max_attempts``; s3fs's own ``retries``); None: the
    libraries' defaults (botocore's retries, then s3fs's five)."""
    import s3fs

    region = s3_region()
    if timeout is None:
        return s3fs.S3FileSystem(skip_instance_cache=True,
                                 client_kwargs={"region_name": region} if region else {})
    fs = s3fs.S3FileSystem(skip_instance_cache=True,
                           client_kwargs={"region_name": region} if region else {},
                           config_kwargs={"connect_timeout": timeout, "read_timeout": timeout,
                                          "retries": {"max_attempts": 1}})
    fs.retries = 1
    return fs


def _s3_path(uri: str) -> str:
    bucket, key = split_s3(uri)
    return f"{bucket}/{key}"


def exists(uri: str, timeout: float | None = None) -> bool:
    """True when ``uri`` names an existing file or folder: a local path, a ``gs://``
    object or prefix with objects under it, an ``s3://`` key or prefix with keys under it.
    ``timeout``: seconds per request, no retries (default: the clients' own timeouts and
    retries).

    Raises:
        kfp_gpu.inputs.errors.MalformedUri: a ``gs://``/``s3://`` URI without a bucket and
            an object name.
        botocore.exceptions.EndpointConnectionError: the S3 endpoint is unreachable.
        google.api_core.exceptions.RetryError, requests.exceptions.ConnectionError: the GCS
            endpoint is (the second with ``timeout``: no retries).
    """
    if is_s3(uri):
        path = _s3_path(uri.rstrip("/"))
        try:  # info(), not exists(): exists() answers False for an unreachable endpoint
            _s3(timeout).info(path)
        except FileNotFoundError:
            return False
        return True
    if is_gcs(uri):
        from google.api_core import exceptions as gexc

        bucket, name = split_gcs(uri.rstrip("/"))
        client = _client()
        ask = {} if timeout is None else {"timeout": timeout, "retry": None}
        try:
            if client.bucket(bucket).blob(name).exists(**ask):
                return True
            return any(True for _ in client.list_blobs(bucket, prefix=name + "/",
                                                       max_results=1, **ask))
        except gexc.NotFound:  # no such bucket (a missing object answers False)
            return False
    return Path(uri).expanduser().exists()


def probe(uri: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Check that a ``gs://``/``s3://`` input exists, cheaply: one or two requests of at most
    ``timeout`` seconds each, no retries (what ``kfp-gpu run --local`` asks before any task
    starts; a task reads with the clients' retries).

    Raises:
        kfp_gpu.inputs.errors.MalformedUri: see :func:`kfp_gpu.inputs.uris.check_uri`.
        FileNotFoundError: no object, key, prefix or bucket there (``input not found:
            URI``), as for a missing local file.
        StoreUnreachable: the endpoint does not answer (a connection failure by
            :func:`kfp_gpu.inputs.errors.is_connection_failure`), naming it
            (:class:`kfp_gpu.inputs.uris.StoreUnreachable`).
    """
    check_uri(uri)
    try:
        found = exists(uri, timeout=timeout)
    except Exception as e:
        if not errors.is_connection_failure(e):
            raise
        reason = " ".join(str(e).split()) or type(e).__name__
        raise StoreUnreachable(f"{uri}: the store at {endpoint(uri)} does not answer "
                               f"({reason})") from e
    if not found:
        raise FileNotFoundError(f"input not found: {uri}: no object or folder of that name "
                                f"at {endpoint(uri)}")


@contextlib.contextmanager
def local_copy(uri: str) -> Iterator[Path]:
    """Yield a local path holding the content of ``uri`` (a local path, ``gs://`` or
    ``s3://``).

    A ``gs://``/``s3://`` object is downloaded to a temporary file that is removed
    afterwards; the file keeps the object's suffix (``.csv.gz``, ``.parquet``) so readers
    can sniff it.

    Raises:
        FileNotFoundError: if the local file or the object does not exist.
    """
    if not is_remote(uri):
        path = Path(uri).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"input not found: {uri}")
        yield path
        return
    bucket, name = split_s3(uri) if is_s3(uri) else split_gcs(uri)
    suffix = "".join(Path(name).suffixes)
    with tempfile.TemporaryDirectory(prefix="kfp-gpu-") as tmp:
        dest = Path(tmp) / f"object{suffix}"
        if is_s3(uri):
            fs = _s3()
            # s3fs raises FileNotFoundError for a missing key, but get_file of a "folder"
            # (a prefix) quietly makes a local directory: refuse anything but an object.
            # info(), not isfile(): isfile() answers False for an unreachable endpoint too.
            try:
                if fs.info(_s3_path(uri)).get("type") != "file":
                    raise FileNotFoundError(_s3_path(uri))
                fs.get_file(_s3_path(uri), str(dest))
            except FileNotFoundError as e:
                raise FileNotFoundError(f"input not found: {uri}") from e
        else:
            from google.api_core import exceptions as gexc

            try:
                _client().bucket(bucket).blob(name).download_to_filename(str(dest))
            except gexc.NotFound as e:
                raise FileNotFoundError(f"input not found: {uri}") from e
        yield dest


def _files(local: Path) -> list[Path]:
    return [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())


def upload(local: str | os.PathLike, uri: str) -> None:
    """Copy a local file, or a directory tree, to ``uri`` (a local path, ``gs://`` or
    ``s3://``). A directory becomes objects ``<uri>/<relative path>``.

    Local destinations are written atomically (temporary sibling, then rename).

    Raises:
        FileNotFoundError: ``local`` does not exist.
    """
    local = Path(local)
    if not local.exists():
        raise FileNotFoundError(f"nothing to upload: {local} does not exist")
    if not is_remote(uri):
        if local.is_dir():
            with atomic_dir(uri) as tmp:
                shutil.copytree(local, tmp, dirs_exist_ok=True)
        else:
            with atomic_file(uri) as tmp:
                shutil.copyfile(local, tmp)
        return
    if is_s3(uri):
        split_s3(uri)  # a bucket and a key, as for gs://
        fs, prefix = _s3(), _s3_path(uri)
        for f in _files(local):
            name = prefix if local.is_file() else f"{prefix.rstrip('/')}/{f.relative_to(local).as_posix()}"
            fs.put_file(str(f), name)
        return
    bucket_name, prefix = split_gcs(uri)
    bucket = _client().bucket(bucket_name)
    for f in _files(local):
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
            ``STORAGE_EMULATOR_HOST``), ``s3://bucket/prefix`` (s3fs; the AWS variables of
            the module docstring) or a local/shared-PVC directory path.
        dest: local directory (e.g. a KFP ``Model`` artifact's ``.path``); written atomically.

    Returns:
        The relative file names copied (sorted).

    Raises:
        FileNotFoundError: nothing at ``source``.
    """
    if not is_remote(source):
        src = Path(source)
        if not src.is_dir():
            raise FileNotFoundError(f"model directory not found: {source}")
        upload(src, str(dest))
        return sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    if is_s3(source):
        return _download_s3_dir(source, dest)
    from google.api_core import exceptions as gexc

    bucket_name, prefix = split_gcs(source.rstrip("/"))
    client = _client()
    try:
        blobs = [b for b in client.list_blobs(bucket_name, prefix=prefix.rstrip("/") + "/")
                 if not b.name.endswith("/")]
    except gexc.NotFound as e:  # no such bucket
        raise FileNotFoundError(f"model not found: {source}") from e
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


def _download_s3_dir(source: str, dest: str | os.PathLike) -> list[str]:
    """:func:`download_dir` for ``s3://`` (every key under ``<source>/``)."""
    fs = _s3()
    prefix = _s3_path(source.rstrip("/")).rstrip("/") + "/"
    keys = [k for k in fs.find(prefix) if not k.endswith("/")]
    if not keys:
        raise FileNotFoundError(f"model not found: {source}")
    names = []
    with atomic_dir(dest) as tmp:
        for key in keys:
            rel = key[len(prefix):]
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(key, str(target))
            names.append(rel)
    return sorted(names)
