"""The KFP API double (tests/doubles/kfp_api.py) answers as the recorded real KFP 2.17.0 did.

One case per file of the recorded KFP 2.17.0 answers (data folder ``kfp-2.17.0/api``, found
through :mod:`kfp_gpu.inputs.datadir`): the double is brought into the state the recorded request
needed by replaying the recorded requests that made it (the recorded ids are mapped to the
double's), the request is replayed over HTTP, and the answer is compared with the recorded
one: status, content type, the whole body with ids, times, Go stack traces and shortened
``pipeline_spec`` masked (so keys, nesting, values and message texts). Runs with
``run_details`` are compared node by node: each task's keys, ``state``, its
``child_tasks`` resolved to the nodes they name, and whether it took no time (start = end:
an omitted node, a task served from the cache). 26 and 27 are bare get_run bodies of real
runs: the double runs the same pipeline with the same parameters, fails the task that failed
there (27: terminated) and its get_run is compared with them.

Without the data folder the cases are skipped; with ``CI=true`` they fail.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest

from kfp_gpu.compiler.compile import compiled_pipeline
from kfp_gpu.inputs import datadir
from tests.containers.conftest import in_ci
from tests.doubles.kfp_api import API, EPOCH, FakeKfp, argo_node_id

REPO = Path(__file__).resolve().parents[2]
_root = datadir.resolve()
API_DIR = (_root / "kfp-2.17.0" / "api") if _root is not None else None
FILES = sorted(p.name for p in API_DIR.iterdir()) if API_DIR and API_DIR.is_dir() else []

#: Recorded requests replayed first, by case number: the state each case's request met.
BEFORE = {"03": ["02"], "05": ["02"], "06": ["02"], "07": ["02"], "08": ["02", "07"],
          "10": ["02", "07"], "13": ["12"], "14": ["12"], "16": ["15"],
          **{n: ["12", "15", "16"] for n in ("17", "18", "19", "20", "21", "22")},
          "23": ["12", "15", "16", "22"], "24": ["12", "15", "16", "22"]}
#: Double settings a case needs (a run that stays PENDING, one that ends FAILED).
SETTINGS = {"01": {"tag_name": "unknown", "commit_sha": "unknown"},
            "22": {"script": [("PENDING", 0)]}, "23": {"script": [("PENDING", 0)]}}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
GO_TRACE = re.compile(r"(\S+\n\t\S+:\d+\n?)+")
SHORT_SPEC = re.compile(r"<\d+ chars; keys \[(.*)\]>")
#: An Argo workflow name: ``<pipeline>-`` + 5 characters of Kubernetes' generateName.
WORKFLOW = re.compile(r"[a-z0-9][a-z0-9-]*-[bcdfghjklmnpqrstvwxz2456789]{5}")


def _number(name: str) -> str:
    return re.match(r"(\d+b?)-", name).group(1)


def _load(name: str) -> dict:
    """A recording as ``{request, response}``; 01b is a raw HTTP answer to GET healthz."""
    path = API_DIR / name
    if name.endswith(".txt"):
        head, _, body = path.read_text().partition("\n\n")
        lines = head.splitlines()
        headers = dict(line.split(": ", 1) for line in lines[1:])
        return {"request": {"method": "GET", "path": f"{API}/healthz"},
                "response": {"status": int(lines[0].split()[1]),
                             "content_type": headers["Content-Type"],
                             "body": json.loads(body)}}
    return json.loads(path.read_text())


def _absent() -> None:
    reason = f"no recorded KFP 2.17.0 answers in {API_DIR} (set ${datadir.ENV})"
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the data must be there)", pytrace=False)
    pytest.skip(reason)


# --------------------------------------------------------------------------- HTTP
def _mapped(value, ids: dict):
    if isinstance(value, str):
        return UUID.sub(lambda m: ids.get(m.group(0), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _mapped(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_mapped(v, ids) for v in value]
    return value


def _call(kfp: FakeKfp, req: dict, ids: dict) -> tuple[int, str, dict]:
    """Replay ``req`` (ids mapped) on the double: (status, content type, JSON body)."""
    url = kfp.url + _mapped(req["path"], ids)
    query = {k: str(v) for k, v in _mapped(req.get("query") or {}, ids).items()}
    if query:
        url += "?" + urlencode(query)
    data, headers = None, {}
    if req.get("json") is not None:
        data, headers = json.dumps(_mapped(req["json"], ids)).encode(), {
            "Content-Type": "application/json"}
    upload = req.get("multipart_uploadfile")
    if upload:
        path = REPO / upload if (REPO / upload).is_file() else API_DIR / upload
        boundary = uuid.uuid4().hex
        data = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"uploadfile\"; "
                f"filename=\"{Path(upload).name}\"\r\nContent-Type: application/octet-stream"
                f"\r\n\r\n").encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    request = urllib.request.Request(url, data=data, headers=headers, method=req["method"])
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers["Content-Type"], json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], json.loads(e.read())


def _learn(recorded, mine, ids: dict) -> None:
    """Map the recorded answer's ids to the double's, walking both bodies together."""
    if isinstance(recorded, str) and isinstance(mine, str) and UUID.fullmatch(recorded):
        ids.setdefault(recorded, mine)
    elif isinstance(recorded, dict) and isinstance(mine, dict):
        for k in recorded.keys() & mine.keys():
            _learn(recorded[k], mine[k], ids)
    elif isinstance(recorded, list) and isinstance(mine, list):
        for a, b in zip(recorded, mine):
            _learn(a, b, ids)


# ----------------------------------------------------------------------- comparing
def _norm(value, key: str = ""):
    """The body with ids, times (all but the unset 1970-01-01), Go traces and shortened
    pipeline specs masked; a run's ``run_details`` is compared by :func:`_nodes`."""
    if key == "pipeline_spec":
        if isinstance(value, str) and SHORT_SPEC.fullmatch(value):
            keys = sorted(k.strip(" '") for k in SHORT_SPEC.fullmatch(value).group(1).split(","))
        else:
            keys = sorted(value)
        return f"<spec with keys {keys}>"
    if key == "error_details" and isinstance(value, str):
        first, _, rest = value.partition("\n")
        return [first, "<go stack trace>" if GO_TRACE.fullmatch(rest) else rest]
    if isinstance(value, dict):
        return {k: _norm(v, k) for k, v in value.items() if k != "run_details"}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, str):
        value = UUID.sub("<id>", value)
        return TIME.sub(lambda m: m.group(0) if m.group(0) == EPOCH else "<time>", value)
    return value


def _workflow(tasks: list[dict]) -> str:
    """The workflow's own node: named like a workflow, its child the ``root-driver`` node."""
    (wf,) = {t["display_name"] for t in tasks if WORKFLOW.fullmatch(t["display_name"])
             and [c["pod_name"] for c in t.get("child_tasks", [])]
             == [argo_node_id(t["display_name"], t["display_name"] + ".root-driver")]}
    return wf


def _nodes(run: dict) -> list[tuple]:
    """Each task of ``run_details``: (name, keys, keys of its history entries, state,
    the nodes its ``child_tasks`` name, in any order: Argo's is not the spec's, whether it
    started and ended at the same second: a node omitted, or a task served from the cache
    and its skipped step), sorted; the workflow is ``<workflow>`` and each child is
    resolved through the Argo node IDs of the run's tasks."""
    tasks = run["run_details"]["task_details"]
    wf = _workflow(tasks)
    names = {argo_node_id(wf, f"{wf}.root"): "root",
             argo_node_id(wf, f"{wf}.root-driver"): "root-driver"}
    for t in tasks:
        d = t["display_name"]
        if d in (wf, "root", "root-driver", "executor"):
            continue
        names[argo_node_id(wf, f"{wf}.root.{d}")] = d
        names[argo_node_id(wf, f"{wf}.root.{d}.executor")] = f"{d}.executor"
    out = []
    for t in tasks:
        d = "<workflow>" if t["display_name"] == wf else t["display_name"]
        out.append((d, sorted(t), sorted({k for h in t["state_history"] for k in h}),
                    t.get("state"),
                    sorted(names.get(c["pod_name"], f"? {c['pod_name']}")
                           for c in t.get("child_tasks", [])),
                    t["start_time"] == t["end_time"]))
    return sorted(out, key=repr)


def _same_run(recorded: dict, mine: dict) -> None:
    assert _norm(mine) == _norm(recorded)
    assert ("run_details" in mine) == ("run_details" in recorded)
    if "run_details" in recorded:
        real = _nodes(recorded)
        assert not [n for n in real if any(c.startswith("?") for c in n[4])], \
            "a recorded child_tasks entry names no node of the run"
        assert _nodes(mine) == real


def _failed_one(run: dict) -> str:
    """The component task (or ``<task>-driver``) that failed in a recorded run."""
    (name,) = [t["display_name"] for t in run["run_details"]["task_details"]
               if t.get("state") == "FAILED" and t["display_name"] not in ("root", "executor")
               and not WORKFLOW.fullmatch(t["display_name"])]
    return name


# --------------------------------------------------------------------------- cases
def _replay(name: str) -> None:
    case = _load(name)
    num = _number(name)
    settings = dict(SETTINGS.get(num, {}))
    if num == "24":
        settings = {"script": [("PENDING", 0.05), ("RUNNING", 0.05), ("FAILED", 0)],
                    "failed_task": _failed_one(case["response"]["body"])}
    with FakeKfp(**settings) as kfp:
        ids: dict = {}
        for before in BEFORE.get(num, []):
            (file,) = [f for f in FILES if f.startswith(before + "-")]
            earlier = _load(file)
            status, _, body = _call(kfp, earlier["request"], ids)
            assert status == earlier["response"]["status"] == 200, (file, body)
            _learn(earlier["response"]["body"], body, ids)
        if num == "24":
            time.sleep(0.3)  # past the script: the run has FAILED
        status, ctype, body = _call(kfp, case["request"], ids)
    want = case["response"]
    assert (status, ctype) == (want["status"], want["content_type"]), body
    _same_run(want["body"], body)


def _real_run(name: str) -> None:
    """26 / 27: the double runs the recorded run's pipeline and parameters and fails (27:
    terminates) the task that failed there; its get_run is compared with the recording."""
    real = json.loads((API_DIR / name).read_text())
    real.pop("name")  # the recorder's label, not part of the answer
    history = [h["state"] for h in real["state_history"]]
    tasks = real["run_details"]["task_details"]
    wf = _workflow(tasks)
    pipeline = wf.rsplit("-", 1)[0]
    cached = {t["display_name"] for t in tasks
              if [h.get("state") for h in t["state_history"]] == ["SUCCEEDED"]}
    terminated = "CANCELING" in history
    script = ([("PENDING", 0.05), ("RUNNING", 60), ("SUCCEEDED", 0)] if terminated else
              [("PENDING", 0.05), ("RUNNING", 0.05), ("FAILED", 0)])
    with FakeKfp(script=script, failed_task=_failed_one(real), cached_tasks=cached) as kfp:
        path, _ = compiled_pipeline(pipeline)
        ids: dict = {}
        steps = [{"method": "POST", "path": f"{API}/pipelines/upload",
                  "query": {"name": pipeline}, "multipart_uploadfile": str(path)},
                 {"method": "POST", "path": f"{API}/experiments",
                  "json": {"display_name": "replay"}}]
        (_, _, p), (_, _, e) = (_call(kfp, s, ids) for s in steps)
        (vid,) = kfp.versions
        _, _, run = _call(kfp, {"method": "POST", "path": f"{API}/runs", "json": {
            "display_name": real["display_name"], "experiment_id": e["experiment_id"],
            "pipeline_version_reference": {"pipeline_id": p["pipeline_id"],
                                           "pipeline_version_id": vid},
            "runtime_config": real["runtime_config"]}}, ids)
        get = {"method": "GET", "path": f"{API}/runs/{run['run_id']}"}
        if terminated:
            time.sleep(0.15)
            assert _call(kfp, get, ids)[2]["state"] == "RUNNING"
            assert _call(kfp, {"method": "POST",
                               "path": f"{API}/runs/{run['run_id']}:terminate"}, ids)[:3:2] \
                == (200, {})
            assert _call(kfp, get, ids)[2]["state"] == "CANCELING"
        time.sleep(0.3)
        status, ctype, body = _call(kfp, get, ids)
        assert kfp.node_of(run["run_id"], _failed_one(real)) in [
            c["pod_name"] for t in body["run_details"]["task_details"]
            if t["display_name"] == _failed_one(real) for c in t["child_tasks"]]
    assert (status, ctype) == (200, "application/json")
    assert [h["state"] for h in body["state_history"]] == history
    _same_run(real, body)


@pytest.mark.parametrize("name", FILES or [pytest.param(None, id="no-recordings")])
def test_replay(name):
    """Every file of the recorded answers: a replayed case, or the upload of one."""
    if name is None:
        _absent()
    if not name.endswith((".json", ".txt")):
        uploads = [_load(f)["request"].get("multipart_uploadfile") for f in FILES
                   if f.endswith(".json") and "request" in _load(f)]
        assert name in uploads, f"{name} is neither a recorded answer nor a recorded upload"
        return
    if "request" not in _load(name):
        return _real_run(name)
    _replay(name)
