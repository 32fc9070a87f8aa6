"""Who holds GPUs on the plane, job by job: the gang checks of the preemption and load
scenarios (test_preemption, test_load). A pod holds its ``nvidia.com/gpu`` request from the
moment it is bound to a node (``spec.nodeName``, set by kube-scheduler's binding) until it
ends (phase Succeeded/Failed) or is gone; a job's pods are found by mpi-operator's
``training.kubeflow.org/job-name`` label (kubeflow/mpi-operator v0.8.2
pkg/apis/kubeflow/v2beta1/constants.go). Only the Workers request GPUs in the component's
MPIJob (the Launcher runs mpirun), so a job's gang is its GPU pods: all of them bound and
Running, or none.

Pure functions over pods and MPIJobs as the API serves them (JSON dicts), and a
:class:`Sampler` thread that LISTs them every ``period_s``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kfp_gpu.mpi.spec import crd

GPU = "nvidia.com/gpu"
ENDED = ("Succeeded", "Failed")


def gpus_requested(pod_spec: Mapping) -> int:
    """``nvidia.com/gpu`` a pod spec requests (each container's limit, else its request:
    an extended resource's request equals its limit)."""
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        total += int((res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU)
                     or 0)
    return total


def gpu_pods_expected(job: Mapping) -> int:
    """How many GPU pods the MPIJob's gang has: the replicas of each replica spec whose pod
    template requests GPUs."""
    specs = (job.get("spec") or {}).get("mpiReplicaSpecs") or {}
    return sum(int(s.get("replicas") or 1) for s in specs.values()
               if gpus_requested(((s.get("template") or {}).get("spec")) or {}) > 0)


def holds_gpus(pod: Mapping) -> bool:
    """Bound to a node, not ended, GPUs requested."""
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in ENDED and \
        gpus_requested(pod.get("spec") or {}) > 0


def holders(pods: Iterable[Mapping]) -> dict[str, list[Mapping]]:
    """job name -> its pods that hold GPUs."""
    out: dict[str, list[Mapping]] = {}
    for p in pods:
        job = ((p.get("metadata") or {}).get("labels") or {}).get(crd.JOB_NAME_LABEL)
        if job and holds_gpus(p):
            out.setdefault(job, []).append(p)
    return out


def half_gangs(pods: Iterable[Mapping], expected: Mapping[str, int]) -> dict[str, str]:
    """The jobs that hold GPUs with fewer than all their GPU pods Running: job -> what was
    seen (``1/2 GPU pods bound, 1 Running``). ``expected``: job -> :func:`gpu_pods_expected`
    (a job missing there counts as expecting more than it holds)."""
    out = {}
    for job, held in holders(pods).items():
        running = sum((p.get("status") or {}).get("phase") == "Running" for p in held)
        want = expected.get(job, len(held) + 1)
        if len(held) < want or running < len(held):
            out[job] = f"{len(held)}/{want} GPU pods bound, {running} Running"
    return out


def suspended(job: Mapping) -> bool:
    """``spec.runPolicy.suspend`` (Kueue keeps it true until it admits the job)."""
    return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def true_condition(job: Mapping, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def finished(job: Mapping) -> bool:
    return true_condition(job, "Succeeded") or true_condition(job, "Failed")


def list_json(api, ns: str, what: str) -> list[dict]:
    """``pods`` or ``mpijobs`` of ``ns`` as the API's JSON."""
    from kubernetes import client

    if what == "pods":
        resp = client.CoreV1Api(api).list_namespaced_pod(ns, _preload_content=False,
                                                         _request_timeout=30)
    else:
        resp = client.CustomObjectsApi(api).list_namespaced_custom_object(
            crd.GROUP, crd.VERSION, ns, crd.PLURAL, _preload_content=False,
            _request_timeout=30)
    try:
        return json.loads(resp.data).get("items") or []
    finally:
        resp.release_conn()


@dataclass
class Span:
    """A run of consecutive samples in which one job broke the gang rule."""

    job: str
    first: float
    last: float
    seen: str

    @property
    def seconds(self) -> float:
        return self.last - self.first


class Sampler(threading.Thread):
    """Every ``period_s``: LIST the namespace's pods, then its MPIJobs (in that order, so a
    job seen holding pods was admitted before the MPIJob list: Kueue unsuspends before
    mpi-operator makes pods), and record

    - ``times[job][event]``: the first sample (monotonic s) at which the job was seen
      ``created``, ``admitted`` (``runPolicy.suspend`` false: Kueue's
      ``RunWithPodSetsInfo``), ``running`` (condition Running True) and ``finished``
      (Succeeded or Failed);
    - ``spans``: runs of consecutive samples in which a job held GPUs with fewer than all
      its GPU pods Running (:func:`half_gangs`);
    - ``held_while_suspended``: (time, job, holders) for a job holding GPUs while its
      MPIJob is suspended, i.e. not admitted;
    - ``max_admitted``: the most jobs admitted and not finished at one sample;
      ``max_gpus``: the most GPUs held at one sample.
    """

    def __init__(self, api, namespace: str, period_s: float = 0.5):
        super().__init__(daemon=True, name="gang-sampler")
        self.api, self.namespace, self.period_s = api, namespace, period_s
        self.times: dict[str, dict[str, float]] = {}
        self.spans: list[Span] = []
        self.held_while_suspended: list[tuple[float, str, int]] = []
        self.max_admitted = self.max_gpus = self.samples = 0
        self.errors: list[str] = []
        self._halt = threading.Event()
        self._open: dict[str, Span] = {}

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.sample()
            except Exception as e:  # noqa: BLE001 - a missed sample is reported, not fatal
                self.errors.append(str(e)[:200])
            self._halt.wait(self.period_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        self.spans.extend(self._open.values())
        self._open.clear()

    def sample(self) -> None:
        pods = list_json(self.api, self.namespace, "pods")
        mpijobs = {j["metadata"]["name"]: j for j in list_json(self.api, self.namespace,
                                                                "mpijobs")}
        now = time.monotonic()
        self.samples += 1
        for name, job in mpijobs.items():
            t = self.times.setdefault(name, {})
            t.setdefault("created", now)
            if not suspended(job):
                t.setdefault("admitted", now)
            if true_condition(job, "Running"):
                t.setdefault("running", now)
            if finished(job):
                t.setdefault("finished", now)
        held = holders(pods)
        self.max_gpus = max(self.max_gpus, sum(gpus_requested(p["spec"])
                                               for ps in held.values() for p in ps))
        self.max_admitted = max(self.max_admitted, sum(
            not suspended(j) and not finished(j) for j in mpijobs.values()))
        for name, ps in held.items():
            if name in mpijobs and suspended(mpijobs[name]):
                self.held_while_suspended.append((now, name, len(ps)))
        expected = {n: gpu_pods_expected(j) for n, j in mpijobs.items()}
        bad = half_gangs(pods, expected)
        for name, seen in bad.items():
            span = self._open.get(name)
            if span is None:
                self._open[name] = Span(name, now, now, seen)
            else:
                span.last = now
        for name in [n for n in self._open if n not in bad]:
            self.spans.append(self._open.pop(name))

    def longest_span(self) -> Span | None:
        return max(self.spans, key=lambda s: s.seconds, default=None)
