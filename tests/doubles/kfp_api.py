"""A local double of the Kubeflow Pipelines v2beta1 REST API for ``kfp-gpu submit``.

Real HTTP on 127.0.0.1 (random port), the JSON field names and semantics of the KFP API
server (kubeflow/pipelines backend/api/v2beta1/*.proto through grpc-gateway, as
kfp-server-api 2.17 speaks it):

- ``GET /apis/v2beta1/healthz`` -> ``{commit_sha, tag_name, multi_user}``.
- Auth (when :attr:`FakeKfp.tokens` is set): no / unknown bearer token -> ``401``
  (gRPC code 16 UNAUTHENTICATED); a token in :attr:`FakeKfp.read_only_tokens` may GET but
  gets ``403`` (code 7 PERMISSION_DENIED) on writes. Errors use the gateway's body
  ``{"error", "code", "message", "details"}``.
- Pipelines: ``GET /apis/v2beta1/pipelines`` (``filter`` = JSON Filter, EQUALS on
  ``display_name``/``name``), ``POST /apis/v2beta1/pipelines/upload`` (multipart field
  ``uploadfile``; query ``name``; creates the pipeline AND its first version, named like
  the pipeline, as the server does; a taken name -> ``409`` ALREADY_EXISTS), ``GET
  /apis/v2beta1/pipelines/<id>/versions`` (filter), ``POST
  /apis/v2beta1/pipelines/upload_version`` (query ``name``, ``pipelineid``; a taken version
  name in that pipeline -> ``409``; unknown pipeline -> ``404``). Uploaded files must be
  pipeline IR YAML (``pipelineInfo`` + ``root``), else ``400`` INVALID_ARGUMENT.
- Experiments: list with filter / ``namespace``, create (``display_name`` unique per
  namespace, else ``409``).
- Runs: ``POST /apis/v2beta1/runs`` (the referenced experiment and pipeline version must
  exist -> else ``404``; ``runtime_config.parameters`` must be inputs of the version's
  root -> else ``400``), ``GET /apis/v2beta1/runs/<id>``: the state advances through
  :attr:`FakeKfp.script` (a list of ``(state, seconds)``; the last state stays), with
  ``state_history``, ``finished_at``, and for ``FAILED`` an ``error`` plus a failed task in
  ``run_details.task_details``.

Upstream files followed (kubeflow/pipelines, at the commit ``read_file`` served; the
release line could not be told from the snapshot):

- ``backend/api/v2beta1/run.proto`` @07a931d0: ``Run`` field names (``run_id``,
  ``display_name``, ``storage_state`` AVAILABLE, ``runtime_config``, ``service_account``,
  ``created_at``/``scheduled_at``/``finished_at``, ``state``, ``error`` a
  ``google.rpc.Status``, ``run_details.task_details``, ``state_history`` of
  ``RuntimeStatus{update_time, state}``) and ``RuntimeState`` (PENDING, RUNNING,
  SUCCEEDED, SKIPPED, FAILED, CANCELING, CANCELED, PAUSED); ``PipelineTaskDetail``
  (``run_id``, ``task_id``, ``display_name``, ``create_time``, ``state``, ``error`` only
  when FAILED/CANCELED).
- ``backend/src/apiserver/server/pipeline_upload_server.go`` @0029bf50: multipart field
  ``uploadfile`` (``FormFileKey``), query ``name`` / ``namespace`` / ``pipelineid``;
  ``UploadPipeline`` creates the pipeline and a version with the pipeline's name and
  display name (``CreatePipelineAndPipelineVersion``); AlreadyExists -> 409.
  Deviations, kept because ``kfp-gpu submit``'s tests rely on them: upstream answers the
  upload endpoints' errors with ``{"error_message", "error_details"}`` (``apiError``,
  ``writeErrorToResponse``), not the gateway body, and a refused upload authorization
  with 400 ("pipeline upload denied: permission to create
  pipelines.pipelines.kubeflow.org ..."), where the double sends 403 PERMISSION_DENIED
  (what the grpc-gateway endpoints -- runs, experiments -- answer).

Every request is recorded in :attr:`FakeKfp.requests` (method, path, query).
"""

from __future__ import annotations

import datetime as dt
import email.parser
import email.policy
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


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    def __init__(self, http: int, code: int, message: str):
        super().__init__(message)
        self.http, self.code, self.message = http, code, message


@dataclass
class FakeKfp:
    """The double. ``script``: run states over time, e.g. ``[("PENDING", .1), ("RUNNING",
    .2), ("SUCCEEDED", 0)]``; ``failed_task``: task name reported when the run FAILs."""

    tokens: set = field(default_factory=set)
    read_only_tokens: set = field(default_factory=set)
    multi_user: bool = False
    #: healthz ``tag_name`` (the backend release; the pinned SDK's by default).
    tag_name: str = "2.17.0"
    script: list = field(default_factory=lambda: [("PENDING", 0.1), ("RUNNING", 0.3),
                                                  ("SUCCEEDED", 0)])
    failed_task: str = "train-text-classifier"
    failure_message: str = ("task 'train-text-classifier' failed: pod exited with code 137 "
                            "(OOMKilled)")
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
            key = {"name": "display_name"}.get(p["key"], p["key"])
            if op not in ("EQUALS", 1):
                raise ApiError(400, 3, f"unsupported filter operation {op}")
            if obj.get(key) != p.get("stringValue", p.get("string_value")):
                return False
        return True

    @staticmethod
    def _spec(raw: bytes) -> dict:
        try:
            doc = next(iter(yaml.safe_load_all(raw.decode())))
        except Exception as e:  # noqa: BLE001 - any parse problem is a 400
            raise ApiError(400, 3, f"Failed to parse the pipeline spec: {e}")
        if not isinstance(doc, dict) or "pipelineInfo" not in doc or "root" not in doc:
            raise ApiError(400, 3, "Failed to create a pipeline: the file is not a pipeline "
                           "spec (pipelineInfo/root missing)")
        return doc

    def create_pipeline(self, name: str, raw: bytes, namespace: str = "") -> dict:
        spec = self._spec(raw)
        name = name or spec["pipelineInfo"]["name"]
        if any(p["display_name"] == name and p["namespace"] == namespace
               for p in self.pipelines.values()):
            raise ApiError(409, 6, f"Failed to create a pipeline: Already exist error: "
                           f"pipeline with name {name} already exists")
        pid = str(uuid.uuid4())
        p = {"pipeline_id": pid, "display_name": name, "description": "",
             "created_at": _now(), "namespace": namespace}
        self.pipelines[pid] = p
        self.create_version(pid, name, raw)
        return p

    def create_version(self, pid: str, name: str, raw: bytes) -> dict:
        if pid not in self.pipelines:
            raise ApiError(404, 5, f"Failed to get pipeline: ResourceNotFoundError: "
                           f"Pipeline {pid} not found")
        spec = self._spec(raw)
        if any(v["display_name"] == name for v in self.versions.values()
               if v["pipeline_id"] == pid):
            raise ApiError(409, 6, f"Failed to create a pipeline version: Already exist "
                           f"error: pipeline version with name {name} already exists")
        vid = str(uuid.uuid4())
        v = {"pipeline_id": pid, "pipeline_version_id": vid, "display_name": name,
             "created_at": _now(), "pipeline_spec": spec}
        self.versions[vid] = v
        return v

    def create_experiment(self, body: dict) -> dict:
        name, ns = body.get("display_name", ""), body.get("namespace", "") or ""
        if not name:
            raise ApiError(400, 3, "Experiment name is empty")
        if any(e["display_name"] == name and e["namespace"] == ns
               for e in self.experiments.values()):
            raise ApiError(409, 6, f"Failed to create an experiment: Already exist error: "
                           f"experiment {name} already exists")
        eid = str(uuid.uuid4())
        e = {"experiment_id": eid, "display_name": name, "description": body.get(
            "description") or "", "namespace": ns, "created_at": _now(),
             "storage_state": "AVAILABLE"}
        self.experiments[eid] = e
        return e

    def create_run(self, body: dict) -> dict:
        if body.get("experiment_id") not in self.experiments:
            raise ApiError(404, 5, f"Failed to create a run: experiment "
                           f"{body.get('experiment_id')} not found")
        ref = body.get("pipeline_version_reference") or {}
        v = self.versions.get(ref.get("pipeline_version_id"))
        if v is None or v["pipeline_id"] != ref.get("pipeline_id"):
            raise ApiError(404, 5, "Failed to create a run: pipeline version not found")
        inputs = v["pipeline_spec"]["root"].get("inputDefinitions", {}).get("parameters", {})
        params = (body.get("runtime_config") or {}).get("parameters") or {}
        unknown = sorted(set(params) - set(inputs))
        if unknown:
            raise ApiError(400, 3, f"Failed to create a run: unknown parameters {unknown}")
        rid = str(uuid.uuid4())
        run = {"run_id": rid, "experiment_id": body["experiment_id"],
               "display_name": body.get("display_name", ""), "pipeline_version_reference": ref,
               "runtime_config": body.get("runtime_config") or {},
               "service_account": body.get("service_account") or "pipeline-runner",
               "storage_state": "AVAILABLE", "created_at": _now(), "scheduled_at": _now(),
               "_t0": time.monotonic()}
        self.runs[rid] = run
        return self.view_run(rid)

    def view_run(self, rid: str) -> dict:
        run = self.runs.get(rid)
        if run is None:
            raise ApiError(404, 5, f"Failed to get a run: ResourceNotFoundError: Run {rid} "
                           "not found")
        elapsed = time.monotonic() - run["_t0"]
        history, t = [], 0.0
        state = self.script[-1][0]
        for s, secs in self.script:
            history.append({"update_time": _now(), "state": s})
            if elapsed < t + secs or secs == 0:
                state = s
                break
            t += secs
        out = {k: v for k, v in run.items() if not k.startswith("_")}
        out["state"] = state
        out["state_history"] = history
        tasks = [{"run_id": rid, "task_id": str(uuid.uuid5(uuid.NAMESPACE_URL, rid + n)),
                  "display_name": n, "create_time": run["created_at"],
                  "state": "SUCCEEDED" if state == "SUCCEEDED" or (
                      n == "prep-text" and state in ("RUNNING", "FAILED")) else
                  ("FAILED" if state == "FAILED" and n == self.failed_task else
                   ("RUNNING" if state == "RUNNING" else "PENDING"))}
                 for n in ("prep-text", self.failed_task)]
        if state == "FAILED":
            out["error"] = {"code": 2, "message": self.failure_message, "details": []}
            for task in tasks:
                if task["state"] == "FAILED":
                    task["error"] = {"code": 2, "message": "pod exited with code 137 "
                                     "(OOMKilled)"}
        if state in ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"):
            out["finished_at"] = _now()
        out["run_details"] = {"task_details": tasks}
        return out


def _multipart_file(headers, body: bytes) -> bytes:
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + headers.get("Content-Type", "").encode() + b"\r\n\r\n" + body)
    for part in msg.iter_parts():
        if part.get_param("name", header="content-disposition") == "uploadfile":
            return part.get_payload(decode=True)
    raise ApiError(400, 3, "Failed to read the pipeline file: multipart field 'uploadfile' "
                   "missing")


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
                               "pipelines.pipelines.kubeflow.org")
            return
        raise ApiError(401, 16, "Failed to authenticate: Unauthenticated: request has no "
                       "valid bearer token")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        k = self.kfp
        k.requests.append({"method": method, "path": path, "query": q})
        try:
            if path == f"{API}/healthz" and method == "GET":
                self._auth(False)
                return self.send_json(200, {"commit_sha": "0f1e2d3c", "tag_name": k.tag_name,
                                        "multi_user": k.multi_user})
            self._auth(method != "GET")
            with k._lock:
                body = self._route(method, path, q, raw)
            self.send_json(200, body)
        except ApiError as e:
            self.send_json(e.http, {"error": e.message, "code": e.code, "message": e.message,
                                "details": []})

    def _route(self, method, path, q, raw) -> dict:
        k = self.kfp
        if path == f"{API}/pipelines" and method == "GET":
            ns = q.get("namespace", "")
            items = [p for p in k.pipelines.values() if k._matches(p, q.get("filter"))
                     and p["namespace"] == ns]
            return {"pipelines": items, "total_size": len(items)} if items else {}
        if path == f"{API}/pipelines/upload" and method == "POST":
            return k.create_pipeline(q.get("name", ""), _multipart_file(self.headers, raw),
                                     q.get("namespace", ""))
        if path == f"{API}/pipelines/upload_version" and method == "POST":
            return k.create_version(q.get("pipelineid", ""), q.get("name", ""),
                                    _multipart_file(self.headers, raw))
        if path.startswith(f"{API}/pipelines/") and path.endswith("/versions") \
                and method == "GET":
            pid = path[len(f"{API}/pipelines/"):-len("/versions")]
            if pid not in k.pipelines:
                raise ApiError(404, 5, f"Pipeline {pid} not found")
            items = [v for v in k.versions.values()
                     if v["pipeline_id"] == pid and k._matches(v, q.get("filter"))]
            return {"pipeline_versions": items, "total_size": len(items)} if items else {}
        if path == f"{API}/experiments" and method == "GET":
            ns = q.get("namespace", "")
            items = [e for e in k.experiments.values()
                     if k._matches(e, q.get("filter")) and (not ns or e["namespace"] == ns)]
            return {"experiments": items, "total_size": len(items)} if items else {}
        if path == f"{API}/experiments" and method == "POST":
            return k.create_experiment(json.loads(raw or b"{}"))
        if path == f"{API}/runs" and method == "POST":
            return k.create_run(json.loads(raw or b"{}"))
        if path.startswith(f"{API}/runs/") and method == "GET":
            return k.view_run(path[len(f"{API}/runs/"):])
        raise ApiError(404, 5, f"Not Found: {method} {path}")

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")
