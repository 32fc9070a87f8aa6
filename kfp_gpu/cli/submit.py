"""``kfp-gpu submit`` (library: :mod:`kfp_gpu.cluster.submit`)."""

from __future__ import annotations

import typer

from kfp_gpu.cli import checks, errors


def submit_command(
    pipeline: str = typer.Argument(..., help="Catalog pipeline name (e.g. imdb-lstm) or a "
                                   "compiled pipeline YAML."),
    host: str = typer.Option(..., "--host", envvar="KFP_HOST", callback=checks.url,
                             help="KFP API URL, e.g. https://kubeflow.example.com/pipeline"),
    namespace: str | None = typer.Option(
        None, "--namespace", "-n", callback=checks.namespace,
        help="Namespace (multi-user KFP: the profile namespace)."),
    experiment: str = typer.Option("kfp-gpu", "--experiment", help="Experiment name."),
    param: list[str] = typer.Option(  # noqa: B008 - typer's declaration style
        [], "--param", "-p", help="key=value pipeline argument."),
    version: str | None = typer.Option(
        None, "--version", help="Pipeline version name (default: <git commit, else "
        "v<package version>>-<first 10 hex digits of the SHA-256 of the YAML uploaded>). "
        "A version of that name is reused only if its content is the same; other content "
        "is refused (exit 2) unless --replace."),
    replace: bool = typer.Option(
        False, "--replace", help="If the version name holds other content, delete that "
        "version and upload this one."),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Run with KFP's caching off for every task "
        "(enable_caching=False, set in the uploaded spec: kfp 2.17 drops it for runs of a "
        "pipeline version). KFP's cache key leaves out a task's GPU request, so a "
        "recompiled GPU/MIG request would otherwise be served from a cached step of "
        "another request."),
    service_account: str | None = typer.Option(
        None, "--service-account", callback=checks.service_account,
        help="ServiceAccount of ALL the run's pods "
        "(default: KFP's runner, pipeline-runner / default-editor, which manifests/rbac "
        "binds to the MPIJob launcher Role). It must hold KFP's own permissions too."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the run to finish."),
    timeout: float = typer.Option(3600, "--timeout", callback=checks.positive_seconds,
                                  help="Seconds to wait (with --wait)."),
    poll: float = typer.Option(10, "--poll", callback=checks.positive_seconds,
                               help="Seconds between status polls."),
    ssl_ca_cert: str | None = typer.Option(None, "--ssl-ca-cert", callback=checks.readable_file,
                                           help="CA bundle."),
    insecure_skip_tls_verify: bool = typer.Option(False, "--insecure-skip-tls-verify"),
    ui_host: str | None = typer.Option(None, "--ui-host", callback=checks.url,
                                       help="KFP UI URL for links (default: --host)."),
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", envvar="KUBECONFIG", callback=checks.kubeconfig,
        help="kubeconfig to read the task pods' logs with --wait (default: $KUBECONFIG, "
        "~/.kube/config, or in-cluster; none: the UI link instead)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
) -> None:
    """Upload a compiled pipeline (a version named after its content), start a run,
    optionally wait and tell what it did.

    With --wait: a FAILED run prints one line per failed component task with the error
    its component recorded in the pod's log (else the log's last error line); a SUCCEEDED
    one each task's output URIs and metrics, or that KFP served it from its cache (logs
    read through the Kubernetes API; without a kubeconfig, the UI link).

    Exit status: 0 when the run was started (or, with --wait, SUCCEEDED); 1 on FAILED,
    CANCELED, timeout or an API refusal, with the reason; 2 for bad input (a malformed
    URL, an unknown pipeline or parameter, a value outside its range, a file that is not a
    compiled pipeline, a version name that holds other content, or a run whose every
    failed task refused its input); 3 when the KFP API cannot be reached.
    """
    # The library is imported when the command runs (the CLI stays cheap to start).
    from kfp_gpu.cluster.submit import submit

    try:
        out = submit(pipeline, host, namespace=namespace, experiment=experiment,
                     params=param, version=version, service_account=service_account,
                     wait=wait, timeout=timeout, poll=poll, ssl_ca_cert=ssl_ca_cert,
                     insecure_skip_tls_verify=insecure_skip_tls_verify, ui_host=ui_host,
                     replace=replace, no_cache=no_cache, kubeconfig=kubeconfig,
                     context=context, echo=typer.echo)
    except ValueError as e:
        message = errors.refusal(e)  # a ValueError that is a bug: exit 1
        errors.trace()
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    except ConnectionError as e:  # kfp_gpu.cluster.submit.KfpUnreachable
        errors.trace()
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(3)
    except RuntimeError as e:
        errors.trace()
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    if out.code:
        typer.secho(f"run {out.run_id} {out.state}" + (f": {out.reason}" if out.reason else ""),
                    fg=typer.colors.RED, err=True)
        for line in out.lines:
            typer.echo(line, err=True)
        typer.echo(out.url, err=True)
        raise typer.Exit(out.code)
    typer.echo(f"run {out.run_id} {out.state}: {out.url}")
    for line in out.lines:
        typer.echo(line)

