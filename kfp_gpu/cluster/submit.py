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

Authentication: a bearer token (:func:`kfp_gpu.cluster.kfp_api.kfp_token`). TLS:
``--ssl-ca-cert`` or ``--insecure-skip-tls-verify``. The command line is
:mod:`kfp_gpu.cli.submit`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kfp_gpu import __version__
from kfp_gpu.build import compile as build_compile
from kfp_gpu.build import params as pipeline_params
from kfp_gpu.cluster import kfp_api


class KfpUnreachable(ConnectionError):
    """No answer from the KFP API at all (the CLI exits 3)."""


TERMINAL_STATES = {"SUCCEEDED", "FAILED", "SKIPPED", "CANCELED", "ERROR"}


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


def load_spec(pipeline: str) -> tuple[Path, str, dict]:
    """(path, display name, IR dict) of a catalog pipeline or a compiled pipeline YAML file.

    Raises:
        ValueError: an unknown pipeline, or a file that is not a compiled KFP pipeline
            (not a mapping with ``pipelineInfo`` and ``root``: a component, a manifest).
        yaml.YAMLError, UnicodeDecodeError, OSError: a file that cannot be read as YAML
            (the CLI turns these into one line and exit 2).
    """
    import yaml

    candidate = Path(pipeline)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        with candidate.open(encoding="utf-8") as f:  # YAML errors then name the file
            doc = next(iter(yaml.safe_load_all(f)), None)
        if not isinstance(doc, dict) or "pipelineInfo" not in doc or "root" not in doc:
            raise ValueError(f"{pipeline}: not a compiled KFP pipeline (no pipelineInfo and "
                             "root); give a file `kfp-gpu compile` or kfp's compiler wrote")
    path, name = build_compile.compiled_pipeline(pipeline)
    spec = next(iter(yaml.safe_load_all(path.read_text(encoding="utf-8"))))
    return path, name, spec


def arguments(name: str, spec: dict, params: list[str] | None) -> dict:
    """``-p key=value`` items typed by the compiled spec; for a catalog pipeline also
    checked against its parameter declaration (:func:`kfp_gpu.build.params.checked`).

    Raises:
        ValueError: unknown parameter, unparsable value or one outside its declared range.
    """
    from kfp_gpu.build import registry

    raw = pipeline_params.split_pairs(params or [])
    args = pipeline_params.typed(raw, pipeline_params.types_of_spec(spec))
    if name in registry.PIPELINES:
        pipeline_params.checked(name, raw)
    return args


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
        KfpUnreachable: no answer from the KFP API (healthz).
        RuntimeError: the KFP API refused or failed a call (message has status and body),
            or its backend (healthz tag_name) is older than the pipeline needs.
    """
    path, name, spec = load_spec(pipeline)
    args = arguments(name, spec, params)
    version = version or default_version_name()
    token = token if token is not None else kfp_api.kfp_token()
    host = host.rstrip("/")

    health = kfp_api.kfp_health(host, token, ssl_ca_cert, not insecure_skip_tls_verify)
    if not health.reachable:
        raise KfpUnreachable(f"the KFP API at {host} does not answer: {health.detail}")
    if not health.ok:
        raise RuntimeError(f"the KFP API at {host} does not answer: {health.detail}")
    too_old, unsure = kfp_api.version_problems(health.tag, kfp_api.backend_requirements(spec))
    if too_old:
        raise RuntimeError(f"the KFP at {host} cannot run {name}: " + "; ".join(too_old))
    for w in unsure:
        echo(f"warning: {w}")
    if "multi-user" in health.detail and not namespace:
        raise ValueError(f"the KFP at {host} is multi-user: give --namespace (your profile "
                         "namespace)")

    # kfp_server_api comes with kfp: imported when the API is called.
    import kfp_server_api

    client = kfp_api.kfp_client(host, token=token, namespace=namespace,
                                ssl_ca_cert=ssl_ca_cert,
                                insecure_skip_tls_verify=insecure_skip_tls_verify,
                                ui_host=ui_host)
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
