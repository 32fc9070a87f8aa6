"""Option callbacks shared by the commands: each refuses a bad value before the command runs
(exit 2, one line naming the option and what it accepts; issue 22 items 7 and 9).

The rules live in the library (:mod:`kfp_gpu.build.k8s_rules`,
:class:`kfp_gpu.build.images.ImageSet`); these only turn their ``ValueError`` into
``typer.BadParameter`` so click names the option.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

import typer


def gpu(ctx: typer.Context, param, value: str | None) -> str | None:
    """``--gpu``: None = the pipeline's own; else a request Kubernetes would accept."""
    if value is None or ctx.resilient_parsing:
        return value
    from kfp_gpu.build import k8s_rules

    try:
        k8s_rules.gpu_request(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def registry(ctx: typer.Context, param, value: str | None) -> str | None:
    """``--registry``: None = the default; else an image name prefix (not empty)."""
    if value is None or ctx.resilient_parsing:
        return value
    from kfp_gpu.build import images

    try:
        images.ImageSet(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def namespace(ctx: typer.Context, param, value: str | None) -> str | None:
    """A namespace option: None = the default; else a DNS-1123 label."""
    if value is None or ctx.resilient_parsing:
        return value
    from kfp_gpu.build import k8s_rules

    try:
        return k8s_rules.dns1123_label(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def service_account(ctx: typer.Context, param, value: str | None) -> str | None:
    """A ServiceAccount option: None / '' (where the command gives '' a meaning) pass; else a
    DNS-1123 subdomain."""
    if not value or ctx.resilient_parsing:
        return value
    from kfp_gpu.build import k8s_rules

    try:
        return k8s_rules.dns1123_subdomain(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def url(ctx: typer.Context, param, value: str | None) -> str | None:
    """An API URL: ``http(s)://host[:port][/path]`` (None passes)."""
    if value is None or ctx.resilient_parsing:
        return value
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise typer.BadParameter(f"{value!r} is not a URL ({e}); accepted: "
                                 "http(s)://HOST[:PORT][/PATH]") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(
            c.isspace() for c in value):
        raise typer.BadParameter(f"{value!r} is not a URL; accepted: http(s)://HOST[:PORT]"
                                 "[/PATH], e.g. https://kubeflow.example.com/pipeline")
    return value


def positive_seconds(ctx: typer.Context, param, value: float | None) -> float | None:
    """A duration in seconds: finite and > 0 (None passes)."""
    if value is None or ctx.resilient_parsing:
        return value
    if not math.isfinite(value) or value <= 0:
        raise typer.BadParameter(f"{value!r} seconds: accepted is a number > 0")
    return value


def readable_file(ctx: typer.Context, param, value: str | None) -> str | None:
    """A file the command will read (a CA bundle, a kubeconfig): it must exist and be a
    file (None passes)."""
    if value is None or ctx.resilient_parsing:
        return value
    from pathlib import Path

    path = Path(value).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise typer.BadParameter(f"{value}: {what}; give an existing file")
    return value


def kubeconfig(ctx: typer.Context, param, value: str | None) -> str | None:
    """``--kubeconfig`` / ``$KUBECONFIG``: one file must exist and be a YAML mapping (a
    ``:``-separated list, which the client merges, passes as it is; None passes)."""
    import os

    if not value or ctx.resilient_parsing or os.pathsep in value:
        return value
    readable_file(ctx, param, value)
    import yaml

    from kfp_gpu.cli.errors import classify

    try:
        with open(os.path.expanduser(value), encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise typer.BadParameter(f"{value} is not a kubeconfig: {classify(e)[1]}") from None
    if not isinstance(doc, dict):
        raise typer.BadParameter(f"{value} is not a kubeconfig: not a YAML mapping with "
                                 "clusters, users and contexts")
    return value


def image(ctx: typer.Context, param, value: str | None) -> str | None:
    """An image reference option (None passes)."""
    if value is None or ctx.resilient_parsing:
        return value
    from kfp_gpu.build import k8s_rules

    try:
        return k8s_rules.image_reference(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def pvc(ctx: typer.Context, param, value: list[str] | None) -> list[str] | None:
    """``--pvc CLAIM=DIR`` items: CLAIM a PersistentVolumeClaim name (DNS-1123 subdomain),
    DIR an existing folder."""
    if not value or ctx.resilient_parsing:
        return value
    from pathlib import Path

    from kfp_gpu.build import k8s_rules

    for item in value:
        claim, sep, folder = item.partition("=")
        if not sep or not claim or not folder:
            raise typer.BadParameter(f"{item!r}: accepted is CLAIM=DIR, e.g. "
                                     "--pvc resnet-shared=/tmp/shared")
        try:
            k8s_rules.dns1123_subdomain(claim, f"claim of {item!r}")
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        if not Path(folder).expanduser().is_dir():
            raise typer.BadParameter(f"{item!r}: {folder} is not an existing folder")
    return value
