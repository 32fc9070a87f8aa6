"""``kfp-gpu submit``: upload a compiled pipeline to KFP, start a run, wait for it (CI path).

Talks to the KFP v2beta1 REST API through the kfp client (``kfp.Client``):

1. health check (``GET /apis/v2beta1/healthz``) so that a wrong host or a refused token
   fails fast with the reason;
2. the pipeline: created if no pipeline has that display name; the pipeline version is
   named after its content: ``<commit>-<hash>`` (:func:`default_version_name`: the git
   commit -- ``$GITHUB_SHA`` / ``$CI_COMMIT_SHA`` / ``git rev-parse`` -- or ``v<package
   version>``, then the first 10 hex digits of the SHA-256 of the YAML text uploaded), or
   ``--version``. A version of that name is reused only when its content is the same (the
   hash kept in its description, else its ``pipeline_spec``); other content under that name
   is refused (:class:`VersionClash`) unless ``replace`` deletes it and uploads anew;
3. the experiment (created if missing) and a run of that version; ``no_cache`` uploads the
   spec with every task's ``cachingOptions.enableCache`` false (what kfp's
   ``enable_caching=False`` does, :mod:`kfp.client.client` ``_override_caching_options``,
   but in every DAG and in the version itself: kfp 2.17's ``run_pipeline`` drops
   ``enable_caching`` for a run of a pipeline version);
4. with ``--wait``: polls the run, prints each state change, and exits 0 on
   ``SUCCEEDED`` (printing each component task's output URIs and metrics, or that it was
   served from KFP's cache), 1 on ``FAILED``
   / ``CANCELED`` / ``SKIPPED`` / timeout, with one line per failed component task and its
   error, read from the task pod's log (:mod:`kfp_gpu.cluster.run_report`); 2 when every
   failed task refused its input.

Authentication: a bearer token (:func:`kfp_gpu.cluster.kfp_api.kfp_token`). TLS:
``--ssl-ca-cert`` or ``--insecure-skip-tls-verify``. The command line is
:mod:`kfp_gpu.cli.submit`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kfp_gpu import __version__
from kfp_gpu.cluster import kfp_api, run_report, run_tasks, task_logs, version_content
from kfp_gpu.compiler import compile as build_compile


class KfpUnreachable(ConnectionError):
    """No answer from the KFP API at all (the CLI exits 3)."""


class VersionClash(ValueError):
    """A pipeline version of that name holds other content (the CLI exits 2)."""


TERMINAL_STATES = {"SUCCEEDED", "FAILED", "SKIPPED", "CANCELED", "ERROR"}


def default_version_name(digest: str | None = None) -> str:
    """Version name: the git commit (CI variables first, then ``git``), else ``v<version>``;
    with ``digest`` (:func:`version_content.content_hash`) followed by ``-`` and its first
    :data:`version_content.HASH_DIGITS` hex digits, so that a recompiled pipeline gets a new
    version even at the same commit."""
    base = _source_name()
    return f"{base}-{digest[:version_content.HASH_DIGITS]}" if digest else base


def _source_name() -> str:
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
    #: The last ``get_run`` body (with --wait), for :mod:`kfp_gpu.cluster.run_report`.
    run: object = None
    #: What the run did: one line per failed component task, or the outputs.
    lines: list[str] = field(default_factory=list)


def _filter(name: str) -> str:
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name",
                                       "stringValue": name}]})


def ensure_pipeline_version(client, path: Path, pipeline_name: str, version_name: str,
                            echo: Callable[[str], None] = print,
                            namespace: str | None = None, *, docs: list | None = None,
                            digest: str | None = None,
                            replace: bool = False) -> tuple[str, str]:
    """Create the pipeline if missing and the named version if missing: (pipeline_id,
    version_id). ``namespace``: the pipeline is namespaced there (multi-user KFP); None =
    a shared pipeline. ``docs`` / ``digest``: the YAML documents of ``path`` and
    :func:`version_content.content_hash` of its text (read from ``path`` when not given).

    A version of that name with the same content (:func:`version_content.same_content`) is reused; with
    other content it is deleted and uploaded anew when ``replace``, else refused.

    Raises:
        VersionClash: the name is taken by other content and ``replace`` is False.
        RuntimeError: several pipelines have that display name.
    """
    if docs is None or digest is None:
        import yaml

        text = Path(path).read_text(encoding="utf-8")
        docs, digest = list(yaml.safe_load_all(text)), version_content.content_hash(text)
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
    short = digest[:version_content.HASH_DIGITS]
    if versions:
        existing = versions[0]
        same = version_content.same_content(existing, docs, digest)
        if same is None:  # a list without specs: ask for the version itself
            existing = client.get_pipeline_version(pipeline_id, existing.pipeline_version_id)
            same = version_content.same_content(existing, docs, digest)
        if same:
            echo(f"pipeline version {version_name} already uploaded with the same content "
                 f"(sha256 {short}), reusing it")
            return pipeline_id, existing.pipeline_version_id
        if not replace:
            raise VersionClash(
                f"pipeline version {version_name} of {pipeline_name} holds other content "
                f"than this upload (sha256 {short}); give another --version, "
                "or --replace to delete that version and upload this one")
        client.delete_pipeline_version(pipeline_id, existing.pipeline_version_id)
        echo(f"deleted pipeline version {version_name} ({existing.pipeline_version_id}): "
             "other content, --replace")
    v = client.upload_pipeline_version(
        str(path), version_name, pipeline_id=pipeline_id,
        description=f"kfp-gpu {__version__}; {version_content.CONTENT_MARK}{digest}")
    echo(f"uploaded pipeline version {version_name} ({v.pipeline_version_id}, sha256 {short})")
    return pipeline_id, v.pipeline_version_id


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
            rows = run_tasks.task_details(run)
            pods = [p for r in rows for p in r["pods"]]
            tasks = [r for r in rows if not run_tasks.is_internal(r["name"], pods)]
            if tasks:  # component tasks only, not Argo/KFP's own nodes
                finished = sum(r["state"] in TERMINAL_STATES for r in tasks)
                done = f" ({finished}/{len(tasks)} tasks finished)"
            echo(f"[{elapsed:7.1f}s] {state}{done}")
            last = state
        if state == "SUCCEEDED":
            return Outcome(run_id, url, state, 0, run=run)
        if state in TERMINAL_STATES:
            return Outcome(run_id, url, state, 1, run=run)
        if elapsed >= timeout:
            return Outcome(run_id, url, state, 1,
                           f"timed out after {timeout:g}s with the run still {state}", run=run)
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
    """``-p key=value`` items typed once: for a catalog pipeline by its parameter
    declaration, with its checks (:func:`kfp_gpu.catalog.arguments.checked`: ranges, a
    store URI's form; whether a store object exists is the task's to find, with the
    cluster's credentials and endpoint) and the check against the spec itself
    (:func:`kfp_gpu.catalog.params.check_against_spec`: fractional-eval's num_shards
    against the GPU fraction compiled into it); for any other compiled pipeline by the
    spec's parameter types.

    Raises:
        ValueError: unknown parameter, unparsable value or one outside its declared range,
            a malformed store URI, arguments the compiled spec cannot run.
    """
    from kfp_gpu.catalog import arguments as pipeline_args
    from kfp_gpu.catalog import discover
    from kfp_gpu.catalog import params as declared

    raw = pipeline_args.split_pairs(params or [])
    if name not in discover.PIPELINES:
        return pipeline_args.typed(raw, pipeline_args.types_of_spec(spec))
    args = pipeline_args.checked(name, raw)
    declared.check_against_spec(name, spec, args)
    return args


def log_reader(kubeconfig: str | None = None, context: str | None = None,
               namespace: str | None = None) -> tuple[task_logs.LogReader | None, str]:
    """``(reader, why)``: a :func:`kfp_gpu.cluster.task_logs.kube_log_reader` when a
    kubeconfig is at hand (``kubeconfig`` / ``$KUBECONFIG`` / ``~/.kube/config`` with
    ``context``, or the in-cluster service account; :func:`kfp_gpu.kube.api_client`), else
    None and why. The task pods' namespace: ``namespace`` (``--namespace``), else the
    kubeconfig context's, else ``kubeflow`` (KFP's single-user namespace)."""
    from kfp_gpu import kube

    try:
        api = kube.api_client(kubeconfig, context)
    except RuntimeError:
        return None, "no kubeconfig to read the task logs"
    ns = namespace or task_logs.kube_namespace(kubeconfig, context) or "kubeflow"
    return task_logs.kube_log_reader(api, ns), ""


def report(outcome: Outcome, docs: list | None,
           read_log: task_logs.LogReader | None, why: str = "") -> Outcome:
    """``outcome`` with :attr:`Outcome.lines` (and its exit status) from its last run body:
    the failed component tasks of a FAILED run (:func:`run_report.failure_report`: status 2
    when every one refused its input) or the outputs of a SUCCEEDED one
    (:func:`run_report.outputs_report`). Other states are left as they are."""
    if outcome.run is None:
        return outcome
    if outcome.state == "FAILED":
        rep = run_report.failure_report(outcome.run, docs, read_log, outcome.url, why)
        outcome.lines, outcome.code = rep.lines, rep.code
    elif outcome.state == "SUCCEEDED":
        outcome.lines = run_report.outputs_report(outcome.run, docs, read_log, outcome.url,
                                                  why).lines
    return outcome


def _check_backend(host: str, token: str | None, ssl_ca_cert: str | None, insecure: bool,
                   name: str, spec: dict, namespace: str | None,
                   echo: Callable[[str], None]) -> None:
    """healthz: reachable (else :class:`KfpUnreachable`), new enough for ``spec`` (else
    RuntimeError), and a namespace given for a multi-user KFP (else ValueError)."""
    health = kfp_api.kfp_health(host, token, ssl_ca_cert, not insecure)
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



def submit(pipeline: str, host: str, *, namespace: str | None = None,
           experiment: str = "kfp-gpu", params: list[str] | None = None,
           version: str | None = None, service_account: str | None = None,
           wait: bool = False, timeout: float = 3600, poll: float = 10,
           ssl_ca_cert: str | None = None, insecure_skip_tls_verify: bool = False,
           ui_host: str | None = None, token: str | None = None,
           replace: bool = False, no_cache: bool = False,
           kubeconfig: str | None = None, context: str | None = None,
           read_log: task_logs.LogReader | None = None,
           echo: Callable[[str], None] = print) -> Outcome:
    """Upload (a version named after its content) and run ``pipeline`` on the KFP at
    ``host``; with ``wait``, tell what the run did.

    ``replace``: a version of that name with other content is deleted and uploaded anew
    (else :class:`VersionClash`). ``no_cache``: every task's caching off in the uploaded
    spec (:func:`version_content.uncached`). ``read_log``: how task logs are read after the run
    (``(run_id, node_id) -> text``); None = :func:`log_reader` of ``kubeconfig`` /
    ``context``.

    Raises:
        ValueError: bad pipeline reference or parameters (before anything is uploaded);
            :class:`VersionClash`.
        KfpUnreachable: no answer from the KFP API (healthz).
        RuntimeError: the KFP API refused or failed a call (message has status and body),
            or its backend (healthz tag_name) is older than the pipeline needs.
    """
    import yaml

    path, name, spec = load_spec(pipeline)
    args = arguments(name, spec, params)
    text = Path(path).read_text(encoding="utf-8")
    docs = list(yaml.safe_load_all(text))
    if no_cache:
        docs = version_content.uncached(docs)
        text = yaml.safe_dump_all(docs, sort_keys=False)
    digest = version_content.content_hash(text)
    version = version or default_version_name(digest)
    token = token if token is not None else kfp_api.kfp_token()
    host = host.rstrip("/")

    _check_backend(host, token, ssl_ca_cert, insecure_skip_tls_verify, name, spec, namespace,
                   echo)

    # kfp_server_api comes with kfp: imported when the API is called.
    import kfp_server_api

    client = kfp_api.kfp_client(host, token=token, namespace=namespace,
                                ssl_ca_cert=ssl_ca_cert,
                                insecure_skip_tls_verify=insecure_skip_tls_verify,
                                ui_host=ui_host)
    try:
        with tempfile.TemporaryDirectory(prefix="kfp-gpu-submit-") as tmp:
            upload = Path(path)
            if no_cache:  # the uncached spec, under the pipeline file's name
                upload = Path(tmp) / Path(path).name
                upload.write_text(text, encoding="utf-8")
            pipeline_id, version_id = ensure_pipeline_version(
                client, upload, name, version, echo, namespace, docs=docs, digest=digest,
                replace=replace)
        exp = client.create_experiment(experiment, namespace=namespace)
        run_name = f"{name} {version} {time.strftime('%Y-%m-%d %H:%M:%S')}"
        run = client.run_pipeline(exp.experiment_id, run_name, params=args,
                                  pipeline_id=pipeline_id, version_id=version_id,
                                  service_account=service_account)
        url = run_report.ui_link(ui_host or host, run.run_id)
        echo(f"run {run.run_id} started" + (" (task caching off)" if no_cache else "")
             + f": {url}")
        if not wait:
            return Outcome(run.run_id, url, str(run.state or "PENDING"), 0)
        outcome = wait_for_run(client, run.run_id, url, timeout, poll, echo)
    except kfp_server_api.ApiException as e:
        body = (e.body or "").strip() if isinstance(e.body, str) else e.body
        raise RuntimeError(f"KFP API error: HTTP {e.status} {e.reason}: {body}") from None
    why = ""
    if read_log is None and outcome.state in ("FAILED", "SUCCEEDED"):
        read_log, why = log_reader(kubeconfig, context, namespace)
    return report(outcome, docs, read_log, why)
