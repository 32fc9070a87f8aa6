"""``kfp-gpu doctor`` (library: :mod:`kfp_gpu.cluster.doctor`)."""

from __future__ import annotations

from pathlib import Path

import typer

from kfp_gpu.cli import checks, errors

# Defaults equal kfp_gpu.cluster.doctor.DEFAULT_NAMESPACE / DEFAULT_SERVICE_ACCOUNT (the
# library is only imported when the command runs; tests/unit/test_cli.py checks they agree).


def doctor_command(
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", envvar="KUBECONFIG", callback=checks.kubeconfig,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
    pipeline: str | None = typer.Option(
        None, "--pipeline", help="Catalog pipeline name or compiled pipeline YAML whose "
        "needs to check (GPU request, MPI Operator, launcher RBAC)."),
    request: str | None = typer.Option(  # the callback hands over a GpuRequest
        None, "--gpu", callback=checks.gpu, help="GPU request to check, e.g. 'gpu:2', 'mig:1g.10gb', "
        "'shared:1,renamed=true', 'metagpu:50', 'dra:mig=1g.10gb' (DRA, alpha upstream: checks "
        "resource.k8s.io/v1, NVIDIA's DeviceClasses and ResourceSlices) (replaces the pipeline's "
        "own)."),
    namespace: str = typer.Option("kubeflow", "--namespace", "-n", callback=checks.namespace,
                                  help="Namespace the pipeline runs in."),
    service_account: str = typer.Option(
        "pipeline-runner", "--service-account", callback=checks.service_account,
        help="ServiceAccount the run's pods use, whose launcher permissions to review "
        "(impersonated; multi-user Kubeflow: default-editor); '' = "
        "review the caller's own."),
    kfp_host: str | None = typer.Option(
        None, "--kfp-host", envvar="KFP_HOST", callback=checks.url,
        help="KFP API URL to check (healthz)."),
    ssl_ca_cert: str | None = typer.Option(None, "--ssl-ca-cert", callback=checks.readable_file,
                                              help="CA bundle for the KFP API."),
    insecure_skip_tls_verify: bool = typer.Option(False, "--insecure-skip-tls-verify"),
    backend: str = typer.Option(
        "mpijob", "--backend", help="Job kind the pipeline's distributed step launches: "
        "'mpijob' (MPI Operator) or 'trainjob' (Kubeflow Trainer v2 + the kfp-gpu-horovod "
        "runtime); its CRDs and RBAC must be there."),
) -> None:
    """Report what the cluster offers and whether a pipeline's GPU request can be met.

    Exit status 0 when everything needed is there, 1 with the reasons otherwise, 2 for bad
    input (a --kubeconfig or $KUBECONFIG file that does not exist or is not YAML, a bad
    option), 3 when there is no cluster to ask (no kubeconfig found and not in a pod) or the
    Kubernetes API or the KFP API (--kfp-host) does not answer (the report is printed first).
    """
    # The library is imported when the command runs (the CLI stays cheap to start).
    from kfp_gpu import kube
    from kfp_gpu.cluster import doctor, kfp_api

    try:
        if backend not in ("mpijob", "trainjob"):  # = doctor.backends.BACKENDS
            raise ValueError(f"invalid --backend {backend!r}; accepted: mpijob, trainjob")
        needs = _needs(pipeline, request)
        if needs is not None:
            needs.backend = backend
    except (ValueError, FileNotFoundError) as e:
        message = errors.refusal(e)  # a ValueError that is a bug: exit 1
        errors.trace()
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    kfp = {"kfp_host": kfp_host, "kfp_token": kfp_api.kfp_token() if kfp_host else None,
           "kfp_ca_cert": ssl_ca_cert, "kfp_verify": not insecure_skip_tls_verify}
    try:
        api = kube.api_client(kubeconfig, context)
    except RuntimeError as e:
        facts = doctor.ClusterFacts(namespace=namespace, connect_error=str(e))
        doctor.read_kfp(facts, **kfp)  # the KFP check is shown even without a cluster
    else:
        facts = doctor.gather(api, namespace=namespace,
                              service_account=service_account or None, needs=needs, **kfp)
    report = doctor.build_report(facts, needs)
    typer.echo(report.render())
    if facts.unreachable or (facts.kfp is not None and not facts.kfp.reachable):
        raise typer.Exit(3)
    if not report.ok:
        raise typer.Exit(1)


def _needs(pipeline: str | None, request):
    """What to check: the pipeline's needs (``request`` replacing its GPU settings), the
    request's alone, or nothing (report only)."""
    from kfp_gpu.cluster import doctor

    if pipeline:
        import yaml

        from kfp_gpu.cluster.submit import load_spec
        from kfp_gpu.compiler.compile import compiled_pipeline

        load_spec(pipeline)  # one line for a file that is not a compiled pipeline
        path, _ = compiled_pipeline(pipeline)
        spec = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
        return doctor.needs_from_pipeline(
            spec, request, source=f"pipeline {pipeline}"
            + (f", --gpu {request.to_text()}" if request else ""))
    if request is not None:
        return doctor.needs_from_request(request)
    return None
