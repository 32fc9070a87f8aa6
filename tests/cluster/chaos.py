"""Helpers of the chaos scenarios on the real node (test_chaos.py, test_chaos_node.py,
test_chaos_etcd.py, test_secret_leaks.py; docs/reliability.md): the sleeping job they
follow, the census of every object a namespace saw (:class:`Census`), the plane's
processes as its supervisor records them, and the component's launcher as a process."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

from kfp_gpu.mpi.spec import backends, crd
from testcluster import supervise
from tests.cluster import jobs, kube
from tests.cluster.real_node import ON_REAL_NODE

CONTROLLERS = ("kube-controller-manager", "kube-scheduler", "mpi-operator")


def sleeper(ns: str, name: str, image: str, seconds: int, backend=backends.MPIJOB) -> dict:
    """A job of the horovod image whose 2 ranks print RANK_UP and sleep ``seconds``, then
    end (mpirun exits 0, the job succeeds); every pod on the real node."""
    from kfp_gpu.mpi.spec import mpijob, trainjob
    from kfp_gpu.mpi.spec.options import MPIJobOptions

    opts = MPIJobOptions.from_settings(
        name=name, namespace=ns, image=image,
        program=("sh", "-c", f"echo RANK_UP $(hostname); exec sleep {seconds}"),
        workers=2, gpu="none", shm_size="64Mi", worker_cpu="100m", worker_memory="256Mi",
        tolerations=ON_REAL_NODE["tolerations"], node_selector=ON_REAL_NODE["node_selector"])
    if backend is backends.TRAINJOB:
        return trainjob.build(opts, runtime_image=image)
    job = mpijob.build(opts)
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].update(
        {"tolerations": ON_REAL_NODE["tolerations"],
         "nodeSelector": ON_REAL_NODE["node_selector"]})
    return job


class Census(threading.Thread):
    """``{kind: {uid: name}}`` of everything seen in a namespace while it runs: every uid
    of the given kinds, LIST then WATCH from the list's resourceVersion (a LIST again
    after any error), so no object made while the API server answers is missed;
    :meth:`stop` ends it with a last LIST."""

    def __init__(self, api, ns: str, kinds: dict):
        super().__init__(daemon=True, name="census")
        self.api, self.ns, self.kinds = api, ns, kinds
        self.seen: dict[str, dict[str, str]] = {k: {} for k in kinds}
        self.roles: dict[str, str] = {}  # pod uid -> its role label
        self.relists = 0
        self._stop_event = threading.Event()

    def _note(self, kind: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        self.seen[kind][meta["uid"]] = meta["name"]
        labels = meta.get("labels") or {}
        self.roles[meta["uid"]] = labels.get(crd.JOB_ROLE_LABEL) or labels.get(
            "jobset.sigs.k8s.io/replicatedjob-name", "")

    def _list(self, kind: str) -> str:
        resp = self.kinds[kind](self.api, self.ns, _preload_content=False,
                               _request_timeout=(5, 30))
        body = json.loads(resp.data)
        for obj in body.get("items") or []:
            self._note(kind, obj)
        return body["metadata"]["resourceVersion"]

    def _follow(self, kind: str) -> None:
        from kubernetes import watch

        while not self._stop_event.is_set():
            try:
                rv = self._list(kind)
                self.relists += 1
                for ev in watch.Watch().stream(self.kinds[kind], self.api, self.ns,
                                               resource_version=rv, timeout_seconds=20):
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._note(kind, ev["raw_object"])
                    if self._stop_event.is_set():
                        return
            except Exception:  # noqa: BLE001 - the API server is away: list again
                self._stop_event.wait(1)

    def run(self) -> None:
        threads = [threading.Thread(target=self._follow, args=(k,), daemon=True)
                   for k in self.kinds]
        for t in threads:
            t.start()
        self._stop_event.wait()
        for t in threads:
            t.join(30)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(40)
        for kind in self.kinds:
            self._list(kind)

    def count(self, kind: str, role: str | None = None) -> int:
        return len([u for u in self.seen[kind] if role is None or self.roles.get(u) == role])


def _list_pods(api, ns, **kw):
    return kube.core(api).list_namespaced_pod(ns, **kw)


def _list_jobs(api, ns, **kw):
    from kubernetes import client

    return client.BatchV1Api(api).list_namespaced_job(ns, **kw)


def _lister(group: str, version: str, plural: str):
    def list_(api, ns, **kw):
        return kube.custom(api).list_namespaced_custom_object(group, version, ns, plural, **kw)
    return list_


MPIJOB_KINDS = {"Pod": _list_pods, "Job": _list_jobs,
                "MPIJob": _lister(crd.GROUP, crd.VERSION, crd.PLURAL)}
TRAINJOB_KINDS = {"Pod": _list_pods, "Job": _list_jobs,
                  "JobSet": _lister("jobset.x-k8s.io", "v1alpha2", "jobsets"),
                  "TrainJob": _lister("trainer.kubeflow.org", "v1alpha1", "trainjobs")}


def answering(fn):
    """``fn()`` or None while the API server does not answer."""
    try:
        return fn()
    except Exception:  # noqa: BLE001 - the API server is away
        return None


def ranks_up(api, ns: str, name: str, backend=backends.MPIJOB, timeout: float = 300) -> None:
    """Wait until the job's Launcher runs and both ranks printed RANK_UP."""
    def up() -> bool:
        pod = (kube.pods(api, ns, backend.launcher_selector(name)) or [None])[0]
        if pod is None or pod.status.phase != "Running":
            return False
        container = backend.launcher_container
        log = kube.core(api).read_namespaced_pod_log(pod.metadata.name, ns,
                                                     container=container)
        return log.count("RANK_UP") == 2
    kube.wait_for(lambda: answering(up), timeout, f"{ns}/{name}: Launcher Running, 2 ranks up",
                  interval=1)


def component_pid(plane, name: str) -> int:
    """The pid the plane records for ``name`` (kwokctl's record for its components)."""
    own = plane.pid_file(name)
    if own.exists():
        return int(own.read_text())
    [f] = (plane.workdir / "clusters").glob(f"*/pids/{name}.pid")
    return int(f.read_text())


def fresh(plane, *names: str) -> None:
    """Start the restart backoff of ``names`` over, as for new pods
    (:func:`testcluster.supervise.reset_backoff`): a scenario does not inherit the delays
    an earlier one's crashes built up (the kubelet forgets them only after 600 s)."""
    for name in names:
        supervise.reset_backoff(plane.dir, name)


def restarts(plane, name: str) -> int:
    return supervise.state(plane.dir, name).get("restarts", 0)


def logged_at(line: str) -> float:
    """The epoch seconds of a launcher log line (``logging``'s asctime, local time)."""
    stamp, ms = line[:23].split(",")
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000


def launcher_lines(err: str, pattern: str) -> list[str]:
    return [ln for ln in err.splitlines() if re.search(pattern, ln)]


def run_launcher(plane, job: dict, tmp: Path):
    """The component's launcher as a process (``python -m kfp_gpu.mpi.launch.launcher``)
    with its default backoff (1 s doubling to 30 s, 7 retries: 91 s of waits)."""
    return jobs.launcher_process(plane, job, tmp, "--backoff-initial", "1",
                                 "--watch-timeout", "30")


def finish(proc, timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


class Reader(threading.Thread):
    """Collects the lines of one stream of a process (its pipe never fills up)."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.lines = stream, []

    def run(self) -> None:
        for line in iter(self.stream.readline, ""):
            self.lines.append(line.rstrip("\n"))
