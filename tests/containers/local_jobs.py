"""Helpers the local-runner container tests share (test_local_mpijob.py,
test_local_trainjob.py): a sampler of the job's processes and conditions, running a job to
its end, and checking that nothing of it is left."""

from __future__ import annotations

import contextlib
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from kfp_gpu.mpi import local_runner


class Sampler:
    """Samples ``docker top`` of the job's running containers until stopped: (uid, args)
    of every process seen, and each condition type in the order it appeared."""

    def __init__(self, runner: local_runner.LocalMPIJobRunner):
        self.runner, self.procs, self.conditions = runner, set(), []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def on_status(self, status: dict) -> None:
        for c in status["conditions"]:
            if c["status"] == "True" and c["type"] not in self.conditions:
                self.conditions.append(c["type"])

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            for c in self.runner.containers():
                top = {}
                with contextlib.suppress(Exception):  # the container may just have stopped
                    top = c.top(ps_args="-o pid,uid,args")
                for row in top.get("Processes") or []:
                    self.procs.add((c.name, int(row[1]), row[2]))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def ssh_files(workspace: Path) -> dict[str, tuple[int, int, int]]:
    """The ssh Secret's files in a runner's workspace: name -> (mode, uid, gid)."""
    return {p.name: (stat.S_IMODE(p.stat().st_mode), p.stat().st_uid, p.stat().st_gid)
            for p in (workspace / "ssh").iterdir()}


def run_job(client, job: dict, ssh_expected: Mapping[str, tuple[int, int, int]], **kw,
            ) -> tuple[dict, Sampler, local_runner.LocalMPIJobRunner]:
    """Run ``job`` (``kw``: runner arguments, e.g. ``runtime=``) to the end, checking the
    ssh files written before the containers start equal ``ssh_expected``; returns (status,
    sampler, runner) with the runner's containers still present (the caller deletes them)."""
    runner = local_runner.LocalMPIJobRunner(job, client, poll_s=0.2, **kw)
    sampler = Sampler(runner)
    runner.on_status = sampler.on_status
    runner.delete()  # what an interrupted earlier run may have left
    with sampler:
        runner.start()
        assert ssh_files(runner.workspace) == dict(ssh_expected)
        status = runner.wait()
    return status, sampler, runner


def assert_gone(client, runner: local_runner.LocalMPIJobRunner, workspace: Path) -> None:
    """Delete the job and check containers, network and workspace are gone."""
    runner.delete()
    assert runner.containers() == []
    assert client.networks.list(filters={"label": f"{local_runner.JOB_LABEL}={runner.key}"}) == []
    assert not workspace.exists()
