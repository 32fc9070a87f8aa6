"""Store URIs: their form (``SCHEME://BUCKET/NAME``) and the endpoint serving them.

Pure but for reading the environment: nothing is asked of a store here
(:mod:`kfp_gpu.inputs.storage` reads and writes, and probes an input). The endpoints are
the ones the clients use: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``, for
``s3://`` (botocore ``configprovider.py``), ``STORAGE_EMULATOR_HOST`` for ``gs://``
(google-cloud-storage ``_helpers.py`` ``_get_storage_emulator_override``), else the providers' own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from kfp_gpu.inputs import errors

#: The form of a URI of each store scheme, for messages. ``minio://`` is KFP's own artifact
#: store (read by KFP's launcher for an importer, never by this module).
FORMS = {"gs": "gs://BUCKET/OBJECT", "s3": "s3://BUCKET/KEY", "minio": "minio://BUCKET/KEY"}


class StoreUnreachable(ConnectionError):
    """The store's endpoint does not answer (a ``ConnectionError``: exit 3); the message
    names the URI, the endpoint and where its address came from."""


def check_uri(uri: str, schemes: Sequence[str] = ("gs", "s3"),
              bucket_root: bool = False) -> tuple[str, str, str]:
    """``(scheme, bucket, name)`` of a store URI ``SCHEME://BUCKET/NAME`` whose scheme is
    one of ``schemes`` (keys of :data:`FORMS`), e.g. ``s3://b/a/c.csv`` -> ``("s3", "b",
    "a/c.csv")``; pure, nothing is asked of the store. ``bucket_root``: the URI names a
    folder, which may be a bucket's root (``s3://b``, name ``""``).

    Raises:
        kfp_gpu.inputs.errors.MalformedUri: no ``://``, another scheme, no bucket
            (``s3://``, ``gs:///x``) or, unless ``bucket_root``, no object name
            (``s3://b``, ``s3://b/``); one line naming the accepted form.
    """
    accepted = " or ".join(FORMS[s] for s in schemes)
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in schemes:
        raise errors.MalformedUri(f"{uri!r} is not a URI this reads: accepted is {accepted}",
                                  uri)
    bucket, _, name = rest.partition("/")
    if not bucket.strip():
        raise errors.MalformedUri(f"{uri!r} names no bucket: accepted is {FORMS[scheme]}",
                                  uri)
    if not bucket_root and not name.strip("/").strip():
        raise errors.MalformedUri(f"{uri!r} names no object in bucket {bucket!r}: accepted "
                                  f"is {FORMS[scheme]}", uri)
    return scheme, bucket, name


def endpoint(uri: str) -> str:
    """The endpoint a ``gs://``/``s3://`` URI is read from, with where its address comes
    from, for messages: ``http://minio:9000 (AWS_ENDPOINT_URL)``, ``AWS S3 (no
    AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL set)``, ``http://127.0.0.1:9023
    (STORAGE_EMULATOR_HOST)``, ``Google Cloud Storage``."""
    if uri.startswith("s3://"):
        for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):  # botocore's order
            if os.environ.get(var):
                return f"{os.environ[var]} ({var})"
        return "AWS S3 (no AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL set)"
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return f"{os.environ['STORAGE_EMULATOR_HOST']} (STORAGE_EMULATOR_HOST)"
    return "Google Cloud Storage"
