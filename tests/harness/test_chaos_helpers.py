"""The pure parts the chaos scenarios judge with (tests/cluster/gangs.py, testcluster/
audit.py, tests/cluster/figures.py), on hand-made pods, jobs and audit events: a gang
check that passed everything, or an audit count that counted the wrong user, would make
the cluster tests' figures meaningless."""

from __future__ import annotations

import json

from testcluster import audit
from tests.cluster import gangs, jobs
from tests.cluster.figures import line

LABEL = "training.kubeflow.org/job-name"


def pod(job: str, name: str, gpus: int = 1, node: str = "n1", phase: str = "Running") -> dict:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"metadata": {"name": name, "labels": {LABEL: job}},
            "spec": {"nodeName": node, "containers": [{"resources": {"limits": limits}}]},
            "status": {"phase": phase}}


def test_the_component_job_has_its_workers_as_gpu_pods():
    job = jobs.component_job("ns", "j", workers=3)
    assert gangs.gpu_pods_expected(job) == 3
    assert gangs.gpu_pods_expected(jobs.component_job("ns", "j", gpu="none", workers=3)) == 0


def test_a_gang_is_all_its_gpu_pods_running_or_none():
    expected = {"a": 2, "b": 2, "c": 2}
    pods = [pod("a", "a-w0"), pod("a", "a-w1"), pod("a", "a-launcher", gpus=0),
            pod("b", "b-w0"),  # one of two bound
            pod("c", "c-w0"), pod("c", "c-w1", phase="Pending"),  # bound, not Running
            pod("d", "d-w0", node=""),  # not bound: holds nothing
            pod("e", "e-w0", phase="Succeeded")]  # ended: holds nothing
    assert gangs.half_gangs(pods, expected) == {
        "b": "1/2 GPU pods bound, 1 Running", "c": "2/2 GPU pods bound, 1 Running"}
    assert set(gangs.holders(pods)) == {"a", "b", "c"}
    assert gangs.half_gangs(pods[:3], expected) == {}


def test_audit_counts_one_request_per_audit_id_of_one_user(tmp_path):
    mine = {"username": "system:serviceaccount:ns:kfp-gpu-launcher"}
    events = [
        {"auditID": "1", "stage": "ResponseStarted", "user": mine, "verb": "watch",
         "objectRef": {"resource": "mpijobs"}},
        {"auditID": "1", "stage": "ResponseComplete", "user": mine, "verb": "watch",
         "objectRef": {"resource": "mpijobs"}},
        {"auditID": "2", "stage": "ResponseComplete", "user": mine, "verb": "get",
         "objectRef": {"resource": "pods", "subresource": "log"}},
        {"auditID": "3", "stage": "ResponseComplete", "user": {"username": "admin"},
         "verb": "list", "objectRef": {"resource": "pods"}}]
    log = tmp_path / "audit.log"
    log.write_text("\n".join(json.dumps(e) for e in events[:3]) + "\n" + json.dumps(events[3]))
    read, offset = audit.read(log)
    assert read == events[:3]  # the last line is not finished yet
    sent = audit.requests_of(read, mine["username"])
    assert sorted(sent) == ["1", "2"]
    assert audit.tally(sent) == {"watch mpijobs": 1, "get pods/log": 1}
    with open(log, "a") as f:
        f.write("\n")
    assert audit.read(log, offset)[0] == events[3:]


def test_the_figures_line_names_date_cpu_and_command():
    text = line("scenario 6", {"makespan_s": 61.25, "jobs": 20})
    head, date, cpu, command = text.split(" | ")
    assert head == "FIGURES scenario 6: makespan_s=61.2, jobs=20"
    assert len(date) == 10 and "cores" in cpu and command.startswith("pytest")
