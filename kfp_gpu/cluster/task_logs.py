"""What a KFP task pod's log says (pure, but for :func:`kube_log_reader`): the
:mod:`kfp_gpu.inputs.errors` record or the last error line of a failed task, the
:mod:`kfp_gpu.task_outputs` record or KFP's launcher's executor output of one that
succeeded. The log holds, in order, the component's own output, KFP's launcher lines
(glog) and Argo's executor lines (logrus); see the constants for each upstream source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from types import SimpleNamespace

from kfp_gpu import task_outputs
from kfp_gpu.inputs import errors

#: The annotation and label that tie a pod to its Argo node and KFP run (the recorded pods).
NODE_ID_ANNOTATION = "workflows.argoproj.io/node-id"
RUN_ID_LABEL = "pipeline/runid"
#: KFP's executor container (the launcher runs the component there).
CONTAINER = "main"
#: Lines of a pod's log read (the records are at the end of the component's output).
TAIL_LINES = 2000
#: What KFP's launcher logs after the component ran: ``glog.Infof("ExecutorOutput: %s",
#: prettyPrint(...))`` of the executor output file the kfp SDK wrote (its ``artifacts`` with
#: each output's ``uri`` and ``metadata``, its ``parameterValues``); kubeflow/pipelines
#: ``backend/src/v2/component/launcher_v2.go`` ``getExecutorOutputFile``.
EXECUTOR_OUTPUT = "] ExecutorOutput: "
#: A glog line (KFP's driver and launcher log through github.com/golang/glog):
#: ``Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg``, L the severity (I, W, E, F).
GLOG_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\s\]]+:\d+\] ?(.*)$")
#: Argo's executor in the same container: its logrus lines and, when the command failed, the
#: cobra error ``Error: exit status N`` (argoproj/argo-workflows ``cmd/argoexec``).
ARGO_LINE = re.compile(r'^(time="[^"]*" level=\w+ msg=|Error: exit status \d+$)')
#: KFP's launcher when the component's process exited non-zero (launcher-v2 ``main.go``).
EXIT_STATUS = re.compile(r"^failed to execute component: exit status \d+$")
#: An error line of the component itself: the last line of a Python traceback
#: (``ValueError: ...``, ``kfp_gpu.inputs.errors.EmptyInput: ...``), the CLI's one line
#: (``error: ...``, kfp_gpu/cli/errors.py ``report``), a logging record at ERROR or above.
ERROR_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|"
                        r"Failed|Failure|Fault)(?::\s.*)?|error: .+|(?:ERROR|CRITICAL)\b.*)$")
class LogUnavailable(Exception):
    """A task pod's log cannot be read; the message says why in a few words."""


#: ``read_log(run_id, node_id) -> log text``; raises :class:`LogUnavailable`.
LogReader = Callable[[str, str], str]


def error_line_of(log: str) -> str:
    """The line of a failed task's log that says what went wrong, when no record does
    (pure). Argo's and KFP's own lines (:data:`ARGO_LINE`, :data:`GLOG_LINE`) come after
    the component's output and are passed over: the last error line of the component
    itself (:data:`ERROR_LINE`: a traceback's exception, ``error: ...``), else the last
    message KFP's driver or launcher logged at ERROR/FATAL other than the bare ``exit
    status N`` (an artifact upload that failed, inputs not resolved), else the
    component's last line, else that bare status, else the last line; "" for an empty
    log."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    own = [ln for ln in lines if not (GLOG_LINE.match(ln) or ARGO_LINE.match(ln))]
    kfp = [m.group(2).strip() for ln in lines
           if (m := GLOG_LINE.match(ln)) and m.group(1) in "EF" and m.group(2).strip()]
    said = [m for m in kfp if not EXIT_STATUS.match(m)]
    return next((ln for ln in reversed(own) if ERROR_LINE.match(ln)), "") or \
        (said[-1] if said else "") or (own[-1] if own else "") or \
        (kfp[-1] if kfp else "") or (lines[-1] if lines else "")


def message_of(log: str) -> tuple[str, bool | None]:
    """``(message, input_error)`` of a failed task's log (pure): the last
    :mod:`kfp_gpu.inputs.errors` record (its message, and ``input`` when it names one),
    else :func:`error_line_of` with ``input_error`` None (no record: a task that failed
    before it could write one, or outside the component's body)."""
    for line in reversed(log.splitlines()):
        rec = errors.record_of(line)
        if rec is not None:
            msg = str(rec["message"])
            if rec.get("input") and str(rec["input"]) not in msg:
                msg += f" (input: {rec['input']})"
            return msg, bool(rec.get("input_error"))
    return (error_line_of(log) or "the log is empty"), None


def environment_of(log: str) -> bool:
    """Whether the last :mod:`kfp_gpu.inputs.errors` record in a failed task's log says its
    environment failed it (the record's ``environment``: a store that does not answer, a
    full disk); False without a record (pure)."""
    for line in reversed(log.splitlines()):
        rec = errors.record_of(line)
        if rec is not None:
            return bool(rec.get("environment"))
    return False


def executor_output_of(log: str) -> dict | None:
    """The executor output KFP's launcher logged last in a task's log
    (:data:`EXECUTOR_OUTPUT`: the JSON object that follows, over as many lines as it
    takes), or None when there is none or it does not parse (pure)."""
    at = log.rfind(EXECUTOR_OUTPUT)
    if at < 0:
        return None
    try:
        found, _ = json.JSONDecoder().raw_decode(log[at + len(EXECUTOR_OUTPUT):].lstrip())
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _from_executor_output(found: dict, outputs: dict[str, str] | None) -> dict | None:
    """A :mod:`kfp_gpu.task_outputs` record of an executor output: each artifact's first
    ``uri``, the numeric ``metadata`` of the outputs whose schema (``outputs``: name ->
    ``schemaTitle``, the spec's) is :data:`kfp_gpu.task_outputs.METRICS_SCHEMA`, the
    ``parameterValues``; only the outputs the spec declares when it is given (the launcher
    may add its log artifact). None when it names no output."""
    arts = {}
    for name, listed in (found.get("artifacts") or {}).items():
        first = next(iter((listed or {}).get("artifacts") or []), None)
        if not isinstance(first, dict) or (outputs is not None and name not in outputs):
            continue
        arts[name] = SimpleNamespace(uri=first.get("uri", ""),
                                     schema_title=(outputs or {}).get(name),
                                     metadata=first.get("metadata") or {})
    values = found.get("parameterValues") or found.get("parameter_values") or {}
    if not arts and not values:
        return None
    return task_outputs.record_of(task_outputs.record(arts, values))


def outputs_of(log: str, outputs: dict[str, str] | None = None) -> dict | None:
    """What a task that succeeded produced, from its log (pure): the last
    :mod:`kfp_gpu.task_outputs` record (a kfp-gpu component's own), else the executor
    output KFP's launcher logged (:func:`executor_output_of`; ``outputs``: the task's
    output artifacts by name -> ``schemaTitle`` from the spec, for which are metrics and
    which to show), in the record's shape ``{"artifacts", "metrics", "values"}``; None when
    neither is there."""
    for line in reversed(log.splitlines()):
        rec = task_outputs.record_of(line)
        if rec is not None:
            return rec
    found = executor_output_of(log)
    return _from_executor_output(found, outputs) if found is not None else None


def kube_log_reader(api_client, namespace: str, container: str = CONTAINER,
                    tail_lines: int = TAIL_LINES) -> LogReader:
    """A :data:`LogReader` over the Kubernetes API (``kubernetes`` client ``CoreV1Api``).

    The run's pods are listed once per run (label ``pipeline/runid=<run_id>``) to map each
    Argo node id to its pod name (annotation ``workflows.argoproj.io/node-id``); a node id
    with no such pod is tried as the pod name itself (Argo ``POD_NAMES=v1``). Then
    ``GET .../pods/<name>/log?container=main&tailLines=<tail_lines>``.

    Raises (from the reader): :class:`LogUnavailable` with the HTTP status and reason (a pod
    garbage-collected after the run reads ``pod <name> not found``) or the connection error.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError  # the kubernetes client's transport

    core = client.CoreV1Api(api_client)
    pods_of: dict[str, dict[str, str]] = {}

    def read(run_id: str, node_id: str) -> str:
        if run_id not in pods_of:
            try:
                items = core.list_namespaced_pod(
                    namespace, label_selector=f"{RUN_ID_LABEL}={run_id}").items or []
            except (ApiException, OSError, ValueError):
                items = []  # e.g. no list permission: try the node id as the pod name
            except HTTPError as e:  # no connection (MaxRetryError, ...)
                raise LogUnavailable(f"Kubernetes API unreachable: {type(e).__name__}") from e
            pods_of[run_id] = {
                (p.metadata.annotations or {}).get(NODE_ID_ANNOTATION, ""): p.metadata.name
                for p in items}
        name = pods_of[run_id].get(node_id, node_id)
        try:
            return core.read_namespaced_pod_log(name, namespace, container=container,
                                                tail_lines=tail_lines) or ""
        except ApiException as e:
            if e.status == 404:
                raise LogUnavailable(f"pod {name} not found in namespace {namespace} "
                                     "(garbage-collected?)") from None
            raise LogUnavailable(f"reading the log of pod {name}: HTTP {e.status} "
                                 f"{e.reason}") from None
        except HTTPError as e:
            raise LogUnavailable(f"Kubernetes API unreachable: {type(e).__name__}") from e

    return read


def kube_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace of the kubeconfig context in use (``--context`` or the current one),
    or None when it names none or there is no kubeconfig (kubernetes client
    ``config.list_kube_config_contexts``)."""
    from kubernetes import config

    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # noqa: BLE001 - no kubeconfig, or one the client cannot read
        return None
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) \
        if context else active
    return ((chosen or {}).get("context") or {}).get("namespace") or None
