"""What the catalog's pipeline entries declare, read for the commands and the docs:
parameter tables (``kfp-gpu params``, docs/parameters.md), a call's missing parameters,
the checks of local input files and of arguments against the compiled spec, and each
task's default CPU/memory (``kfp-gpu compile --resources``, docs/cluster.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kfp_gpu.catalog import discover
from kfp_gpu.dsl.parameters import (
    BOOLEAN,
    DOUBLE,
    STRING,
    TYPE_WORDS,
    Param,
    number_text,
    signature,
)
from kfp_gpu.dsl.task_settings import Resources


def check_local_files(pipeline_name: str, values: Mapping[str, object]) -> None:
    """For a run on this machine: the cheap checks of input files that the pipeline
    entry declares in ``local_checks`` (parameter -> check), e.g. a CSV's header and gzip
    integrity, run on each local path given (``gs://`` URIs and keywords are left to the
    task).

    Raises:
        kfp_gpu.inputs.errors.InputError: a member of the family, naming the file.
        ValueError: what a check raises otherwise (e.g. an unknown file suffix).
    """
    from pathlib import Path

    checks = discover.entry(pipeline_name).local_checks
    for key, check in checks.items():
        value = values.get(key)
        if isinstance(value, str) and "://" not in value and value.strip() \
                and Path(value).expanduser().exists():
            check(value)


def check_against_spec(pipeline_name: str, spec: Mapping, values: Mapping[str, object]) -> None:
    """The check of a run's arguments against its compiled pipeline spec that the pipeline
    entry declares as ``spec_check(spec, values)`` (none: nothing to check), e.g.
    fractional-eval's ``num_shards`` against the GPU fraction compiled into its shard
    tasks. ``spec``: the IR dict (the compiled YAML's first document; for a pipeline
    object, its ``pipeline_spec`` as a dict: :func:`spec_of`); ``values``: the typed
    arguments given (the spec's defaults fill the rest).

    Raises:
        ValueError: what the check raises (one line naming what is accepted).
    """
    check = discover.entry(pipeline_name).spec_check
    if check is not None:
        check(spec, values)




def declared(pipeline_name: str) -> dict[str, Param]:
    """The parameter declaration (``ENTRY.parameters``) of catalog pipeline ``pipeline_name``.

    Raises:
        ValueError: not a catalog pipeline, or its module declares nothing.
    """
    decl = discover.entry(pipeline_name).parameters
    if not decl:
        raise ValueError(f"pipeline {pipeline_name} declares no parameters")
    return dict(decl)


def missing(pipeline_name: str, given: Sequence[str]) -> None:
    """Refuse a call of catalog pipeline ``pipeline_name`` that leaves out a parameter
    without a default.

    Raises:
        ValueError: naming each missing parameter with its meaning and how to give it.
    """
    decl = declared(pipeline_name)
    sig = signature(discover.entry(pipeline_name).pipeline())
    absent = [k for k, (_, _, has_default) in sig.items() if not has_default and k not in given]
    if absent:
        raise ValueError(f"{pipeline_name} needs " + "; ".join(
            f"-p {k}=... ({decl[k].meaning})" if k in decl else f"-p {k}=..."
            for k in absent))


def rows(pipeline_name: str) -> list[tuple[str, str, str, str, str]]:
    """(name, type, default, accepted, meaning) per parameter, for ``kfp-gpu params`` and
    docs/parameters.md. Default ``(required)`` when the pipeline gives none."""
    sig = signature(discover.entry(pipeline_name).pipeline())
    out = []
    for key, p in declared(pipeline_name).items():
        _, default, has_default = sig.get(key, (p.type, None, False))
        shown = ("(required)" if not has_default
                 else repr(default) if p.type == STRING else str(default).lower()
                 if p.type == BOOLEAN else number_text(default) if p.type == DOUBLE else str(default))
        out.append((key, TYPE_WORDS[p.type].removeprefix("an ").removeprefix("a "),
                    shown, p.accepted(), p.meaning))
    return out


def markdown(pipeline_name: str, table: list[tuple[str, ...]] | None = None) -> str:
    """The parameters of ``pipeline_name`` as a Markdown section (docs/parameters.md)."""
    table = table if table is not None else rows(pipeline_name)
    out = [f"## {pipeline_name}", "", "| parameter | type | default | accepted | meaning |",
           "|---|---|---|---|---|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in table]
    return "\n".join(out) + "\n"


def docs_page() -> str:
    """docs/parameters.md: every catalog pipeline's parameters (a test keeps it current)."""
    head = ("# Pipeline parameters\n\nGenerated from each pipeline's `PARAMETERS` declaration "
            "(kfp_gpu/dsl/parameters.py) by `kfp-gpu params PIPELINE --markdown`; "
            "`kfp-gpu run --local` and `kfp-gpu submit` refuse a value outside *accepted* "
            "before any task starts (exit 2), and `kfp-gpu compile` refuses a default "
            "outside it.\n")
    return head + "".join("\n" + markdown(n) for n in sorted(discover.PIPELINES))


def default_resources(pipelines: Iterable[str] | None = None
                      ) -> dict[str, dict[str, Resources]]:
    """Pipeline name -> {task display name: default Resources}, from each entry's
    ``task_resources`` (``pipelines``: names, default every catalog pipeline)."""
    return {name: dict(discover.entry(name).task_resources)
            for name in sorted(discover.PIPELINES if pipelines is None else pipelines)}


def defaults_table(pipelines: Iterable[str] | None = None) -> str:
    """The Markdown table of :func:`default_resources` (docs/cluster.md carries it; a test
    compares): pipeline, task, defaults in the ``--resources`` form (``-`` = none)."""
    lines = ["| pipeline | task | default (`--resources` form) |", "|---|---|---|"]
    for pipeline, tasks in default_resources(pipelines).items():
        for task, res in tasks.items():
            lines.append(f"| {pipeline} | {task} | {res.text() or '-'} |")
    return "\n".join(lines)
