"""Runtime image references used as component ``base_image``.

Image tags equal the package version (the convention of Google Cloud Pipeline
Components); the registry prefix is chosen at compile time with the environment
variable ``KFP_GPU_REGISTRY`` (or ``kfp-gpu compile --registry``), read when the
component modules are first imported.
"""

from __future__ import annotations

import os

from kfp_gpu import __version__

REGISTRY_ENV = "KFP_GPU_REGISTRY"
DEFAULT_REGISTRY = "ghcr.io/kfp-gpu"

#: Image names, one Dockerfile each under images/.
TRAINER = "trainer"
HOROVOD = "horovod"
LAUNCHER = "launcher"


def registry() -> str:
    """The registry prefix, e.g. ``ghcr.io/kfp-gpu`` (no trailing slash)."""
    return os.environ.get(REGISTRY_ENV, DEFAULT_REGISTRY).rstrip("/")


def image(name: str) -> str:
    """Full reference of runtime image ``name``: ``<registry>/kfp-gpu-<name>:<version>``.

    Raises:
        ValueError: if ``name`` is not one of ``trainer``, ``horovod``, ``launcher``.
    """
    if name not in (TRAINER, HOROVOD, LAUNCHER):
        raise ValueError(f"unknown image {name!r}; accepted: trainer, horovod, launcher")
    return f"{registry()}/kfp-gpu-{name}:{__version__}"
