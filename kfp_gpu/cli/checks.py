"""Option callbacks shared by the commands: each refuses a bad value before the command runs
(exit 2, one line naming the option and what it accepts) and returns the parsed value,
which replaces the option's text (typer 0.29 ``typer/core.py``
``_TyperParameter.process_value``: the callback's return value is the parameter's
value), so the library gets parsed objects and parses no text again: ``--gpu`` a
:class:`kfp_gpu.gpu.GpuRequest`, ``compile --secret-env/--pvc/--secret-volume/
--resources`` the objects of :mod:`kfp_gpu.dsl.task_settings`, ``mpijob run-local
--pvc`` ``(claim, folder)`` pairs.

The rules live in the library (:mod:`kfp_gpu.dsl.k8s_rules`,
:mod:`kfp_gpu.dsl.task_settings`, :class:`kfp_gpu.release.images.ImageSet`,
:func:`kfp_gpu.cli.run_local.pvc_item`); these only turn their ``ValueError`` into
``typer.BadParameter`` so click names the option.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

import typer


def _rule(check, *, empty_passes: bool = False, doc: str = ""):
    """An option callback that runs the library rule ``check(value)`` (None passes; ''
    too when ``empty_passes``) and turns its ValueError into ``typer.BadParameter``; what
    the rule returns (the parsed or normalized value) is the option's value, the text when
    it returns None."""
    def callback(ctx: typer.Context, param, value: str | None):
        if value is None or (empty_passes and not value) or ctx.resilient_parsing:
            return value
        try:
            out = check(value)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        return value if out is None else out
    callback.__doc__ = doc
    return callback


def _k8s(name: str):
    def check(value: str):
        from kfp_gpu.dsl import k8s_rules

        return getattr(k8s_rules, name)(value)
    return check


def _image_set(value: str) -> None:
    from kfp_gpu.release import images

    images.ImageSet(value)


gpu = _rule(_k8s("gpu_request"),
            doc="``--gpu``: None = the pipeline's own; else the :class:`kfp_gpu.gpu.GpuRequest` "
            "of a request Kubernetes would accept.")
registry = _rule(_image_set, doc="``--registry``: None = the default; else an image name "
                 "prefix (not empty).")
namespace = _rule(_k8s("dns1123_label"), doc="A namespace option: a DNS-1123 label.")
service_account = _rule(_k8s("dns1123_subdomain"), empty_passes=True,
                        doc="A ServiceAccount option: '' passes (where the command gives it "
                        "a meaning); else a DNS-1123 subdomain.")
image = _rule(_k8s("image_reference"), doc="An image reference option (None passes).")


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


def pvc(ctx: typer.Context, param, value: list[str] | None) -> list[tuple[str, str]] | None:
    """``mpijob run-local --pvc CLAIM=DIR`` items -> ``[(claim, folder), ...]``: CLAIM a
    PersistentVolumeClaim name (DNS-1123 subdomain), DIR an existing folder
    (:func:`kfp_gpu.cli.run_local.pvc_item`). A list, not a dict: typer hands a
    repeatable option's value to the command as ``list(value)`` (typer 0.29
    ``typer/main.py`` ``_normalize_collection_value``), a dict's keys only."""
    if value is None or ctx.resilient_parsing:
        return value
    from kfp_gpu.cli import run_local

    try:
        return [run_local.pvc_item(item) for item in value]
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


def _each(parse_name: str, doc: str):
    """A callback for a repeatable option: every item through
    ``kfp_gpu.dsl.task_settings.<parse_name>`` (its ValueError -> ``typer.BadParameter``);
    the option's value is the list of what it returns, one entry per item."""
    def callback(ctx: typer.Context, param, value: list[str] | None) -> list | None:
        if not value or ctx.resilient_parsing:
            return value
        from kfp_gpu.dsl import task_settings

        parse = getattr(task_settings, parse_name)
        try:
            return [parse(item) for item in value]
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    callback.__doc__ = doc
    return callback


secret_env = _each("parse_secret_env", "``compile --secret-env``: SECRET or "
                   "SECRET:KEY=ENV[,KEY=ENV] -> tuples of SecretEnv.")
task_pvc = _each("parse_pvc", "``compile --pvc``: CLAIM:/mount/path -> PvcMount.")
secret_volume = _each("parse_secret_volume", "``compile --secret-volume``: SECRET:/dir[:KEY] "
                      "-> SecretVolume.")
task_resources = _each("parse_resources", "``compile --resources``: TASK=KEY:Q[,KEY:Q] -> "
                       "(task, Resources).")
