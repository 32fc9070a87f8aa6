"""``kfp-gpu submit``: upload a compiled pipeline to KFP, start a run, wait for it (CI path).

Talks to the KFP v2beta1 REST API through the kfp client (``kfp.Client``):

1. health check (``GET /apis/v2beta1/healthz``) so that a wrong host or a refused token
   fails fast with the reason;
2. the pipeline: created if no pipeline has that display name, and a pipeline version
   named after the git commit (``$GITHUB_SHA`` / ``$CI_COMMIT_SHA`` / ``git rev-parse``) or
   the package version, uploaded only if the pipeline has no version of that name yet
   (idempotent: re-running the same commit reuses the version);
3. the experiment (created if missing) and a run of that version;
4. with ``--wait``: polls the run, prints each state change, and exits 0 on
   ``SUCCEEDED``, 1 on ``FAILED`` / ``CANCELED`` / ``SKIPPED`` / timeout, with the reason
   (the run's error and its failed tasks).

Authentication: a bearer token from ``$KFP_TOKEN``, else the file named by
``$KF_PIPELINES_SA_TOKEN_PATH`` (default ``/var/run/secrets/kubeflow/pipelines/token``,
the projected ServiceAccount token KFP mounts for in-cluster clients). TLS:
``--ssl-ca-cert`` or ``--insecure-skip-tls-verify``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from kfp_gpu import __version__

TOKEN_ENV = "KFP_TOKEN"
#: kfp's own variable for the projected token path (kfp.client.set_volume_credentials).
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
DEFAULT_TOKEN_PATH = "/var/run/secrets/kubeflow/pipelines/token"
TERMINAL_STATES = {"SUCCEEDED", "FAILED", "SKIPPED", "CANCELED", "ERROR"}


def kfp_token() -> str | None:
    """Bearer token for the KFP API: ``$KFP_TOKEN``, else the SA token file, else None."""
    tok = os.environ.get(TOKEN_ENV, "").strip()
    if tok:
        return tok
    path = Path(os.environ.get(TOKEN_PATH_ENV, DEFAULT_TOKEN_PATH))
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def resolve_pipeline(ref: str) -> tuple[Path, str]:
    """Catalog name or YAML path -> (compiled YAML path, pipeline display name).

    Raises:
        ValueError: neither a catalog pipeline nor an existing YAML file (names the
            catalog pipelines).
    """
    from kfp_gpu.build import registry

    if ref in registry.PIPELINES:
        from kfp_gpu.build import compile as comp

        path = comp.targets(only=ref)[0].path
        if not path.is_file():
            raise ValueError(f"compiled YAML for {ref!r} missing at {path}; run "
                             "`kfp-gpu compile`")
        return path, ref
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        import yaml

        doc = next(iter(yaml.safe_load_all(path.read_text())), None) or {}
        name = doc.get("pipelineInfo", {}).get("name") or path.stem.replace("_", "-")
        return path, name
    raise ValueError(f"unknown pipeline {ref!r}; accepted: a catalog pipeline "
                     f"({', '.join(sorted(registry.PIPELINES))}) or a compiled .yaml file")


def default_version_name() -> str:
    """Version name: the git commit (CI variables first, then ``git``), else ``v<version>``."""
    for var in ("GITHUB_SHA", "CI_COMMIT_SHA", "BUILD_SOURCEVERSION"):
        sha = os.environ.get(var, "").strip()
        if sha:
            return sha[:12]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        if sha:
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10,
                                   check=False).stdout.strip()
            return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"v{__version__}"


def parse_params(pairs: list[str], spec: dict) -> dict:
    """``["k=v", ...]`` -> typed pipeline arguments, by the pipeline's root input types.

    Raises:
        ValueError: not ``k=v``, an unknown parameter (names the accepted ones), or a value
            that does not parse as the parameter's type.
    """
    defs = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    out: dict = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"--param takes key=value, got {pair!r}")
        if key not in defs:
            raise ValueError(f"unknown pipeline parameter {key!r}; accepted: "
                             f"{', '.join(sorted(defs)) or '(none)'}")
        ptype = defs[key].get("parameterType", "STRING")
        try:
            if ptype == "NUMBER_INTEGER":
                out[key] = int(raw)
            elif ptype == "NUMBER_DOUBLE":
                out[key] = float(raw)
            elif ptype == "BOOLEAN":
                if raw.lower() not in ("true", "false"):
                    raise ValueError("expected true or false")
                out[key] = raw.lower() == "true"
            elif ptype in ("LIST", "STRUCT"):
                out[key] = json.loads(raw)
            else:
                out[key] = raw
        except ValueError as e:
            raise ValueError(f"--param {key}: {raw!r} is not a {ptype} ({e})") from None
    return out


@dataclass
class Outcome:
    """How a submission ended. ``code``: exit status (0 only for SUCCEEDED or no --wait)."""

    run_id: str
    url: str
    state: str
    code: int
    reason: str = ""


def _filter(name: str) -> str:
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name",
                                       "stringValue": name}]})


def ensure_pipeline_version(client, path: Path, pipeline_name: str, version_name: str,
                            echo: Callable[[str], None] = print,
                            namespace: str | None = None) -> tuple[str, str]:
    """Create the pipeline if missing and the named version if missing: (pipeline_id,
    version_id). Re-running with the same names uploads nothing. ``namespace``: the
    pipeline is namespaced there (multi-user KFP); None = a shared pipeline."""
    found = client.list_pipelines(filter=_filter(pipeline_name), page_size=2,
                                  namespace=namespace).pipelines or []
    if len(found) > 1:
        raise RuntimeError(f"{len(found)} pipelines are named {pipeline_name!r}; KFP needs "
                           "unique names")
    pipeline_id = found[0].pipeline_id if found else None
    if pipeline_id is None:
        p = client.upload_pipeline(str(path), pipeline_name=pipeline_name,
                                   description=f"kfp-gpu {__version__}", namespace=namespace)
        pipeline_id = p.pipeline_id
        echo(f"created pipeline {pipeline_name} ({pipeline_id})")
    versions = client.list_pipeline_versions(pipeline_id, filter=_filter(version_name),
                                             page_size=2).pipeline_versions or []
    if versions:
        echo(f"pipeline version {version_name} already uploaded, reusing it")
        return pipeline_id, versions[0].pipeline_version_id
    v = client.upload_pipeline_version(str(path), version_name, pipeline_id=pipeline_id)
    echo(f"uploaded pipeline version {version_name} ({v.pipeline_version_id})")
    return pipeline_id, v.pipeline_version_id


def _failure_reason(run) -> str:
    parts = []
    err = getattr(run, "error", None)
    if err is not None and getattr(err, "message", None):
        parts.append(err.message)
    details = getattr(run, "run_details", None)
    for t in (getattr(details, "task_details", None) or []):
        if str(getattr(t, "state", "")) in ("FAILED", "ERROR"):
            terr = getattr(t, "error", None)
            msg = getattr(terr, "message", "") if terr is not None else ""
            parts.append(f"task {t.display_name} failed" + (f": {msg}" if msg else ""))
    return "; ".join(parts) or "no reason given by the API"


def wait_for_run(client, run_id: str, url: str, timeout: float, poll: float,
                 echo: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Poll ``get_run`` until a terminal state or ``timeout`` seconds; print state changes."""
    start = clock()
    last = None
    while True:
        run = client.get_run(run_id)
        state = str(run.state or "PENDING")
        elapsed = clock() - start
        if state != last:
            done = ""
            tasks = getattr(getattr(run, "run_details", None), "task_details", None) or []
            if tasks:
                finished = sum(str(t.state) in TERMINAL_STATES for t in tasks)
                done = f" ({finished}/{len(tasks)} tasks finished)"
            echo(f"[{elapsed:7.1f}s] {state}{done}")
            last = state
        if state == "SUCCEEDED":
            return Outcome(run_id, url, state, 0)
        if state in TERMINAL_STATES:
            return Outcome(run_id, url, state, 1, _failure_reason(run))
        if elapsed >= timeout:
            return Outcome(run_id, url, state, 1,
                           f"timed out after {timeout:g}s with the run still {state}")
        sleep(min(poll, max(0.0, timeout - elapsed)) or poll)


def submit(pipeline: str, host: str, *, namespace: str | None = None,
           experiment: str = "kfp-gpu", params: list[str] | None = None,
           version: str | None = None, service_account: str | None = None,
           wait: bool = False, timeout: float = 3600, poll: float = 10,
           ssl_ca_cert: str | None = None, insecure_skip_tls_verify: bool = False,
           ui_host: str | None = None, token: str | None = None,
           echo: Callable[[str], None] = print) -> Outcome:
    """Upload (idempotently) and run ``pipeline`` on the KFP at ``host``.

    Raises:
        ValueError: bad pipeline reference or parameters (before anything is uploaded).
        RuntimeError: the KFP API refused or failed a call (message has status and body).
    """
    import warnings

    import yaml

    path, name = resolve_pipeline(pipeline)
    spec = next(iter(yaml.safe_load_all(path.read_text())))
    args = parse_params(params or [], spec)
    version = version or default_version_name()
    token = token if token is not None else kfp_token()
    host = host.rstrip("/")

    from kfp_gpu.cluster.doctor import kfp_healthz

    ok, detail = kfp_healthz(host, token, ssl_ca_cert, not insecure_skip_tls_verify)
    if not ok:
        raise RuntimeError(f"the KFP API at {host} does not answer: {detail}")
    if "multi-user" in detail and not namespace:
        raise ValueError(f"the KFP at {host} is multi-user: give --namespace (your profile "
                         "namespace)")

    import kfp
    import kfp_server_api

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        client = kfp.Client(host=host, existing_token=token, ssl_ca_cert=ssl_ca_cert,
                            verify_ssl=False if insecure_skip_tls_verify else None,
                            namespace=namespace or "kubeflow", ui_host=ui_host)
    try:
        pipeline_id, version_id = ensure_pipeline_version(client, path, name, version, echo,
                                                          namespace)
        exp = client.create_experiment(experiment, namespace=namespace)
        run_name = f"{name} {version} {time.strftime('%Y-%m-%d %H:%M:%S')}"
        run = client.run_pipeline(exp.experiment_id, run_name, params=args,
                                  pipeline_id=pipeline_id, version_id=version_id,
                                  service_account=service_account)
        url = f"{(ui_host or host).rstrip('/')}/#/runs/details/{run.run_id}"
        echo(f"run {run.run_id} started: {url}")
        if not wait:
            return Outcome(run.run_id, url, str(run.state or "PENDING"), 0)
        return wait_for_run(client, run.run_id, url, timeout, poll, echo)
    except kfp_server_api.ApiException as e:
        body = (e.body or "").strip() if isinstance(e.body, str) else e.body
        raise RuntimeError(f"KFP API error: HTTP {e.status} {e.reason}: {body}") from None


def submit_command(
    pipeline: str = typer.Argument(..., help="Catalog pipeline name (e.g. imdb-lstm) or a "
                                   "compiled pipeline YAML."),
    host: str = typer.Option(..., "--host", envvar="KFP_HOST",
                             help="KFP API URL, e.g. https://kubeflow.example.com/pipeline"),
    namespace: str | None = typer.Option(
        None, "--namespace", "-n", help="Namespace (multi-user KFP: the profile namespace)."),
    experiment: str = typer.Option("kfp-gpu", "--experiment", help="Experiment name."),
    param: list[str] = typer.Option(  # noqa: B008 - typer's declaration style
        [], "--param", "-p", help="key=value pipeline argument."),
    version: str | None = typer.Option(
        None, "--version", help="Pipeline version name (default: git commit, else package "
        "version)."),
    service_account: str | None = typer.Option(
        None, "--service-account", help="ServiceAccount of ALL the run's pods "
        "(default: KFP's runner, pipeline-runner / default-editor, which manifests/rbac "
        "binds to the MPIJob launcher Role). It must hold KFP's own permissions too."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the run to finish."),
    timeout: float = typer.Option(3600, "--timeout", help="Seconds to wait (with --wait)."),
    poll: float = typer.Option(10, "--poll", help="Seconds between status polls."),
    ssl_ca_cert: str | None = typer.Option(None, "--ssl-ca-cert", help="CA bundle."),
    insecure_skip_tls_verify: bool = typer.Option(False, "--insecure-skip-tls-verify"),
    ui_host: str | None = typer.Option(None, "--ui-host",
                                          help="KFP UI URL for links (default: --host)."),
) -> None:
    """Upload a compiled pipeline (idempotent version), start a run, optionally wait.

    Exit status: 0 when the run was started (or, with --wait, SUCCEEDED); 1 on FAILED,
    CANCELED, timeout or an API refusal, with the reason; 2 for bad input.
    """
    try:
        out = submit(pipeline, host, namespace=namespace, experiment=experiment,
                     params=param, version=version, service_account=service_account,
                     wait=wait, timeout=timeout, poll=poll, ssl_ca_cert=ssl_ca_cert,
                     insecure_skip_tls_verify=insecure_skip_tls_verify, ui_host=ui_host,
                     echo=typer.echo)
    except ValueError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    except RuntimeError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    if out.code:
        typer.secho(f"run {out.run_id} {out.state}: {out.reason}\n{out.url}",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(out.code)
    typer.echo(f"run {out.run_id} {out.state}: {out.url}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(typer.run(submit_command))
