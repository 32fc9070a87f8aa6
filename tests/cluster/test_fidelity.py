"""Fidelity (issue 28 item 5, docs/fidelity.md): the same scenario on the real control plane
and in the API doubles (tests/doubles) and local runner (kfp_gpu.mpi.local), compared.

Each test asks the real code (kube-apiserver, Job controller and kube-scheduler v1.36.3,
mpi-operator v0.8.2, Trainer v2.3.0 + JobSet v0.12.0) and checks that what the double or
runner says is the same: texts, condition sequences, names, counts. Where they differed,
the double or runner was fixed (docs/fidelity.md says which).
"""

from __future__ import annotations

import json
import re
import threading

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from kfp_gpu.mpi.local import plan as local_plan
from kfp_gpu.mpi.local import plan_trainjob
from kfp_gpu.mpi.local import status as local_status
from kfp_gpu.mpi.spec import backends
from tests.cluster import jobs, kube
from tests.cluster.access import sa_client
from tests.cluster.objects import MANIFESTS
from tests.doubles import k8s_fields
from tests.doubles.k8s_api import FakeKube
from tests.doubles.k8s_cluster import FakeCluster
from tests.doubles.k8s_resources import OPERATORS, ScriptedController
from tests.doubles.pod_statuses import UNSCHEDULABLE

G, V, P = "kubeflow.org", "v2beta1", "mpijobs"


class Conditions(threading.Thread):
    """Every distinct ``[(type, status, reason)]`` an MPIJob's status goes through.

    List, then watch from the list's ``resourceVersion`` (the Kubernetes API concepts'
    "efficient detection of changes"): every change after the list is delivered, however
    late the watch's request reaches the server, so nothing waits for the watch to start."""

    def __init__(self, api, ns: str):
        super().__init__(daemon=True)
        self.api, self.ns, self.seen = api, ns, []
        listed = kube.custom(api).list_namespaced_custom_object(G, V, ns, P)
        self.resource_version = listed["metadata"]["resourceVersion"]

    def run(self):
        for ev in watch.Watch().stream(kube.custom(self.api).list_namespaced_custom_object,
                                       G, V, self.ns, P, timeout_seconds=60,
                                       resource_version=self.resource_version):
            now = [(c["type"], c["status"], c["reason"]) for c in
                   (ev["object"].get("status") or {}).get("conditions") or []]
            if not self.seen or self.seen[-1] != now:
                self.seen.append(now)


def finished(api, ns: str, name: str) -> dict:
    """The MPIJob once it is Succeeded or Failed and the operator's next sync has emptied
    the Worker counts: mpi-operator v0.8.2 ``pkg/controller/mpi_job_controller.go``
    updateMPIJobStatus writes the terminal condition in a sync that still counts the
    running Workers as active; the sync after lists no Workers for a finished Launcher Job,
    so ``replicaStatuses.Worker`` becomes ``{}`` (what the double and the runner report)."""
    def done():
        obj = jobs.mpijob(api, ns, name)
        c = kube.conditions(obj)
        workers = ((obj.get("status") or {}).get("replicaStatuses") or {}).get("Worker")
        ended = any(c.get(t, {}).get("status") == "True" for t in ("Succeeded", "Failed"))
        return obj if ended and workers is not None and not workers.get("active") else None
    return kube.wait_for(done, 90, f"MPIJob {ns}/{name} finished")


def start_mpijob(api, ns: str, name: str = "fid", launcher_policy: str = "", **policy):
    job = jobs.component_job(ns, name, **policy)
    if launcher_policy:
        job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = launcher_policy
    seq = Conditions(api, ns)
    seq.start()
    kube.custom(api).create_namespaced_custom_object(G, V, ns, P, job)
    return job, seq


@pytest.mark.parametrize("launcher_policy", ["OnFailure", "Never"])
def test_a_failed_launcher_reads_as_the_double_and_the_runner_say(plane, api, namespace,
                                                                   launcher_policy):
    job, seq = start_mpijob(api, namespace, launcher_policy=launcher_policy)
    jobs.end_launcher(api, namespace, "fid", "fail")
    status = finished(api, namespace, "fid")["status"]
    real = (kube.conditions({"status": status})["Failed"]["reason"],
            kube.conditions({"status": status})["Failed"]["message"])
    # the local runner (kfp_gpu.mpi.local.reconcile: no pod left under OnFailure)
    runner = local_status.JobStatus("fid", namespace)
    runner.launcher_failed("p", 1, "Error", last_failed_pod=None
                           if launcher_policy == "OnFailure" else ("", ""))
    assert real == (runner.condition("Failed")["reason"], runner.condition("Failed")["message"])
    # the API double's operator
    fake = FakeKube()
    fake.put_object("mpijobs", namespace, job)
    assert real == ScriptedController().failure(fake, namespace, "fid")[1:]
    assert status["replicaStatuses"] == {"Launcher": {"failed": 1}, "Worker": {}}
    assert seq.seen[-1] == [("Created", "True", "MPIJobCreated"),
                            ("Running", "False", "MPIJobRunning"), ("Failed", "True", real[0])]
    pods = kube.pods(api, namespace, "training.kubeflow.org/job-role=launcher")
    assert [p.status.phase for p in pods] == ([] if launcher_policy == "OnFailure"
                                              else ["Failed"])


def test_a_succeeded_mpijob_its_objects_and_hostfile_as_the_runner_plans(plane, api,
                                                                          namespace):
    _, seq = start_mpijob(api, namespace, workers=2)
    jobs.launcher_pod(api, namespace, "fid")
    data = kube.core(api).read_namespaced_config_map("fid-config", namespace).data
    assert data["hostfile"] == local_plan.hostfile("fid", namespace, 2, 1)
    assert data["discover_hosts.sh"] == local_plan.discover_hosts(
        "fid", namespace, ["fid-worker-0", "fid-worker-1"])
    assert kube.core(api).read_namespaced_secret("fid-ssh", namespace).type == \
        "kubernetes.io/ssh-auth"
    assert kube.core(api).read_namespaced_service("fid", namespace).spec.cluster_ip == "None"
    jobs.end_launcher(api, namespace, "fid", "succeed")
    status = finished(api, namespace, "fid")["status"]
    runner = local_status.JobStatus("fid", namespace)
    runner.created(), runner.running(), runner.succeeded()
    runner.replicas("Launcher", succeeded=1), runner.replicas("Worker")
    want = [(c["type"], c["status"], c["reason"], c["message"]) for c in runner.conditions]
    assert [(c["type"], c["status"], c["reason"], c["message"])
            for c in status["conditions"]] == want
    assert status["replicaStatuses"] == runner.to_dict()["replicaStatuses"]
    assert [s[-1] for s in seq.seen[1:]] == [  # Created, then Running, then Succeeded
        ("Created", "True", "MPIJobCreated"), ("Running", "True", "MPIJobRunning"),
        ("Succeeded", "True", "MPIJobSucceeded")]
    events = {(e.reason, e.message) for e in kube.events(api, namespace)
              if e.involved_object.kind == "MPIJob"}
    done = OPERATORS["mpijobs"].succeeded
    assert (done[1], done[2].format(ns=namespace, name="fid")) in events
    assert ("MPIJobRunning", f"MPIJob {namespace}/fid is running") in events


def test_active_deadline_text_is_the_runners(plane, api, namespace):
    start_mpijob(api, namespace, active_deadline_seconds=2)
    status = finished(api, namespace, "fid")["status"]
    failed = kube.conditions({"status": status})["Failed"]
    assert (failed["reason"], failed["message"]) == (local_status.DEADLINE_EXCEEDED,
                                                     local_status.DEADLINE_MESSAGE)
    assert status["replicaStatuses"]["Launcher"] == {"failed": 1}


def raw(api, method: str, path: str, body=None, query=()):
    """(code, JSON body, Warning headers) of one request, errors included."""
    try:
        data, code, headers = api.call_api(
            path, method, body=body, query_params=list(query), response_type="object",
            auth_settings=["BearerToken"], _return_http_data_only=False)
        return code, data, headers.get("Warning")
    except ApiException as e:
        return e.status, json.loads(e.body), None


def test_api_server_answers_as_the_api_double(plane, api, namespace):
    """Create with an unknown field (Warn, Strict), 409, 404, DELETE at once, watch from a
    compacted resourceVersion: the same requests to kube-apiserver and to FakeKube."""
    with FakeKube() as fake:
        fake.controller = None
        fake_api = fake.api_client()
        answers = []
        for c, ns in ((api, namespace), (fake_api, namespace)):
            job = jobs.component_job(ns, "fid", workers=1)
            job["spec"]["slotPerWorker"] = 2
            coll = f"/apis/{G}/{V}/namespaces/{ns}/{P}"
            first = raw(c, "POST", coll, job)
            strict = raw(c, "POST", coll, {**job, "metadata": {"name": "fid2"}},
                         [("fieldValidation", "Strict")])
            dup = raw(c, "POST", coll, job)
            missing = raw(c, "GET", f"{coll}/nope")
            gone = raw(c, "DELETE", f"{coll}/fid", {"propagationPolicy": "Background"})
            answers.append((first[0], first[2], "slotPerWorker" in first[1]["spec"],
                            strict[:2], dup[:2], missing[:2],
                            (gone[0], gone[1]["kind"], gone[1]["status"])))
        assert answers[0] == answers[1]
        assert answers[0][1] == f'299 - "unknown field \\"{k8s_fields.dotted(("spec",), "slotPerWorker")}\\""'
        expired = []
        for c, ns in ((api, namespace), (fake_api, namespace)):
            if c is fake_api:
                fake.expire_watches()
            r = c.call_api(f"/apis/{G}/{V}/namespaces/{ns}/{P}", "GET", query_params=[
                ("watch", "true"), ("resourceVersion", "1"), ("timeoutSeconds", "2")],
                _preload_content=False, auth_settings=["BearerToken"])
            ev = json.loads(r[0].data.decode().splitlines()[0])
            expired.append((ev["type"], ev["object"]["code"], ev["object"]["reason"],
                            re.sub(r"\d+", "N", ev["object"]["message"])))
        assert expired[0] == expired[1] == ("ERROR", 410, "Expired",
                                            "too old resource version: N (N)")


def test_refusals_read_as_the_doctor_double(plane, api, namespace, tmp_path):
    """A ServiceAccount without rights: listing nodes, and impersonating another
    ServiceAccount for a SelfSubjectAccessReview, refused in the same words."""
    plane.kubectl("create", "serviceaccount", "kfp-gpu-launcher", "-n", namespace)
    sa = sa_client(plane, namespace, tmp_path)
    user = f"system:serviceaccount:{namespace}:kfp-gpu-launcher"
    review = {"spec": {"resourceAttributes": {"group": G, "resource": P, "verb": "create",
                                              "namespace": namespace}}}
    imp = f"system:serviceaccount:{namespace}:other"
    with FakeCluster(tokens={"t": (user, ["system:authenticated"])}, cluster_grants={}) as fc:
        cfg = client.Configuration()
        cfg.host, cfg.api_key = fc.url, {"authorization": "Bearer t"}
        fake = client.ApiClient(cfg)
        texts = []
        for c in (sa, fake):
            nodes = raw(c, "GET", "/api/v1/nodes")
            c.set_default_header("Impersonate-User", imp)
            ssar = raw(c, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                       review)
            texts.append((nodes[0], nodes[1]["message"], nodes[1]["details"],
                          ssar[0], ssar[1]["message"], ssar[1]["details"]))
    assert texts[0] == texts[1]


def test_the_schedulers_words_are_the_doubles(plane, api, namespace):
    """A pod asking 64 GPUs: kube-scheduler's PodScheduled message has the shape the API
    double serves (tests/doubles/pod_statuses.py UNSCHEDULABLE), node counts aside."""
    custom = kube.custom(api)
    # Only a DeviceClass mapping an extended resource to DRA (KEP-5004
    # spec.extendedResourceName) changes the answer; the real node's gpu.example.com
    # class maps none.
    kube.wait_for(lambda: not [c for c in custom.list_cluster_custom_object(
        "resource.k8s.io", "v1", "deviceclasses")["items"]
        if (c.get("spec") or {}).get("extendedResourceName")], 120,
        "no DeviceClass with extendedResourceName (one mapping nvidia.com/gpu to DRA "
        "changes the scheduler's words)")
    kube.core(api).create_namespaced_pod(namespace, {
        "metadata": {"name": "big"}, "spec": {
            "containers": [{"name": "c", "image": "x",
                            "resources": {"limits": {"nvidia.com/gpu": "64"}}}],
            # the real node's taint too (where the plane has one): a node counts as
            # "Insufficient" as in the double, not as "had untolerated taint(s)"
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"},
                            {"key": "kfp-gpu.test/real-node", "operator": "Exists"}]}})
    cond = kube.wait_for(lambda: next((c for c in kube.core(api).read_namespaced_pod(
        "big", namespace).status.conditions or [] if c.type == "PodScheduled"), None), 60,
        "PodScheduled")
    served = UNSCHEDULABLE["conditions"][0]
    assert (cond.status, cond.reason) == (served["status"], served["reason"])
    assert re.sub(r"\d+/\d+|\b\d+\b", "N", cond.message) == re.sub(
        r"\d+/\d+|\b\d+\b", "N", served["message"])


def test_trainjob_failure_and_hostfile_as_the_double_and_runner_say(tier2, api, namespace):
    runtime = next(d for d in yaml.safe_load_all(tier2.kubectl(
        "kustomize", str(MANIFESTS / "trainer")).stdout) if d)
    tier2.apply([runtime])
    job = jobs.component_job(namespace, "tj", workers=2, backend=backends.TRAINJOB)
    kube.custom(api).create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1",
                                                     namespace, "trainjobs", job)
    jobs.launcher_pod(api, namespace, "tj", backend=backends.TRAINJOB)
    plan = plan_trainjob.plan(job, runtime)
    assert kube.core(api).read_namespaced_config_map(
        "tj-mpi-hostfile", namespace).data["hostfile"] == plan.hostfile
    assert kube.core(api).read_namespaced_secret("tj-mpi-ssh-auth", namespace)
    jobs.end_launcher(api, namespace, "tj", "fail", backend=backends.TRAINJOB)
    def failed_trainjob():
        o = kube.get_custom(api, "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs",
                            "tj")
        return o if kube.conditions(o).get("Failed") else None

    tj = kube.wait_for(failed_trainjob, 90, "TrainJob Failed")
    failed = kube.conditions(tj)["Failed"]
    _, reason, message = OPERATORS["trainjobs"].failed
    assert (failed["reason"], failed["message"]) == (reason, message.format(name="tj"))
    runner = local_status.for_plan(plan)
    runner.launcher_failed("tj-launcher-0-0", 1, "Error")
    assert runner.condition("Failed")["reason"] == failed["reason"]
    assert runner.condition("Failed")["message"].startswith(failed["message"])
