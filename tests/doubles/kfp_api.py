"""A local double of the Kubeflow Pipelines v2beta1 REST API for ``kfp-gpu submit``.

Real HTTP on 127.0.0.1 (random port). It answers as the recorded real KFP 2.17.0 backend
did (the recorded KFP 2.17.0 answers, data folder ``kfp-2.17.0/api``;
tests/harness/test_kfp_double_replay.py replays every recorded request against it and
docs/fidelity.md lists the verdicts): status, content type, body keys and the message
texts, ids and names filled in.

- ``GET /apis/v2beta1/healthz`` -> ``{commit_sha, tag_name, multi_user, pipeline_store}``.
- Error bodies. The grpc-gateway endpoints (runs, experiments, listings) answer
  ``{"code", "message", "details": [{"@type": "type.googleapis.com/google.rpc.Status",
  "code", "message"}]}`` -- no ``error`` key; ``message`` is the server's wrapped chain,
  ``details[0].message`` its innermost part. The upload endpoints answer
  ``{"error_message", "error_details"}`` (``error_details``: the message, then a Go stack
  trace), ``application/json`` once the handler has set it, else ``text/plain;
  charset=utf-8`` (Go sniffs the body: an unknown ``pipelineid`` at upload_version).
- Auth (when :attr:`FakeKfp.tokens` is set): no / unknown bearer token -> ``401``
  (gRPC code 16 UNAUTHENTICATED); a token in :attr:`FakeKfp.read_only_tokens` may GET but
  gets ``403`` (code 7 PERMISSION_DENIED) on writes.
- Pipelines: ``GET /apis/v2beta1/pipelines`` (``filter`` = JSON Filter, EQUALS on
  ``display_name``/``name``; no match -> ``{}``), ``POST /apis/v2beta1/pipelines/upload``
  (multipart field ``uploadfile``; query ``name``, ``description``, ``namespace``; creates
  the pipeline AND its first version, named like the pipeline; a taken name -> ``409``;
  a file that is no pipeline IR -> ``400`` ``unknown template format``), ``GET
  /apis/v2beta1/pipelines/<id>/versions`` (filter; unknown pipeline -> ``404`` code 5),
  ``POST /apis/v2beta1/pipelines/upload_version`` (query ``name``, ``pipelineid``; a taken
  version name -> ``409``; unknown pipeline -> ``400`` text/plain). A version's
  ``pipeline_spec`` is ``{"pipeline_spec", "platform_spec"}`` when the file has a platform
  document, else the pipeline spec. Empty ``description``/``namespace`` are left out.
- Experiments: list with filter / ``namespace``, create (``display_name`` unique per
  namespace, else ``409`` code 6); ``last_run_created_at`` 1970-01-01 until a run.
- Runs: ``POST /apis/v2beta1/runs``: unknown experiment -> ``404`` code 5; unknown pipeline
  version -> ``500`` code 13 (details ``Internal Server Error``); then the parameters are
  checked as upstream ``validatePipelineJobInputs`` does (a required one missing, a value
  of the wrong JSON type, one the root does not declare -> ``400`` code 3). The answer is
  the fresh run: ``PENDING``, ``finished_at`` ``1970-01-01T00:00:00Z``, no
  ``run_details``, no ``error``. ``GET /apis/v2beta1/runs/<id>``: the state advances
  through :attr:`FakeKfp.script` (``(state, seconds)`` pairs; the last state stays).
  ``POST /apis/v2beta1/runs/<id>:terminate`` -> ``{}``; the run goes ``CANCELING`` for
  :attr:`FakeKfp.terminate_seconds`, then ``FAILED`` (history PENDING, RUNNING, CANCELING,
  FAILED, as recorded).
- ``run_details.task_details`` (from RUNNING on) are the Argo workflow's nodes as the
  persistence agent reports them: the workflow ``<pipeline>-<5 chars>``, ``root-driver``,
  ``root``, per container task ``<task>-driver``, ``<task>`` and ``executor``, one node
  per importer / loop task; ``child_tasks[].pod_name`` holds the Argo node IDs of the
  node's children (``<workflow>-<fnv32a of the node name>``), not pod names; a task served
  from the cache is SUCCEEDED with its ``executor`` SKIPPED, both starting and ending at
  the same second (``start_time``/``end_time`` on a clock of whole seconds per pod, see
  :meth:`FakeKfp._argo_nodes`). A FAILED run has no ``error`` and no task has one: :attr:`FakeKfp.failed_task` (a component task, or
  ``<task>-driver`` for a failed driver) is FAILED, the tasks depending on it are left
  without a ``state``; :meth:`FakeKfp.pod_of` names the pod that ran a task's code and
  :meth:`FakeKfp.node_of` the node ID its ``child_tasks`` list.

Upstream files followed (kubeflow/pipelines; the release-2.17 line numbers of the upload
server are those of the recorded Go stack traces):

- ``backend/api/v2beta1/run.proto``: ``Run`` field names, ``RuntimeState``,
  ``PipelineTaskDetail`` (``child_tasks`` of ``ChildTask{pod_name}``).
- ``backend/src/apiserver/server/pipeline_upload_server.go``: multipart field
  ``uploadfile``, query keys, ``writeErrorToResponse`` (``apiError`` body, no content type
  set by it), the 409 / 400 texts.
- ``backend/src/apiserver/template/v2_template.go`` ``validatePipelineJobInputs``: the
  parameter checks and texts; ``backend/src/apiserver/resource/resource_manager.go``
  ``fetchTemplateFromPipelineSpec``: the version's own pipeline id is used.
- argoproj/argo-workflows ``workflow/util/pod_name.go`` (``GeneratePodName``, pod names
  v2: ``<workflow>-<template>-<fnv32a of the node name>``) and ``workflow/controller``'s
  node IDs (``<workflow>-<same hash>``).

Deviation kept (not recorded: the recordings are single-user, without auth): a refused
token at the upload endpoints is ``401`` / ``403`` with the upload body, where upstream
answers 400 from ``canUploadVersionedPipeline``.

Every request is recorded in :attr:`FakeKfp.requests` (method, path, query).
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Self
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.doubles.http import JsonHandler, LoopbackServer

API = "/apis/v2beta1"
#: An unset protobuf Timestamp as the gateway writes it (``finished_at`` of a live run).
EPOCH = "1970-01-01T00:00:00Z"
#: healthz ``commit_sha`` of the recorded 2.17.0 server.
COMMIT_2_17_0 = "4a3592cb2dd0a91a4652ab93893ec8beda1f3158"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")
_STATUS_TYPE = "type.googleapis.com/google.rpc.Status"
#: Kubernetes' generateName alphabet (apiserver ``names.SimpleNameGenerator``).
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_GO_TAIL = ("net/http.HandlerFunc.ServeHTTP\n\tnet/http/server.go:2286\n"
            "github.com/gorilla/mux.(*Router).ServeHTTP\n\tgithub.com/gorilla/mux@v1.8.1/mux.go:212\n"
            "net/http.serverHandler.ServeHTTP\n\tnet/http/server.go:3311\n"
            "net/http.(*conn).serve\n\tnet/http/server.go:2067\n"
            "runtime.goexit\n\truntime/asm_amd64.s:1771")
_UPLOAD_SERVER = "github.com/kubeflow/pipelines/backend/src/apiserver/server"
_RUN_INPUTS = ("Failed to create a new run: Failed to generate the ExecutionSpec: invalid "
               "pipeline job inputs: Invalid input error: ")
#: Upstream's wrong-type texts by parameterType (v2_template.go validatePipelineJobInputs).
_TYPE_TEXT = {
    "NUMBER_DOUBLE": "requires type double or integer, but the parameter value is not of "
                     "number value type",
    "NUMBER_INTEGER": "requires type double or integer, but the parameter value is not of "
                      "number value type",
    "STRING": "requires type string, but the input parameter is not of string value type",
    "BOOLEAN": "requires type bool, but the input parameter is not of bool value type",
    "LIST": "requires type list, but the input parameter is not of list value type",
    "STRUCT": "requires type struct, but the input parameter is not of struct value type",
}


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def fnv32a(text: str) -> int:
    """32-bit FNV-1a of ``text`` (UTF-8), Go's ``hash/fnv.New32a`` as Argo hashes node names."""
    h = 0x811C9DC5
    for b in text.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def argo_node_id(workflow: str, node_name: str) -> str:
    """Argo node ID ``<workflow>-<fnv32a(node name)>`` (what KFP reports as ``pod_name`` in
    ``child_tasks``); ``node_name`` is the dotted path, e.g. ``wf.root.prep-text.executor``.
    The workflow's own node has the workflow's name."""
    return workflow if node_name == workflow else f"{workflow}-{fnv32a(node_name)}"


def argo_pod_name(workflow: str, node_name: str, template: str) -> str:
    """Pod name of a node, Argo pod names v2 (``GeneratePodName``):
    ``<workflow>-<template>-<fnv32a(node name)>``, e.g. ``...-system-container-impl-N``."""
    return f"{workflow}-{template}-{fnv32a(node_name)}"


class ApiError(Exception):
    """A grpc-gateway error: HTTP ``http``, gRPC ``code``, the wrapped ``message`` and the
    innermost ``detail`` (``details[0].message``; the message itself when not given)."""

    def __init__(self, http: int, code: int, message: str, detail: str | None = None):
        super().__init__(message)
        self.http, self.code, self.message = http, code, message
        self.detail = message if detail is None else detail

    def body(self) -> dict:
        return {"code": self.code, "message": self.message,
                "details": [{"@type": _STATUS_TYPE, "code": self.code,
                             "message": self.detail}]}


class UploadError(Exception):
    """An upload endpoint's error (``writeErrorToResponse``): HTTP ``http``, ``message``,
    the Go frames ``(function, line)`` of the trace, and whether the handler had set the
    JSON content type yet (``json_type``; else Go sniffs ``text/plain``)."""

    def __init__(self, http: int, message: str, frames: tuple, json_type: bool = True):
        super().__init__(message)
        self.http, self.message, self.frames, self.json_type = http, message, frames, json_type

    def body(self) -> dict:
        trace = "".join(f"{_UPLOAD_SERVER}.(*PipelineUploadServer).{fn}\n\t{_UPLOAD_SERVER}/"
                        f"pipeline_upload_server.go:{line}\n" for fn, line in self.frames)
        return {"error_message": self.message,
                "error_details": f"{self.message}\n{trace}{_GO_TAIL}"}


# Frames of the recorded traces (release-2.17 pipeline_upload_server.go).
_UP = (("uploadPipeline", 185), ("UploadPipeline", 86))
_UP_BAD = (("uploadPipeline", 190), ("UploadPipeline", 86))
_UPV = (("uploadPipelineVersion", 340), ("UploadPipelineVersion", 238))
_UPV_NS = (("uploadPipelineVersion", 293), ("UploadPipelineVersion", 238))


def _spec_docs(raw: bytes, frames: tuple) -> tuple[dict, dict | None]:
    """(pipeline spec, platform spec or None) of an uploaded file; UploadError 400
    ``unknown template format`` when it is no pipeline IR (template.New)."""
    try:
        docs = [d for d in yaml.safe_load_all(raw.decode()) if d is not None]
    except (yaml.YAMLError, UnicodeDecodeError):
        docs = []
    spec = next((d for d in docs if isinstance(d, dict) and "pipelineInfo" in d
                 and "root" in d), None)
    if spec is None:
        raise UploadError(400, "unknown template format", frames)
    if spec.get("schemaVersion") != "2.1.0":
        raise UploadError(400, "KFP only supports schema version 2.1.0, but the pipeline "
                          f"spec has version {spec.get('schemaVersion', '')}", frames)
    platform = next((d for d in docs if isinstance(d, dict) and "platforms" in d), None)
    return spec, platform


def _shown(obj: dict) -> dict:
    """The API view of a stored object: private ``_`` keys and empty optional strings out."""
    return {k: v for k, v in obj.items() if not k.startswith("_")
            and not (k in ("description", "namespace") and not v)}


@dataclass
class FakeKfp:
    """The double.

    ``script``: run states over time, e.g. ``[("PENDING", .1), ("RUNNING", .2),
    ("SUCCEEDED", 0)]``. ``failed_task``: the component task that fails when a run ends
    FAILED (or is terminated), or ``<task>-driver`` for a failed driver; a name the
    pipeline lacks means its first container task. ``cached_tasks``: container tasks served
    from KFP's cache (SUCCEEDED at once, their ``executor`` SKIPPED) when their
    ``cachingOptions.enableCache`` is on (an importer always runs its pod). ``terminate_seconds``: how long a terminated
    run stays CANCELING.
    """

    tokens: set = field(default_factory=set)
    read_only_tokens: set = field(default_factory=set)
    multi_user: bool = False
    #: healthz ``tag_name`` (the backend release; the pinned SDK's by default).
    tag_name: str = "2.17.0"
    commit_sha: str = COMMIT_2_17_0
    script: list = field(default_factory=lambda: [("PENDING", 0.1), ("RUNNING", 0.3),
                                                  ("SUCCEEDED", 0)])
    failed_task: str = "train-text-classifier"
    cached_tasks: set = field(default_factory=set)
    terminate_seconds: float = 0.1
    pipelines: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    experiments: dict = field(default_factory=dict)
    runs: dict = field(default_factory=dict)
    requests: list = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        self._server = LoopbackServer(_Handler, "kfp", self)
        return self

    def __exit__(self, *exc) -> None:
        self._server.close()

    @property
    def url(self) -> str:
        return self._server.url

    # ------------------------------------------------------------------ semantics
    @staticmethod
    def _matches(obj: dict, flt: str | None) -> bool:
        if not flt:
            return True
        for p in json.loads(flt).get("predicates", []):
            op = p.get("operation", "EQUALS")
            if op not in ("EQUALS", 1):
                raise ApiError(400, 3, f"unsupported filter operation {op}")
            value = obj.get(p["key"], obj.get("display_name"))
            if value != p.get("stringValue", p.get("string_value")):
                return False
        return True

    def create_pipeline(self, name: str, raw: bytes, namespace: str = "",
                        description: str = "") -> dict:
        """Upload: the pipeline and its first version (both named ``name``); the API view."""
        spec, platform = _spec_docs(raw, _UP_BAD)
        name = name or spec["pipelineInfo"]["name"]
        if any(p["name"] == name and p["namespace"] == namespace
               for p in self.pipelines.values()):
            raise UploadError(409, "Failed to create a pipeline and a pipeline version", _UP)
        pid = str(uuid.uuid4())
        p = {"pipeline_id": pid, "display_name": name, "name": name,
             "description": description, "created_at": _ts(time.time()),
             "namespace": namespace}
        self.pipelines[pid] = p
        self._add_version(pid, name, spec, platform, description)
        return _shown(p)

    def create_version(self, pid: str, name: str, raw: bytes, description: str = "") -> dict:
        """Upload_version: a version of pipeline ``pid``; the API view."""
        if pid not in self.pipelines:
            raise UploadError(400, "Failed to create a pipeline version", _UPV_NS,
                              json_type=False)
        spec, platform = _spec_docs(raw, _UPV)
        name = name or spec["pipelineInfo"]["name"]
        if any(v["name"] == name for v in self.versions.values() if v["pipeline_id"] == pid):
            raise UploadError(409, "Failed to create a pipeline version", _UPV)
        return _shown(self._add_version(pid, name, spec, platform, description))

    def _add_version(self, pid, name, spec, platform, description) -> dict:
        vid = str(uuid.uuid4())
        shown = ({"pipeline_spec": spec, "platform_spec": platform} if platform else spec)
        v = {"pipeline_id": pid, "pipeline_version_id": vid, "display_name": name,
             "name": name, "description": description, "created_at": _ts(time.time()),
             "pipeline_spec": shown, "_ir": spec}
        self.versions[vid] = v
        return v

    def create_experiment(self, body: dict) -> dict:
        name, ns = body.get("display_name", ""), body.get("namespace", "") or ""
        if not name:
            raise ApiError(400, 3, "Failed to create a experiment: Invalid input error: "
                           "Experiment name is empty. Please specify a valid experiment name",
                           "Experiment name is empty. Please specify a valid experiment name")
        if any(e["display_name"] == name and e["namespace"] == ns
               for e in self.experiments.values()):
            inner = (f"Failed to create a new experiment. The name {name} already exists. "
                     "Please specify a new name")
            raise ApiError(409, 6, f"Failed to create a experiment: Already exist error: "
                           f"{inner}", inner)
        eid = str(uuid.uuid4())
        e = {"experiment_id": eid, "display_name": name,
             "description": body.get("description") or "", "created_at": _ts(time.time()),
             "namespace": ns, "storage_state": "AVAILABLE", "last_run_created_at": EPOCH}
        self.experiments[eid] = e
        return _shown(e)

    @staticmethod
    def _check_inputs(ir: dict, params: dict) -> None:
        """Upstream ``validatePipelineJobInputs`` (v2_template.go), in its order: each
        declared parameter (missing and required, or of the wrong JSON type), then the
        undeclared ones."""
        declared = ir["root"].get("inputDefinitions", {}).get("parameters", {})
        for name, d in declared.items():
            if name not in params:
                if not d.get("isOptional") and "defaultValue" not in d:
                    inner = (f"parameter {name} is not optional, yet has neither default "
                             "value nor user provided value")
                    raise ApiError(400, 3, _RUN_INPUTS + inner, inner)
                continue
            value, kind = params[name], d.get("parameterType")
            ok = {"NUMBER_DOUBLE": (int, float), "NUMBER_INTEGER": (int, float),
                  "STRING": str, "BOOLEAN": bool, "LIST": list, "STRUCT": dict}.get(kind)
            if ok is None or not isinstance(value, ok) or (
                    isinstance(value, bool) and kind.startswith("NUMBER")):
                inner = f"input parameter {name} {_TYPE_TEXT.get(kind, 'requires type unknown')}"
                raise ApiError(400, 3, _RUN_INPUTS + inner, inner)
        extra = [n for n in params if n not in declared]
        if extra:
            inner = f"parameter(s) provided are not required by pipeline: {', '.join(extra)}"
            raise ApiError(400, 3, _RUN_INPUTS + inner, inner)

    def create_run(self, body: dict) -> dict:
        eid = body.get("experiment_id", "")
        if eid not in self.experiments:
            raise ApiError(404, 5, "Failed to create a new run: Failed to create a run due to "
                           "invalid experimentId and namespace combination: Failed to fetch "
                           f"namespace for experiment {eid}: Failed to fetch namespace from "
                           f"experiment {eid}: ResourceNotFoundError: Experiment {eid} not "
                           "found", f"Experiment {eid} not found")
        ref = dict(body.get("pipeline_version_reference") or {})
        inline = body.get("pipeline_spec")
        if ref:
            vid = ref.get("pipeline_version_id") or ""
            if not vid:  # the pipeline's latest version
                mine = [v for v in self.versions.values()
                        if v["pipeline_id"] == ref.get("pipeline_id")]
                vid = mine[-1]["pipeline_version_id"] if mine else ""
            v = self.versions.get(vid)
            if v is None:
                raise ApiError(
                    500, 13, "Failed to create a new run: InternalServerError: Failed to "
                    "create a run due to error fetching manifest: Failed to fetch a template "
                    "due to error retrieving pipeline version: Failed to fetch a pipeline "
                    f"version and its manifest from pipeline version {vid}: Failed to get a "
                    f"pipeline version with id {vid}: ResourceNotFoundError: PipelineVersion "
                    f"{vid} not found", "Internal Server Error")
            ref = {"pipeline_id": v["pipeline_id"], "pipeline_version_id": vid}
            ir = v["_ir"]
        elif isinstance(inline, dict):
            ir = inline.get("pipeline_spec", inline)
        else:
            raise ApiError(400, 3, "Failed to create a new run: Invalid input error: Failed to "
                           "fetch a template with an empty pipeline spec manifest",
                           "Failed to fetch a template with an empty pipeline spec manifest")
        config = dict(body.get("runtime_config") or {})
        params = config.get("parameters") or {}
        self._check_inputs(ir, params)
        rid, now = str(uuid.uuid4()), time.time()
        workflow = ir["pipelineInfo"]["name"] + "-" + "".join(
            _NAME_CHARS[b % len(_NAME_CHARS)] for b in hashlib.sha256(rid.encode()).digest()[:5])
        shown_config = {}
        if params:
            shown_config["parameters"] = dict(sorted(params.items()))
        if config.get("pipeline_root"):
            shown_config["pipeline_root"] = config["pipeline_root"]
        run = {"experiment_id": eid, "run_id": rid, "display_name": body.get("display_name", ""),
               "description": body.get("description") or "", "storage_state": "AVAILABLE"}
        if ref:
            run["pipeline_version_reference"] = ref
        else:
            run["pipeline_spec"] = inline
        if shown_config:
            run["runtime_config"] = shown_config
        run.update({"service_account": body.get("service_account") or "pipeline-runner",
                    "created_at": _ts(now), "scheduled_at": _ts(now),
                    "_t0": time.monotonic(), "_wall0": now, "_ir": ir,
                    "_workflow": workflow, "_terminated": None})
        self.runs[rid] = run
        self.experiments[eid]["last_run_created_at"] = _ts(now)
        return self.view_run(rid)

    def _run(self, rid: str, verb: str = "get") -> dict:
        run = self.runs.get(rid)
        if run is None:
            raise ApiError(404, 5, f"Failed to {verb} a run: Failed to fetch run {rid}: "
                           f"ResourceNotFoundError: Run {rid} not found", f"Run {rid} not found")
        return run

    def terminate_run(self, rid: str) -> dict:
        """``:terminate``: a live run goes CANCELING, then FAILED; a finished one stays."""
        run = self._run(rid, "terminate")
        if run["_terminated"] is None and self._history(run)[-1][0] not in TERMINAL:
            run["_terminated"] = time.monotonic() - run["_t0"]
        return {}

    def _history(self, run: dict) -> list[tuple[str, float]]:
        """``(state, seconds after creation)`` reached so far."""
        elapsed = time.monotonic() - run["_t0"]
        stop = run["_terminated"]
        horizon = elapsed if stop is None else min(elapsed, stop)
        history, t = [], 0.0
        for s, secs in self.script:
            history.append((s, t))
            if secs == 0 or horizon < t + secs:
                break
            t += secs
        if stop is not None and history[-1][0] not in TERMINAL:
            history.append(("CANCELING", stop))
            if elapsed >= stop + self.terminate_seconds:
                history.append(("FAILED", stop + self.terminate_seconds))
        return history

    def view_run(self, rid: str) -> dict:
        """GET run: the API view now (state from :attr:`script` and any terminate)."""
        run = self._run(rid)
        history = self._history(run)
        state, t_end = history[-1]
        out = _shown(run)
        finished = _ts(run["_wall0"] + t_end) if state in TERMINAL else EPOCH
        out.update({"finished_at": finished, "state": state})
        if any(s != "PENDING" for s, _ in history):
            out["run_details"] = {"task_details": self._task_details(run, state, finished)}
        out["state_history"] = [{"update_time": _ts(run["_wall0"] + t), "state": s}
                                for s, t in history]
        return out

    # ------------------------------------------------------------ Argo nodes, pods
    @staticmethod
    def _tasks(ir: dict) -> tuple[list[str], dict, dict]:
        """(root tasks in dependency order, their dependencies, their kind: container /
        importer / dag)."""
        tasks = ir["root"].get("dag", {}).get("tasks", {})
        deps = {t: [d for d in (v.get("dependentTasks") or []) if d in tasks]
                for t, v in tasks.items()}
        order: list[str] = []
        while len(order) < len(tasks):
            ready = [t for t in tasks if t not in order and all(d in order for d in deps[t])]
            if not ready:  # a cycle: not a pipeline KFP would accept; keep the rest as is
                ready = [t for t in tasks if t not in order]
            order.append(ready[0])
        kinds = {}
        executors = ir.get("deploymentSpec", {}).get("executors", {})
        for t, v in tasks.items():
            comp = ir.get("components", {}).get(v.get("componentRef", {}).get("name"), {})
            if "dag" in comp:
                kinds[t] = "dag"
            elif "importer" in executors.get(comp.get("executorLabel"), {}):
                kinds[t] = "importer"
            else:
                kinds[t] = "container"
        return order, deps, kinds

    def _failing(self, order: list[str], kinds: dict) -> tuple[str, bool]:
        """(the task that fails, whether it is its driver)."""
        name = self.failed_task
        if name in order:
            return name, False
        if name.endswith("-driver") and name[:-len("-driver")] in order:
            return name[:-len("-driver")], True
        return next((t for t in order if kinds[t] == "container"), order[0]), False

    def _outcomes(self, ir: dict, state: str) -> dict:
        """How each root task ended up for a run in ``state``: running / ok / cached /
        failed / driver-failed / omitted; a task not started yet is left out."""
        order, deps, kinds = self._tasks(ir)
        outcome = {}
        if state not in TERMINAL:
            outcome = {t: "running" for t in order if not deps[t]}
        elif state == "SUCCEEDED":
            outcome = {t: "ok" for t in order}
        elif order:
            bad, driver = self._failing(order, kinds)
            below = {bad}
            for t in order:
                if any(d in below for d in deps[t]):
                    below.add(t)
            for t in order:
                outcome[t] = (("driver-failed" if driver else "failed") if t == bad
                              else "omitted" if t in below else "ok")
        tasks = ir["root"].get("dag", {}).get("tasks", {})
        for t, o in outcome.items():
            if o == "ok" and t in self.cached_tasks and kinds[t] == "container" and (
                    tasks[t].get("cachingOptions") or {}).get("enableCache"):
                outcome[t] = "cached"
        return outcome

    #: Seconds on the nodes' clock (:meth:`_argo_nodes`): a driver pod, a task's executor
    #: pod, an importer pod, a loop or group node, the root driver.
    DRIVER_S, EXECUTOR_S, IMPORTER_S, LOOP_S, ROOT_DRIVER_S = 3, 5, 4, 9, 3

    def _argo_nodes(self, ir: dict, wf: str, state: str) -> list[tuple]:
        """The workflow's nodes: ``(display name, node name, state or None, states of its
        history (None: an entry without one), names of its child nodes, start, end)``.

        ``start``/``end``: seconds after the run's creation on the nodes' own clock (None:
        not finished), one task after the other in dependency order, so that a pod takes
        whole seconds as on a real backend while the double's run ends in a fraction of
        one. A task served from the cache and its skipped ``executor`` start and end at
        the same second: Argo makes both nodes and finishes them in one pass of its
        controller (argo-workflows ``workflow/controller/dag.go`` ``executeDAGTask``, a
        skipped node's ``FinishedAt`` = its ``StartedAt`` in ``operator.go``
        ``initializeNode``; recorded api/27: ``prep-images``). Omitted nodes too (recorded
        api/24, 26, 27), at the time the failure ended the run. An importer is a pod that
        runs whether or not caching is on (kubeflow/pipelines
        ``backend/src/v2/compiler/argocompiler/importer.go``: no ``when`` on it).
        """
        order, deps, kinds = self._tasks(ir)
        dependents = {t: [u for u in order if t in deps[u]] for t in order}
        live = state not in TERMINAL
        outcome = self._outcomes(ir, state)

        def node(t: str, part: str = "") -> str:
            return f"{wf}.root.{t}{part}"

        def entry(t: str) -> str:
            return node(t, "-driver") if kinds[t] == "container" else node(t)

        # When each task's work is done (its executor, importer or loop node; its driver
        # when that failed), on the nodes' clock; omitted nodes end when the failure did.
        done: dict[str, float] = {}
        root_start = float(self.ROOT_DRIVER_S)
        for t in order:
            o = outcome.get(t)
            begin = max([done.get(d, root_start) for d in deps[t]] or [root_start])
            if o in ("ok", "failed"):
                done[t] = begin + {"container": self.DRIVER_S + self.EXECUTOR_S,
                                   "importer": self.IMPORTER_S, "dag": self.LOOP_S}[kinds[t]]
            elif o in ("cached", "driver-failed"):
                done[t] = begin + self.DRIVER_S
        failed_at = max(done.values(), default=root_start)
        end_all = None if live else failed_at

        nodes: list[tuple] = []
        top = "RUNNING" if live else state
        top_hist = ["RUNNING"] + ([] if live else [state])
        nodes.append((wf, wf, top, top_hist, [f"{wf}.root-driver"], 0.0, end_all))
        nodes.append(("root-driver", f"{wf}.root-driver", "SUCCEEDED", ["PENDING", "SUCCEEDED"],
                      [f"{wf}.root"], 0.0, root_start))
        nodes.append(("root", f"{wf}.root", top, top_hist,
                      [entry(t) for t in order if not deps[t]], root_start, end_all))
        ok3, fail3 = ["PENDING", "RUNNING", "SUCCEEDED"], ["PENDING", "RUNNING", "FAILED"]
        for t in order:
            o = outcome.get(t)
            if o is None:
                continue
            after = [entry(u) for u in dependents[t]]
            begin = max([done.get(d, root_start) for d in deps[t]] or [root_start])
            if o == "omitted":
                begin = failed_at
            if kinds[t] != "container":  # one node (api/24: importers PENDING, SUCCEEDED)
                first = "PENDING" if kinds[t] == "importer" else "RUNNING"
                st = {"ok": "SUCCEEDED", "failed": "FAILED", "driver-failed": "FAILED",
                      "running": "RUNNING"}.get(o)
                hist = [None] if st is None else [first] if st == first else [first, st]
                stop = None if o == "running" else done.get(t, begin)
                nodes.append((t, node(t), st, hist, after, begin, stop))
                continue
            executor = node(t, ".executor")
            driver = {"ok": ("SUCCEEDED", ok3), "failed": ("SUCCEEDED", ok3),
                      "running": ("SUCCEEDED", ok3),
                      "cached": ("SUCCEEDED", ["PENDING", "SUCCEEDED"]),
                      "driver-failed": ("FAILED", ["PENDING", "FAILED"]),
                      "omitted": (None, [None])}[o]
            ran = begin + (0 if o == "omitted" else self.DRIVER_S)
            nodes.append((f"{t}-driver", node(t, "-driver"), *driver, [node(t)], begin, ran))
            if o in ("driver-failed", "omitted"):
                nodes.append((t, node(t), None, [None], after, ran, ran))
                continue
            task = {"ok": ("SUCCEEDED", ["RUNNING", "SUCCEEDED"]),
                    "cached": ("SUCCEEDED", ["SUCCEEDED"]),
                    "failed": ("FAILED", ["RUNNING", "FAILED"]),
                    "running": ("RUNNING", ["RUNNING"])}[o]
            stop = None if o == "running" else done[t]
            nodes.append((t, node(t), *task, [executor], ran, stop))
            ex = {"ok": ("SUCCEEDED", ok3), "cached": ("SKIPPED", ["SKIPPED"]),
                  "failed": ("FAILED", fail3), "running": ("RUNNING", ["PENDING", "RUNNING"])}[o]
            ex_stop = None if stop is None else stop if o == "cached" else stop - 1
            nodes.append(("executor", executor, *ex, after, ran, ex_stop))
        return nodes

    def _task_details(self, run: dict, state: str, finished: str) -> list[dict]:
        """``run_details.task_details``: one entry per Argo node, sorted by ``task_id`` as
        the server lists them; ``child_tasks`` name the child nodes by node ID;
        ``start_time``/``end_time`` the node's (:meth:`_argo_nodes`; a node still running
        ends ``finished``, as the run)."""
        wf, created, live = run["_workflow"], run["created_at"], state not in TERMINAL
        nodes = self._argo_nodes(run["_ir"], wf, state)
        present = {n[1] for n in nodes}
        out = []
        for display, name, st, hist, children, begin, stop in nodes:
            d = {"run_id": run["run_id"],
                 "task_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run['run_id']}/{name}")),
                 "display_name": display, "create_time": created,
                 "start_time": _ts(run["_wall0"] + begin),
                 "end_time": finished if stop is None else _ts(run["_wall0"] + stop)}
            if st is not None:
                d["state"] = st
            d["state_history"] = [{"update_time": created if i + 1 < len(hist) or live
                                   else finished, **({"state": s} if s else {})}
                                  for i, s in enumerate(hist)]
            kids = [argo_node_id(wf, c) for c in children if c in present]
            if kids:
                d["child_tasks"] = [{"pod_name": k} for k in kids]
            out.append(d)
        return sorted(out, key=lambda d: d["task_id"])

    def workflow_of(self, run_id: str) -> str:
        """The Argo workflow name of a run: ``<pipelineInfo.name>-<5 chars>``."""
        return self.runs[run_id]["_workflow"]

    def _task_node(self, run_id: str, task: str) -> tuple[str, str, str]:
        run = self.runs[run_id]
        order, _, kinds = self._tasks(run["_ir"])
        if task not in order or kinds[task] == "dag":
            raise ValueError(f"{task!r} is no container or importer task of run {run_id}; "
                             f"its tasks: {', '.join(order)}")
        wf = run["_workflow"]
        if kinds[task] == "importer":
            return wf, f"{wf}.root.{task}", "system-importer"
        return wf, f"{wf}.root.{task}.executor", "system-container-impl"

    def pod_of(self, run_id: str, task: str) -> str:
        """The Kubernetes pod that runs component task ``task``'s code in run ``run_id``:
        ``<workflow>-system-container-impl-<N>`` (importers: ``system-importer``), as the
        recorded 2.17.0 pods are named. Raises ValueError for a task the pipeline lacks or a
        loop/DAG task (no pod of its own)."""
        return argo_pod_name(*self._task_node(run_id, task))

    def node_of(self, run_id: str, task: str) -> str:
        """What ``task_details[<task>].child_tasks[0].pod_name`` holds for ``task``: the Argo
        node ID ``<workflow>-<N>`` of the node running its code, the same ``N`` as in
        :meth:`pod_of`'s pod name."""
        wf, name, _ = self._task_node(run_id, task)
        return argo_node_id(wf, name)


def _multipart(headers, body: bytes) -> dict:
    """Form fields of a multipart body: name -> bytes."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + headers.get("Content-Type", "").encode() + b"\r\n\r\n" + body)
    if not msg.is_multipart():
        return {}
    return {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in msg.iter_parts()}


class _Handler(JsonHandler):
    kfp: FakeKfp

    def _auth(self, write: bool) -> None:
        k = self.kfp
        if not k.tokens and not k.read_only_tokens:
            return
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        if token in k.tokens:
            return
        if token in k.read_only_tokens:
            if write:
                raise ApiError(403, 7, "Failed to authorize with API: PermissionDenied: "
                               "User is not authorized to create resources of kind "
                               "pipelines.pipelines.kubeflow.org",
                               "User is not authorized to create resources of kind "
                               "pipelines.pipelines.kubeflow.org")
            return
        raise ApiError(401, 16, "Failed to authenticate: Unauthenticated: request has no "
                       "valid bearer token", "request has no valid bearer token")

    def _send(self, code: int, body: dict, content_type: str) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        k = self.kfp
        k.requests.append({"method": method, "path": path, "query": q})
        upload = path in (f"{API}/pipelines/upload", f"{API}/pipelines/upload_version")
        try:
            if path == f"{API}/healthz" and method == "GET":
                self._auth(False)
                return self.send_json(200, {"commit_sha": k.commit_sha, "tag_name": k.tag_name,
                                            "multi_user": k.multi_user,
                                            "pipeline_store": "database"})
            self._auth(method != "GET")
            with k._lock:
                body = self._route(method, path, q, raw)
            self.send_json(200, body)
        except ApiError as e:
            if upload:  # the upload handlers write every error as apiError
                return self._send(e.http, UploadError(e.http, e.message, _UP).body(),
                                  "application/json")
            self.send_json(e.http, e.body())
        except UploadError as e:
            self._send(e.http, e.body(),
                       "application/json" if e.json_type else "text/plain; charset=utf-8")

    def _route(self, method, path, q, raw) -> dict:
        k = self.kfp
        if path == f"{API}/pipelines" and method == "GET":
            ns = q.get("namespace", "")
            items = [_shown(p) for p in k.pipelines.values() if k._matches(p, q.get("filter"))
                     and p["namespace"] == ns]
            return {"pipelines": items, "total_size": len(items)} if items else {}
        if path in (f"{API}/pipelines/upload", f"{API}/pipelines/upload_version") \
                and method == "POST":
            version = path.endswith("_version")
            data = _multipart(self.headers, raw).get("uploadfile")
            if data is None:
                raise UploadError(400, "Failed to create a pipeline version" if version else
                                  "Failed to read pipeline from file", _UPV if version else _UP,
                                  json_type=False)
            if version:
                if not q.get("pipelineid"):
                    raise UploadError(400, "Failed to create a pipeline version", _UPV,
                                      json_type=False)
                return k.create_version(q["pipelineid"], q.get("name", ""), data,
                                        q.get("description", ""))
            return k.create_pipeline(q.get("name", ""), data, q.get("namespace", ""),
                                     q.get("description", ""))
        if path.startswith(f"{API}/pipelines/") and path.endswith("/versions") \
                and method == "GET":
            pid = path[len(f"{API}/pipelines/"):-len("/versions")]
            if pid not in k.pipelines:
                raise ApiError(
                    404, 5, f"Failed to list pipeline versions for pipeline {pid}: Failed to "
                    f"list pipeline versions due to error fetching the namespace for pipeline "
                    f"{pid}: Failed to get namespace for pipeline id {pid}: Failed to get a "
                    f"pipeline with id {pid}: ResourceNotFoundError: Pipeline {pid} not found",
                    f"Pipeline {pid} not found")
            items = [_shown(v) for v in k.versions.values()
                     if v["pipeline_id"] == pid and k._matches(v, q.get("filter"))]
            return {"pipeline_versions": items, "total_size": len(items)} if items else {}
        if path == f"{API}/experiments" and method == "GET":
            ns = q.get("namespace", "")
            items = [_shown(e) for e in k.experiments.values()
                     if k._matches(e, q.get("filter")) and (not ns or e["namespace"] == ns)]
            return {"experiments": items, "total_size": len(items)} if items else {}
        if path == f"{API}/experiments" and method == "POST":
            return k.create_experiment(json.loads(raw or b"{}"))
        if path == f"{API}/runs" and method == "POST":
            return k.create_run(json.loads(raw or b"{}"))
        if path.startswith(f"{API}/runs/") and path.endswith(":terminate") \
                and method == "POST":
            return k.terminate_run(path[len(f"{API}/runs/"):-len(":terminate")])
        if path.startswith(f"{API}/runs/") and method == "GET":
            return k.view_run(path[len(f"{API}/runs/"):])
        raise ApiError(404, 5, "Not Found")

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")
