"""``kfp-gpu params PIPELINE``: the pipeline's parameters from their one declaration
(:mod:`kfp_gpu.dsl.parameters`): type, default, accepted values, meaning -- the values
``run --local`` and ``submit`` check before any task starts."""

from __future__ import annotations

import typer


def params_command(
    pipeline: str = typer.Argument(..., help="Catalog pipeline name, e.g. imdb-lstm."),
    markdown: bool = typer.Option(False, "--markdown", help="As a Markdown table (the form "
                                  "docs/parameters.md holds)."),
) -> None:
    """List a pipeline's parameters: type, default, accepted values, meaning."""
    from kfp_gpu.catalog import params

    rows = params.rows(pipeline)
    header = ("parameter", "type", "default", "accepted", "meaning")
    if markdown:
        typer.echo(params.markdown(pipeline, rows))
        return
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for r in [header, *rows]:
        typer.echo("  ".join(c.ljust(widths[i]) for i, c in enumerate(r[:4])) + "  " + r[4])
