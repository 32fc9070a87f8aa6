"""The ``kfp-gpu`` command line (typer).

Commands: ``compile`` (all components and pipelines; ``--check`` for staleness),
``run`` (a pipeline locally with kfp.local), and the commands of :mod:`kfp_gpu.cli.doctor`,
:mod:`kfp_gpu.cli.submit`, :mod:`kfp_gpu.cli.resnet` and
:mod:`kfp_gpu.cli.mpijob`. Library modules are
imported inside the command functions, so ``kfp-gpu --help`` loads neither TensorFlow nor
the Kubernetes client.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

from kfp_gpu import __version__
from kfp_gpu.cli import checks, doctor, errors, mpijob, parameters, resnet, submit

# errors.Group: every error is one line with its exit status (README "Exit codes"); Typer's
# shell completion is on (--install-completion / --show-completion).
app = typer.Typer(cls=errors.Group, add_completion=True, no_args_is_help=True,
                  help="Kubeflow Pipelines components and pipelines for GPU training.\n\n"
                  f"Exit status: {errors.statuses_text()}.")


def _fail(msg: str, code: int = 2) -> None:
    errors.trace()  # -v: the traceback of the error being handled
    typer.secho(f"error: {msg}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kfp-gpu {__version__}")
        raise typer.Exit()


@app.callback()
def _main_options(
    _version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show the Python traceback with an error.")] = False,
) -> None:
    """The options before any command (the app's help text, with the exit statuses of
    :data:`kfp_gpu.cli.errors.STATUSES`, is given to ``typer.Typer`` above)."""
    errors.set_verbose(verbose)


@app.command("version")
def version() -> None:
    """Print the package version (= runtime image tag)."""
    typer.echo(__version__)


@app.command("compile")
def compile_cmd(
    check: Annotated[bool, typer.Option("--check", help="Fail if a checked-in YAML is stale.")]
    = False,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", callback=checks.gpu,
        help="GPU request for the pipelines' GPU tasks, e.g. 'gpu:1', "
        "'mig:1g.10gb', 'fraction:0.5', or 'dra:mig=1g.10gb' / 'dra:gpu=2' (Dynamic Resource "
        "Allocation on NVIDIA's DRA driver, alpha upstream: MPIJob Workers and TrainJob nodes "
        "only, e.g. --only resnet-horovod; docs/gpu-requests.md) (default: each pipeline's "
        "own).")] = None,
    registry: Annotated[str | None, typer.Option(
        "--registry", envvar="KFP_GPU_REGISTRY", callback=checks.registry,
        help="Image registry prefix for every image the pipelines start (component pods, "
        "MPIJob/TrainJob pods, the Trainer runtime written to DIR/manifests/trainer), e.g. "
        "registry.example.com/ml; needs --output-dir. Also $KFP_GPU_REGISTRY (read here, "
        "by this option only). Default ghcr.io/kfp-gpu.")] = None,
    output_dir: Annotated[Path | None, typer.Option(
        "--output-dir", "-o", help="Write under DIR/components and DIR/pipelines "
        "instead of the package folders.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="One component or pipeline.")]
    = None,
    pin_digests: Annotated[bool, typer.Option(
        "--pin-digests", help="Ask the registry (OCI distribution API) for each image's "
        "digest and write R/kfp-gpu-<name>@sha256:... everywhere; needs --output-dir. Exit 2 "
        "when an image is missing there, 3 when the registry is unreachable.")] = False,
    secret_env: Annotated[list[str] | None, typer.Option(
        "--secret-env", callback=checks.secret_env, metavar="SECRET[:KEY=ENV,...]",
        help="Env vars of every task from a Kubernetes Secret: SECRET alone = its "
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (and, where present, AWS_ENDPOINT_URL[_S3], "
        "AWS_DEFAULT_REGION, AWS_REGION, AWS_SESSION_TOKEN) for s3:// on S3/MinIO/"
        "SeaweedFS; SECRET:KEY=ENV[,KEY=ENV] the named keys. Reaches the MPIJob/TrainJob "
        "pods too. Repeatable; needs --output-dir.")] = None,
    pvc: Annotated[list[str] | None, typer.Option(
        "--pvc", callback=checks.task_pvc, metavar="CLAIM:/PATH",
        help="Mount a PersistentVolumeClaim on every task (and the MPIJob Workers), e.g. "
        "imdb-data:/mnt/data, so a path under it can be a source or work_dir. Repeatable; "
        "needs --output-dir.")] = None,
    secret_volume: Annotated[list[str] | None, typer.Option(
        "--secret-volume", callback=checks.secret_volume, metavar="SECRET:/DIR[:KEY]",
        help="Mount a Secret's keys as files under DIR on every task; with KEY, "
        "GOOGLE_APPLICATION_CREDENTIALS=DIR/KEY (a GCP service-account key for gs://). "
        "Repeatable; needs --output-dir.")] = None,
    resources: Annotated[list[str] | None, typer.Option(
        "--resources", callback=checks.task_resources, metavar="TASK=KEY:Q[,KEY:Q]",
        help="CPU/memory of one task by display name, e.g. train-lstm=cpu:2,memory:6G; "
        "keys cpu/memory (request and limit), cpu-request, cpu-limit, memory-request, "
        "memory-limit; the rest keeps the defaults (docs/cluster.md). Repeatable; needs "
        "--output-dir.")] = None,
) -> None:
    """Compile every component and pipeline to YAML (or --check they are current)."""
    from kfp_gpu.compiler import compile as comp
    from kfp_gpu.dsl import task_settings

    # The callbacks (kfp_gpu.cli.checks) parsed each value: gpu is a GpuRequest, the
    # repeatable options lists of kfp_gpu.dsl.task_settings objects.
    try:  # this refuses a mount path given twice
        settings = task_settings.from_parsed(secret_env or (), pvc or (),
                                             secret_volume or (), resources or ())
    except ValueError as e:
        _fail(errors.refusal(e))
    if check:
        if gpu or output_dir or registry or pin_digests or not settings.is_default():
            _fail("--check compares the checked-in YAML (the default registry); it takes no "
                  "--gpu/--output-dir/--registry/--pin-digests/--secret-env/--pvc/"
                  "--secret-volume/--resources (is $KFP_GPU_REGISTRY set? unset it)")
        try:
            problems = comp.check_all(only)
        except ValueError as e:
            _fail(errors.refusal(e))
        for p in problems:
            typer.echo(p)
        if problems:
            raise typer.Exit(1)
        typer.echo("all compiled YAML is current")
        return
    if (gpu or registry or pin_digests or not settings.is_default()) and not output_dir:
        _fail("--gpu/--registry/--pin-digests/--secret-env/--pvc/--secret-volume/--resources "
              "need --output-dir DIR: the package's checked-in YAML stays the default build "
              "(kfp-gpu compile --check compares against it)")
    from kfp_gpu.release import digests

    try:
        with _warnings_once():
            written = comp.compile_all(output_dir, gpu, only, registry=registry,
                                       pin_digests=pin_digests, settings=settings)
    except ValueError as e:  # an input error: one line, 2; a bug: raised on
        _fail(errors.refusal(e))
    except digests.ImageMissing as e:
        _fail(str(e))
    except digests.RegistryUnreachable as e:
        _fail(str(e), code=3)
    for path in written:
        typer.echo(f"wrote {path}")


@contextlib.contextmanager
def _warnings_once():
    """One ``warning:`` line per cause (the same request warns once per pipeline), without
    the source file and line Python's warnings module adds."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            yield
        finally:
            for text in dict.fromkeys(errors.one_line(str(w.message)) for w in caught):
                typer.secho(f"warning: {text}", fg=typer.colors.YELLOW, err=True)


@app.command("run")
def run_cmd(
    pipeline: Annotated[str, typer.Argument(help="Pipeline name, e.g. imdb-lstm.")],
    local: Annotated[bool, typer.Option("--local", help="Run on this machine with kfp.local.")]
    = False,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="key=value pipeline parameter, checked before any task "
        "starts; `kfp-gpu params PIPELINE` lists them with types and ranges.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", callback=checks.gpu,
                                            help="GPU request (compile-time).")] = None,
    data_dir: Annotated[str | None, typer.Option(
        "--data-dir", envvar="KFP_GPU_DATA_DIR",
        help="Folder with the real data (imdb/imdb_50k.csv.gz ...); sets the data "
        "parameter unless --param gives it. Also $KFP_GPU_DATA_DIR.")] = None,
    pipeline_root: Annotated[str, typer.Option(
        "--pipeline-root", help="Where kfp.local writes the artifacts.")] = "local_outputs",
    summary_json: Annotated[Path | None, typer.Option(
        "--summary-json", help="Also write the summary as JSON.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show every line of every task (always kept in the run's "
        "log folder).")] = False,
    runner: Annotated[str, typer.Option(
        "--runner", help="subprocess (this Python) or docker (each task in its image, "
        "the locally built tags; needs a Docker engine).")] = "subprocess",
) -> None:
    """Run a pipeline. Only --local is supported here; use `kfp-gpu submit` for a cluster."""
    if not local:
        _fail("only --local runs are supported by `run`; to run on a cluster use "
              "`kfp-gpu submit PIPELINE --host URL`")
    from kfp_gpu.catalog import arguments
    from kfp_gpu.local import run as local_run

    errors.set_verbose(verbose)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(message)s")
    from kfp_gpu.local import docker as local_docker
    from kfp_gpu.local import interrupt

    try:
        if summary_json:  # refused before the run, not after it
            local_run.check_writable_file(summary_json, "--summary-json")
        raw = arguments.split_pairs(param or [])  # typed and checked once, in run()
        summary = local_run.run(pipeline, raw, gpu=gpu, pipeline_root=pipeline_root,
                                data_dir=data_dir, verbose=verbose, runner=runner)
    except interrupt.Interrupted as e:  # 130 SIGINT, 143 SIGTERM
        typer.secho(e.message(), fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(e.exit_code) from None
    except (ValueError, FileNotFoundError) as e:
        _fail(errors.refusal(e))
    except local_docker.EngineUnreachable as e:
        _fail(str(e), code=3)
    except local_run.TaskFailed as e:  # at most 4 lines, 2 for the input
        _task_failed(e)
    except RuntimeError as e:
        _fail(f"pipeline failed: {e}", code=1)
    _print_summary(summary)
    if summary_json:
        local_run.write_summary(summary_json, summary)


def _task_failed(e) -> None:
    """Print a :class:`kfp_gpu.local.run.TaskFailed` (the error's own line, the input, the
    log; the traceback only with -v) and exit 2 for an input error, 3 for the environment's
    (a store that does not answer), 1 otherwise (:func:`errors.task_status`)."""
    errors.trace()
    first, *rest = e.lines()
    typer.secho(f"error: {first}", fg=typer.colors.RED, err=True)
    for line in rest:
        typer.echo(line, err=True)
    raise typer.Exit(errors.task_status(e.input_error, e.environment))


def _print_summary(s: dict) -> None:
    from kfp_gpu.local import log as run_log

    for line in run_log.summary_lines(s):
        typer.secho(line, bold=line.startswith(("\n", "test accuracy")))


# Commands from their own modules: each imports its library when it runs.
app.command("doctor")(doctor.doctor_command)
app.command("submit")(submit.submit_command)
app.command("params")(parameters.params_command)
app.command("train-resnet")(resnet.train_resnet_command)
app.add_typer(mpijob.app, name="mpijob")
app.add_typer(mpijob.trainjob_app, name="trainjob")


def main() -> None:
    """Console-script entry point."""
    app(prog_name="kfp-gpu")


if __name__ == "__main__":
    sys.exit(main())
