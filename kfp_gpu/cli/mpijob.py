"""``kfp-gpu mpijob`` sub-commands (library: :mod:`kfp_gpu.cli.run_local`).

``kfp-gpu mpijob run-local FILE`` (also ``kfp-gpu trainjob run-local FILE``) runs an MPIJob file as local Docker containers the way
mpi-operator v0.8.2 would run it on a cluster, or a TrainJob file (``--runtime``: its
ClusterTrainingRuntime) the way Kubeflow Trainer v2.3.0 + JobSet would (see
docs/local-mpijob.md). The runner and the Docker SDK are imported inside the command.
"""

from __future__ import annotations

import logging

import typer

from kfp_gpu.cli import checks

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="MPIJob tools: run an MPIJob (or TrainJob) file locally in Docker "
                  "containers.")


#: ``kfp-gpu trainjob run-local``: the same command under the name a TrainJob user types;
#: either command takes either kind of file.
trainjob_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="TrainJob tools: run a TrainJob (or MPIJob) file locally in "
                           "Docker containers.")


@trainjob_app.command("run-local")
@app.command("run-local")
def run_local_command(
    file: str = typer.Argument(..., callback=checks.readable_file,
                               help="YAML/JSON file with a kubeflow.org/v2beta1 MPIJob "
                               "or a trainer.kubeflow.org/v1alpha1 TrainJob."),
    pvc: list[str] = typer.Option(  # noqa: B008 - typer's declaration style
        # CLAIM=DIR texts; the callback hands the command (claim, folder) pairs
        [], "--pvc", callback=checks.pvc,
        help="CLAIM=DIR: the local folder standing in for a PVC (repeatable)."),
    image: str | None = typer.Option(
        None, "--image", callback=checks.image,
        help="Replace every pod template's image (e.g. a local tag)."),
    replace: bool = typer.Option(
        False, "--replace", help="Delete what an earlier run of the same job left first."),
    keep: bool = typer.Option(
        False, "--keep", help="Leave containers, network and workspace in place afterwards."),
    ready_timeout: float = typer.Option(
        120.0, "--ready-timeout", callback=checks.positive_seconds,
        help="Seconds the Workers get to start and listen."),
    runtime: str | None = typer.Option(
        None, "--runtime", callback=checks.readable_file,
        help="TrainJob only: YAML file with the ClusterTrainingRuntime it "
        "references (default: manifests/trainer/horovod-runtime.yaml of this checkout)."),
) -> None:
    """Run the MPIJob or TrainJob in FILE as local containers; exit 0 Succeeded/Complete,
    1 Failed, 2 bad input, 3 no Docker engine, 130 SIGINT / 143 SIGTERM (containers and
    network removed).

    Raises:
        typer.Exit: with the runner's exit code; code 2 with the message on a ValueError
            (bad file, bad --pvc, unsupported volume kinds, no runtime for a TrainJob).
    """
    from kfp_gpu.cli import run_local as local_cli

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        code = local_cli.run_local(file, pvc=dict(pvc), image=image, replace=replace, keep=keep,
                                   ready_timeout_s=ready_timeout, runtime=runtime)
    except ValueError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    raise typer.Exit(code)
