"""The data folder: one resolver for every pipeline and command.

The folder is, in this order: the one given explicitly (``kfp-gpu run --data-dir DIR``),
else ``$KFP_GPU_DATA_DIR``, else ``../shared/data`` beside the source checkout this package
runs from (README "Quick start": the project's real data, ``imdb/imdb_50k.csv.gz``,
``fashion-mnist/``). A package installed from a wheel has no checkout around it and so no
default. ``kfp-gpu run --local``, the Horovod trainer's ``--data fashion-mnist`` and the
``prep_images`` component's ``fashion-mnist`` source all ask :func:`resolve` or :func:`find`.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "KFP_GPU_DATA_DIR"
#: The default, relative to the checkout's root (as the README writes it).
DEFAULT_RELATIVE = "../shared/data"


def checkout() -> Path | None:
    """The source checkout holding this package (``pyproject.toml`` beside ``kfp_gpu/``), or
    None when the package was installed from a wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def default() -> Path | None:
    """``<checkout>/../shared/data`` (whether it exists or not); None without a checkout."""
    root = checkout()
    return None if root is None else (root / DEFAULT_RELATIVE).resolve()


def chosen(explicit: str | os.PathLike | None = None) -> str:
    """How :func:`resolve` picks the folder for these inputs, in words (for messages)."""
    if explicit and str(explicit) != os.environ.get(ENV):
        return "--data-dir"
    if explicit or os.environ.get(ENV):  # typer's --data-dir reads $KFP_GPU_DATA_DIR too
        return f"${ENV}"
    return f"the default {DEFAULT_RELATIVE} beside the checkout"


def resolve(explicit: str | os.PathLike | None = None) -> Path | None:
    """The data folder (absolute): ``explicit``, else ``$KFP_GPU_DATA_DIR``, else
    :func:`default`; None only when none is given and there is no checkout. The folder is
    not checked for existence (:func:`find` does)."""
    given = explicit or os.environ.get(ENV)
    if given:
        return Path(given).expanduser().resolve()
    return default()


def find(relative: str, explicit: str | os.PathLike | None = None) -> Path:
    """``<data folder>/<relative>``, which must exist.

    Raises:
        FileNotFoundError: no data folder, or nothing at ``relative`` in it; the message
        names the path, how the folder was chosen (:func:`chosen`) and how to choose another.
    """
    root = resolve(explicit)
    if root is None:
        raise FileNotFoundError(
            f"no data folder for {relative!r}: pass --data-dir DIR or set ${ENV} (an installed "
            f"package has no {DEFAULT_RELATIVE} default)")
    path = root / relative
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found (data dir {root}); the data dir comes from {chosen(explicit)}: "
            f"pass --data-dir DIR or set ${ENV} to a folder holding {relative}")
    return path
