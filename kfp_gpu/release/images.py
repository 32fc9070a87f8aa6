"""Runtime image references: pure values, no environment reads.

An :class:`ImageSet` is the registry prefix and the tag of this project's three runtime
images (one Dockerfile each under images/); ``ImageSet().image("trainer")`` is
``ghcr.io/kfp-gpu/kfp-gpu-trainer:<version>``. Tags equal the package version (the
convention of Google Cloud Pipeline Components).

How the registry chosen at compile time reaches every image the pipeline starts
(images/README.md: a compile-time value, never read at run time): the components
are decorated with the DEFAULT set (``base_image=images.image(images.TRAINER)``;
``train_resnet_horovod``'s ``image`` and
``runtime_image`` inputs default to the Horovod image), and ``kfp-gpu compile --registry R``
(:func:`kfp_gpu.compiler.compile.compile_all` ``registry=``) applies ``ImageSet(R)`` to the
compiled documents with :func:`apply` -- executors' ``container.image`` and the inputs'
compiled defaults alike, every string that is a default-set reference. The component pod
reads its images from its inputs, never from the environment; ``compile -o DIR`` also
writes DIR/manifests/trainer, the Trainer runtime on the same set (:func:`rename_text`).

Pinned sets: ``ImageSet(R).pinned({"trainer": "sha256:..."})`` names
``R/kfp-gpu-trainer@sha256:...`` -- the bytes a team reviewed, not a mutable tag. The digests
come from the registry (:mod:`kfp_gpu.release.digests`, the only I/O); everything here stays
pure, and :func:`apply` / :func:`rename_text` carry a tag set to its pinned set the same way
they carry the default set to another registry (``source=`` the tag set).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kfp_gpu import __version__

DEFAULT_REGISTRY = "ghcr.io/kfp-gpu"

#: Image names, one Dockerfile each under images/.
TRAINER = "trainer"
HOROVOD = "horovod"
LAUNCHER = "launcher"
NAMES = (TRAINER, HOROVOD, LAUNCHER)
#: Repository name of image ``name`` under the registry: ``kfp-gpu-<name>``.
REPOSITORY_PREFIX = "kfp-gpu-"

# The reference grammar of distribution/reference v0.6.0 (regexp.go, the one docker, containerd
# and Kubernetes' image names follow): alphanumeric (l. 44), separator (l. 53),
# domainNameComponent (l. 61), optionalPort (l. 65), tag (l. 68), ipv6address (l. 91),
# domainName (l. 99), host (l. 106), domainAndPort (l. 110), pathComponent (l. 123),
# remoteName (l. 129), namePat (l. 130); reference.go NameTotalLengthMax = 255 (l. 44).
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_NAME = re.compile(rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*",
                   re.ASCII)
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
NAME_TOTAL_LENGTH_MAX = 255
# The digest this project pins: sha256 in its canonical form, the algorithm every registry
# computes Docker-Content-Digest with (opencontainers/image-spec v1.1.0 descriptor.md,
# "Digests": algorithm ":" encoded; sha256 encoded = /[a-f0-9]{64}/).
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}", re.ASCII)


@dataclass(frozen=True)
class ImageSet:
    """Registry prefix and tag of the runtime images.

    Attributes:
        registry: prefix without a trailing slash, e.g. ``ghcr.io/kfp-gpu``,
            ``registry.example.com:5000/ml``, ``docker.io/acme``.
        tag: image tag, default the package version.
        digests: ``(name, digest)`` pairs of pinned images (:meth:`pinned`); a pinned image's
            reference is ``<registry>/kfp-gpu-<name>@<digest>`` (no tag: a reference with
            both is pulled by its digest, the tag only misleads a reader).

    Raises:
        ValueError: ``registry`` is empty, has a trailing slash, or with
            ``/kfp-gpu-<name>`` is not a reference name (distribution/reference grammar:
            ``[host[:port]/]path[/path...]``, path components lowercase ``[a-z0-9]``
            joined by ``.``, ``_``, ``__`` or ``-``; ASCII, no spaces, at most 255
            characters); ``tag`` is not ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``; a digest
            is not ``sha256:`` + 64 lowercase hex digits or names an unknown image.
    """

    registry: str = DEFAULT_REGISTRY
    tag: str = __version__
    digests: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        reg = self.registry
        if not isinstance(reg, str) or not reg:
            raise ValueError(f"invalid registry {reg!r}: accepted is a registry prefix such as "
                             f"{DEFAULT_REGISTRY!r} or 'registry.example.com:5000/ml'")
        if reg.endswith("/"):
            raise ValueError(f"invalid registry {reg!r}: no trailing slash (accepted: "
                             f"{reg.rstrip('/')!r})")
        longest = f"{reg}/{REPOSITORY_PREFIX}{LAUNCHER}"
        if not _NAME.fullmatch(longest) or len(longest) > NAME_TOTAL_LENGTH_MAX:
            raise ValueError(
                f"invalid registry {reg!r}: accepted is an image name prefix "
                "[host[:port]/]path[/path...] (ASCII, no spaces; path components lowercase "
                "letters and digits joined by '.', '_', '__' or '-'; the whole image name at "
                f"most {NAME_TOTAL_LENGTH_MAX} characters), e.g. {DEFAULT_REGISTRY!r} or "
                "'registry.example.com:5000/ml'")
        if not isinstance(self.tag, str) or not _TAG.fullmatch(self.tag):
            raise ValueError(f"invalid image tag {self.tag!r}: accepted is 1-128 ASCII "
                             "letters, digits, '_', '.' or '-', not starting with '.' or '-' "
                             f"(e.g. {__version__!r})")
        for name, digest in self.digests:
            if name not in NAMES:
                raise ValueError(f"unknown image {name!r} in digests; accepted: "
                                 f"{', '.join(NAMES)}")
            if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
                raise ValueError(f"invalid digest {digest!r} for image {name!r}: accepted is "
                                 "'sha256:' and 64 lowercase hex digits")

    def image(self, name: str) -> str:
        """Full reference of runtime image ``name``: ``<registry>/kfp-gpu-<name>:<tag>``, or
        ``<registry>/kfp-gpu-<name>@sha256:...`` when the set pins it (:meth:`pinned`).

        Raises:
            ValueError: ``name`` is not one of ``trainer``, ``horovod``, ``launcher``.
        """
        digest = dict(self.digests).get(name)
        if digest:
            return f"{self.repository(name)}@{digest}"
        return f"{self.repository(name)}:{self.tag}"

    def repository(self, name: str) -> str:
        """``<registry>/kfp-gpu-<name>``: the reference without tag or digest.

        Raises:
            ValueError: ``name`` is not one of ``trainer``, ``horovod``, ``launcher``.
        """
        if name not in NAMES:
            raise ValueError(f"unknown image {name!r}; accepted: {', '.join(NAMES)}")
        return f"{self.registry}/{REPOSITORY_PREFIX}{name}"

    def tagged(self) -> ImageSet:
        """This set without its digests (the references ``docker push`` wrote)."""
        return ImageSet(self.registry, self.tag)

    def pinned(self, digests: Mapping[str, str]) -> ImageSet:
        """This set with ``digests`` (image name -> ``sha256:...``) pinned, on top of the
        ones it already pins.

        Raises:
            ValueError: an unknown name or a malformed digest (see the class).
        """
        merged = {**dict(self.digests), **dict(digests)}
        return ImageSet(self.registry, self.tag, tuple(sorted(merged.items())))

    def renames(self, source: ImageSet | None = None) -> dict[str, str]:
        """Reference in ``source`` (default: the default set) -> the same image in this set,
        for each of the three images."""
        source = source or ImageSet()
        return {source.image(n): self.image(n) for n in NAMES}


def image(name: str, registry: str = DEFAULT_REGISTRY, tag: str = __version__) -> str:
    """``ImageSet(registry, tag).image(name)``; with the defaults, the reference the
    checked-in YAML names (what components are decorated with).

    Raises:
        ValueError: from :class:`ImageSet` (bad registry or tag) or an unknown ``name``.
    """
    return ImageSet(registry, tag).image(name)


def referenced(texts: Iterable[str], images: ImageSet) -> tuple[str, ...]:
    """Names of the images of ``images`` that some of ``texts`` contains (in :data:`NAMES`
    order): which images a compiled pipeline can start, so only those are resolved."""
    texts = list(texts)
    return tuple(n for n in NAMES if any(images.image(n) in t for t in texts))


def apply(doc: Any, images: ImageSet, source: ImageSet | None = None) -> Any:
    """A copy of the parsed YAML/JSON ``doc`` (dicts, lists, scalars) in which every string
    that is a reference of ``source`` (default: the default set) is the same image in
    ``images``. Pure: ``doc`` is not changed. Applied to compiled PipelineSpecs this
    rewrites ``deploymentSpec.executors.*.container.image`` and the compiled
    ``defaultValue`` of the inputs that default to an image (``train_resnet_horovod``'s
    ``image``/``runtime_image``); strings that merely contain a reference (source code,
    descriptions) are left as they are."""
    table = images.renames(source)

    def walk(x: Any) -> Any:
        if isinstance(x, str):
            return table.get(x, x)
        if isinstance(x, Mapping):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(doc)


def rename_text(text: str, images: ImageSet, source: ImageSet | None = None) -> str:
    """``text`` with every whole reference of ``source`` (default: the default set) renamed
    to ``images``' (a reference followed by more name characters, e.g. ``...:0.1.0rc1``, is
    not one). For comments and for YAML files kept with their comments
    (manifests/trainer); callers check the parsed result against :func:`apply`."""
    for old, new in images.renames(source).items():
        text = re.sub(rf"(?<![\w./:@-]){re.escape(old)}(?![\w.@-])", new, text)
    return text
