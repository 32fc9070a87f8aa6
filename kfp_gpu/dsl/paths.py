"""Parameters that name a file or folder: their rule (:class:`PathRule`) and the checks
of the paths a run on this machine is given, before any task starts.

A ``gs://``/``s3://`` (or, for an importer, ``minio://``) value must have the form
``SCHEME://BUCKET/NAME`` wherever the run goes (``kfp-gpu run --local`` and ``kfp-gpu
submit``: :meth:`PathRule.check_uri`); for a run on this machine an input must also exist,
here or in its store (:func:`check_local_paths`, :func:`check_remote_inputs`). A submitted
run's tasks read the store with the cluster's credentials and endpoint, which this machine
may not have, so there the task finds a missing object (its record: exit 2) or an endpoint
that does not answer (exit 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PathRule:
    """What a text parameter naming a file or folder accepts.

    Attributes:
        keywords: for input data: the values that are not paths (e.g. ``keras:imdb``); any
            other value without ``://`` must exist on this machine for a local run
            (:func:`check_local_paths`), a ``gs://``/``s3://`` one in its store
            (:func:`check_remote_inputs`). None = not an input (a destination: work_dir).
        schemes: the store URI schemes it takes (keys of
            :data:`kfp_gpu.inputs.uris.FORMS`, e.g. ``("gs", "s3")``); empty: any ``://``.
        bucket_root: a folder that may be a bucket's root (``SCHEME://BUCKET`` alone).
    """

    keywords: tuple[str, ...] | None = None
    schemes: tuple[str, ...] = ()
    bucket_root: bool = False

    def check_uri(self, name: str, value: str) -> None:
        """Refuse a ``://`` value of parameter ``name`` that is not ``SCHEME://BUCKET/NAME``
        of one of :attr:`schemes` (:func:`kfp_gpu.inputs.uris.check_uri`).

        Raises:
            kfp_gpu.inputs.errors.MalformedUri: ``parameter NAME: 'URI' names no bucket:
                accepted is s3://BUCKET/KEY`` and the like.
        """
        if not self.schemes or "://" not in value:
            return
        from kfp_gpu.inputs import errors, uris

        try:
            uris.check_uri(value, self.schemes, self.bucket_root)
        except errors.MalformedUri as e:
            raise errors.MalformedUri(f"parameter {name}: {e}", value) from None

    def uri_words(self) -> list[str]:
        """The URIs accepted in words, e.g. ``["a gs:// / s3:// URI"]`` (none: ``[]``)."""
        return [f"a {' / '.join(f'{s}://' for s in self.schemes)} URI"] if self.schemes else []


def check_local_paths(declared: Mapping, values: Mapping[str, object]) -> None:
    """For a run on this machine: every input-path parameter (``PathRule.keywords``) names
    an existing file or folder, a URI (``scheme://``) or one of its keywords. ``declared``:
    name -> :class:`kfp_gpu.dsl.parameters.Param`; ``values``: the typed arguments.

    Raises:
        ValueError: naming the parameter, the path and what is accepted.
    """
    from pathlib import Path

    for key, value in values.items():
        p = declared.get(key)
        if p is None or p.path_keywords is None or not isinstance(value, str) or not value:
            continue
        if value in p.path.keywords or "://" in value or Path(value).expanduser().exists():
            continue
        words = ", ".join([*p.path.keywords, *p.path.uri_words(), "an existing path"])
        raise ValueError(f"parameter {key}={value!r}: no such file or folder on this machine "
                         f"({p.meaning}); accepted: {words}")


def check_remote_inputs(declared: Mapping, values: Mapping[str, object]) -> None:
    """For a run on this machine: every input-path parameter (``PathRule.keywords``) given
    as a ``gs://`` or ``s3://`` URI names something that exists in its store, asked with
    :func:`kfp_gpu.inputs.storage.probe` (one request, short timeouts, no retries; the
    tasks of a local run read the store with this process's environment). Other schemes
    (``minio://``, read by KFP's launcher on a cluster) are left to the task.

    Raises:
        FileNotFoundError: nothing at the URI (exit 2, as for a missing local path).
        kfp_gpu.inputs.uris.StoreUnreachable: the store's endpoint does not answer
            (exit 3). Both name the parameter.
    """
    from kfp_gpu.inputs import storage, uris

    for key, value in values.items():
        p = declared.get(key)
        if p is None or p.path_keywords is None or not isinstance(value, str) \
                or not storage.is_remote(value):
            continue
        try:
            storage.probe(value)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"parameter {key}: {e}") from e
        except uris.StoreUnreachable as e:
            raise uris.StoreUnreachable(f"parameter {key}: {e}") from e
