"""etcd stopped for a few seconds while the component's launcher waits on a running job on
the real node (marker ``chaos``: ``make chaos`` on a ``make cluster-up NODE=1`` plane;
docs/reliability.md, scenario 4).

etcd (kwokctl's, adopted by the plane's supervisor, testcluster/supervise.py) is SIGKILLed
and held down for :data:`DOWN_S` s, then started again by the supervisor with the same
argv on the same data directory. Meanwhile kube-apiserver keeps running without its
storage: a write fails (the test makes one), while reads and watches from a
resourceVersion are served from its watch cache (k8s.io/apiserver v0.36.3
pkg/storage/cacher), whose watch on etcd the etcd client resumes once etcd answers
(go.etcd.io/etcd/client/v3 watch.go). The launcher only reads (its WATCH asks again every
5 s here, ``--watch-timeout 5``), so it may see nothing of the gap; a request of its that
fails is retried with the backoff of kfp_gpu/mpi/launch/retry.py (7 retries over at most
91 s) and told in two lines (kfp_gpu/mpi/launch/watch.py). Controllers whose leader
Lease could not be renewed within their ``RenewDeadline`` (10 s) exit and are restarted
by the supervisor (client-go tools/leaderelection; mpi-operator v0.8.2 server.go).

The launcher must recover (the gap is far inside its budget): the job ends Succeeded, the
component exits 0, and every object of the namespace was made once (:class:`Census`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid

import pytest

from testcluster import supervise
from tests.cluster import jobs, kube
from tests.cluster.chaos import (
    CONTROLLERS,
    MPIJOB_KINDS,
    Census,
    answering,
    component_pid,
    finish,
    launcher_lines,
    ranks_up,
    restarts,
    sleeper,
)

pytestmark = [pytest.mark.node, pytest.mark.chaos, pytest.mark.timeout(900)]

#: Seconds etcd stays down ("a few seconds").
DOWN_S = 8
#: The launcher's retry budget: 7 retries, 1 s doubling to 30 s (kfp_gpu/mpi/launch/retry.py
#: DEFAULT_BACKOFF, 1 + 2 + 4 + 8 + 16 + 30 + 30 s).
BUDGET_S = 91


def test_etcd_stopped_for_seconds_mid_run(supervised, api, namespace, horovod, tmp_path):
    from kfp_gpu.mpi.launch.retry import DEFAULT_BACKOFF

    assert sum(DEFAULT_BACKOFF.delay(k) for k in range(DEFAULT_BACKOFF.attempts - 1)) == \
        BUDGET_S
    plane = supervised
    name = f"etcdgap-{uuid.uuid4().hex[:5]}"
    census = Census(api, namespace, MPIJOB_KINDS)
    census.start()
    proc = jobs.launcher_process(plane, sleeper(namespace, name, horovod, 120),
                                 tmp_path, "--backoff-initial", "1", "--watch-timeout", "5")
    try:
        ranks_up(api, namespace, name)
        before = {c: restarts(plane, c) for c in (*CONTROLLERS, "etcd", "kube-apiserver")}
        supervise.hold(plane.dir, "etcd")
        t0 = time.monotonic()
        os.kill(component_pid(plane, "etcd"), signal.SIGKILL)
        time.sleep(1)
        # the outage is real: a write needs etcd (the watch cache serves only reads)
        probe = plane.kubectl("create", "configmap", "probe", "-n", namespace,
                              "--request-timeout=4s", check=False, timeout=30)
        time.sleep(max(0.0, DOWN_S - (time.monotonic() - t0)))
        supervise.release(plane.dir, "etcd")
        kube.wait_for(lambda: answering(lambda: plane.kubectl(
            "get", "--raw", "/readyz", check=False, timeout=5).returncode == 0), 120,
            "the API server ready again", interval=0.5)
        ready_s = time.monotonic() - t0
        out, err = finish(proc, 600)
        total_s = time.monotonic() - t0
    finally:
        supervise.release(plane.dir, "etcd")
        if proc.poll() is None:
            proc.kill()
        census.stop()
    assert probe.returncode != 0, probe.stdout
    assert proc.returncode == 0, err[-4000:]
    assert f"MPIJob {namespace}/{name}: Succeeded" in out
    gap = launcher_lines(err, r"(watch: the API server does not answer|transient error)")
    again = launcher_lines(err, r"(answered again after|answered after \d+ retries)")
    assert len(gap) == len(again) <= 2, "\n".join(gap + again) or err[-3000:]
    assert not launcher_lines(err, r"retry \d+/\d+"), err[-3000:]  # no line per retry
    gaps = [float(m.group(1)) for m in (re.search(r"after ([\d.]+) s", ln) for ln in again)
            if m]
    assert all(g <= BUDGET_S for g in gaps), again
    record = json.loads((tmp_path / "record.json").read_text())
    assert census.seen["MPIJob"] == {record["uid"]: name}, census.seen["MPIJob"]
    assert census.count("Pod", "launcher") == 1 and census.count("Pod", "worker") == 2, \
        census.seen["Pod"]
    assert census.count("Job") == 1, census.seen["Job"]
    restarted = {c: restarts(plane, c) - n for c, n in before.items() if restarts(plane, c) > n}
    print(f"\netcd down {DOWN_S} s (held), API server ready {ready_s:.1f} s after the kill; "
          f"restarted: {restarted or 'etcd only'}; job done {total_s:.0f} s after the kill; "
          f"launcher: {len(gap)} outage(s); a write during the gap: "
          f"{probe.stderr.strip()[-160:]}")
    for line in gap + again + launcher_lines(err, "nobody reconciles|reconciled again"):
        print(f"  {line}")
