"""The plane's supervisor: what the plane runs is restarted when it exits, as a cluster
restarts a static pod or a Deployment's pod, so that a fault on the plane is met the way
a cluster meets it (kube-controller-manager, kube-scheduler and mpi-operator exit on
purpose when they lose their leader Lease, expecting to be restarted).

    python -m testcluster.supervise DIR     # started by controlplane.up, stopped by down

One small process per plane. It reads what to supervise from ``DIR/supervise``: one
``<name>.json`` per process (argv, env, cwd, log file, pid files), written by
:func:`testcluster.processes.spawn` (``Plane.start_process`` delegates to it) and
:func:`testcluster.processes.adopt` (the components kwokctl started: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller, their
argv/env/cwd read from /proc, their pid files kwokctl's own
``<cluster>/pids/<component>.pid``). A process that exits is started again with the same
argv, env and cwd after the kubelet's container restart backoff (:class:`Policy`); each
restart is one line in ``DIR/logs/supervisor.log`` (name, exit status, restart count,
delay) and its new pid is written to every pid file of the spec, so ``down`` and
``kwokctl delete cluster`` stop the new process.

It is a child subreaper (prctl ``PR_SET_CHILD_SUBREAPER``, Linux) and starts what it
supervises itself, ``kwokctl create cluster`` included
(:func:`testcluster.processes.run_once`), so the components kwokctl forks and leaves are
reparented to it and every exit status reaches it (``waitpid``). ``<name>.held`` (:func:`hold`) keeps it from restarting ``name``: a
deliberate stop (``Plane.stop_process``, a test stopping a process on purpose) is not
undone; :func:`release` lets it start the process again at once; :func:`reset_backoff`
starts a process's backoff over. ``<name>.state`` is what it did last (pid, restarts, last
exit), for tests and people.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Container restart backoff of the kubelet (k8s.io/kubernetes v1.36.3 pkg/kubelet/kubelet.go:
#: ``initialCrashLoopBackOff`` 10 s, ``MaxCrashLoopBackOff`` = v1beta1.MaxContainerBackOff
#: 300 s, ``crashLoopBackOff.HasExpiredFunc``: reset after 600 s since the last update).
INITIAL_S, MAX_S, RESET_S = 10.0, 300.0, 600.0
POLL_S = 0.25
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


@dataclass(frozen=True)
class Policy:
    """Restart delays: the kubelet's crash-loop backoff (client-go v0.36.3
    util/flowcontrol/backoff.go ``Backoff.Next``: the first delay ``initial_s``, then
    doubled up to ``max_s``; back to ``initial_s`` once ``reset_s`` passed since the last
    update). The kubelet's has no jitter (``NewBackOff``: maxJitterFactor 0)."""

    initial_s: float = INITIAL_S
    max_s: float = MAX_S
    reset_s: float = RESET_S

    def next(self, previous: float | None, since_update: float | None) -> float:
        """The delay before the next restart, given the ``previous`` one (None: never
        restarted) and the seconds since it was set. Pure."""
        if previous is None or since_update is None or since_update > self.reset_s:
            return self.initial_s
        return min(previous * 2, self.max_s)


#: The kubelet's policy (the default).
KUBELET = Policy()


# ---------------------------------------------------------------- the plane folder
def folder(plane_dir: Path) -> Path:
    return Path(plane_dir) / "supervise"


def pid_file(plane_dir: Path) -> Path:
    """The supervisor's own pid file (outside ``pids/``: down stops it first)."""
    return Path(plane_dir) / "supervisor.pid"


def log_file(plane_dir: Path) -> Path:
    return Path(plane_dir) / "logs" / "supervisor.log"


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def _read_json(path: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def _read_pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(Path(path).read_text().strip())
    return None


def alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie does not: it has exited, unreaped)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def running(plane_dir: Path) -> bool:
    """Whether the plane's supervisor runs."""
    return alive(_read_pid(pid_file(plane_dir)))


def hold(plane_dir: Path, name: str) -> None:
    """Keep the supervisor from restarting ``name`` (until :func:`release`)."""
    _write(folder(plane_dir) / f"{name}.held", "")


def release(plane_dir: Path, name: str) -> None:
    """Let the supervisor restart ``name`` again; one held and not running is started at
    once (no backoff: it did not crash)."""
    (folder(plane_dir) / f"{name}.held").unlink(missing_ok=True)


def reset_backoff(plane_dir: Path, name: str, timeout: float = 10) -> None:
    """Start ``name``'s restart backoff over (its next crash waits :data:`INITIAL_S`), as
    for a new pod: a test that crashes a process on purpose does not inherit the delays
    an earlier test's crashes built up. Returns once the supervisor has done it.

    Raises:
        RuntimeError: the supervisor did not take it in ``timeout`` seconds.
    """
    f = folder(plane_dir) / f"{name}.reset"
    _write(f, "")
    end = time.monotonic() + timeout
    while f.exists() and time.monotonic() < end:
        time.sleep(0.05)
    if f.exists():
        f.unlink(missing_ok=True)
        raise RuntimeError(f"the supervisor did not reset {name}'s backoff: is it running?")


def is_held(plane_dir: Path, name: str) -> bool:
    return (folder(plane_dir) / f"{name}.held").exists()


def state(plane_dir: Path, name: str) -> dict:
    """What the supervisor last did for ``name``: ``{"token", "pid", "restarts",
    "last_exit", "delay_s"[, "rc"]}`` ({} before anything)."""
    return _read_json(folder(plane_dir) / f"{name}.state") or {}


def write_spec(plane_dir: Path, name: str, argv: list[str], env: dict[str, str], cwd: str,
               log: str, pid_files: list[str], *, adopt: bool = False,
               once: bool = False) -> str:
    """Record ``name`` for the supervisor (mode 0600: it holds an environment); returns
    the spec's token (a new token starts the process anew: restart count 0).
    ``adopt``: the pid in ``pid_files`` is the process (started elsewhere)."""
    token = uuid.uuid4().hex
    release(plane_dir, name)
    _write(folder(plane_dir) / f"{name}.json", json.dumps({
        "name": name, "argv": list(argv), "env": dict(env), "cwd": str(cwd), "log": str(log),
        "pid_files": [str(p) for p in pid_files], "adopt": adopt, "once": once,
        "token": token}), mode=0o600)
    return token


# ---------------------------------------------------------------- the supervisor
def exit_text(status: int | None) -> str:
    """A ``waitpid`` status in words: ``exit status 1``, ``killed by SIGKILL``, or
    ``exit status unknown`` (None: it was not the supervisor's child). Pure."""
    if status is None:
        return "exit status unknown"
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return f"exit status {code}"
    with contextlib.suppress(ValueError):
        return f"killed by {signal.Signals(-code).name}"
    return f"killed by signal {-code}"


@dataclass
class _Proc:
    token: str
    pid: int | None = None
    restarts: int = 0
    delay: float | None = None  # the last backoff delay
    updated: float | None = None  # monotonic time the delay was set
    due: float | None = None  # monotonic time of the pending restart
    exit: int | None = None  # the wait status of the exit being handled
    held: bool = False


class Supervisor:
    """The loop of ``python -m testcluster.supervise`` (see the module docstring)."""

    def __init__(self, plane_dir: Path, policy: Policy = KUBELET, clock=time.monotonic):
        self.dir, self.policy, self.clock = Path(plane_dir), policy, clock
        self.procs: dict[str, _Proc] = {}
        self.exits: dict[int, int] = {}  # pid -> wait status, of reaped children
        self.popens: dict[int, subprocess.Popen] = {}
        self.stopping = False

    def say(self, line: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(log_file(self.dir), "a") as f:
            f.write(f"{stamp} {line}\n")

    def reap(self) -> None:
        """Collect the exit status of every child that ended (adopted orphans too)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exits[pid] = status
            p = self.popens.pop(pid, None)
            if p is not None:  # so that Popen never waits for it itself
                p.returncode = os.waitstatus_to_exitcode(status)

    def _launch(self, spec: dict) -> int:
        with open(spec["log"], "ab") as out:
            p = subprocess.Popen(spec["argv"], env=spec["env"], cwd=spec["cwd"], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self.popens[p.pid] = p
        for f in spec["pid_files"]:
            _write(Path(f), str(p.pid))
        return p.pid

    def _save(self, name: str, p: _Proc, **extra) -> None:
        _write(folder(self.dir) / f"{name}.state", json.dumps({
            "token": p.token, "pid": p.pid, "restarts": p.restarts, "delay_s": p.delay,
            "last_exit": None if p.exit is None else exit_text(p.exit), **extra}))

    def tend(self, spec: dict) -> None:
        """One look at one spec: start, adopt, wait out the backoff, or restart."""
        name, now = spec["name"], self.clock()
        p = self.procs.get(name)
        if p is None or p.token != spec["token"]:
            p = self.procs[name] = _Proc(spec["token"])
            recorded = next((_read_pid(f) for f in spec["pid_files"]), None)
            # adopted, or started by a supervisor before this one (spawn removes the pid
            # files of what it starts anew)
            if spec["adopt"] or (not spec["once"] and alive(recorded)):
                p.pid = recorded
            else:
                p.pid = self._launch(spec)
                self.say(f"started {name}: pid {p.pid}")
            self._save(name, p)
            return
        reset = folder(self.dir) / f"{name}.reset"
        if reset.exists():  # the next delay is the first (Policy.next without an update)
            p.updated = None
            reset.unlink(missing_ok=True)
        if spec["once"]:
            if p.pid in self.exits and state(self.dir, name).get("rc") is None:
                p.exit = self.exits.pop(p.pid)
                self.say(f"{name} ended: {exit_text(p.exit)}")
                self._save(name, p, rc=os.waitstatus_to_exitcode(p.exit))
            return
        pid = next((_read_pid(f) for f in spec["pid_files"]), None) or p.pid
        if alive(pid):
            p.pid, p.due = pid, None
            return
        if is_held(self.dir, name):
            if not p.held:
                p.held, p.due = True, None
                self.say(f"{name} held: left down (pid {pid} "
                         f"{exit_text(self.exits.get(pid))})")
            return
        if p.held:  # released: started again at once; not a crash, the backoff stays
            p.held, p.exit = False, self.exits.pop(pid, None)
            self._restart(spec, p, "released from hold")
            return
        if p.due is None:
            p.exit = self.exits.pop(pid, None)
            p.delay = self.policy.next(p.delay, None if p.updated is None else now - p.updated)
            p.updated, p.due = now, now + p.delay
            return
        if now >= p.due:
            p.due = None
            self._restart(spec, p, f"after {p.delay:g} s backoff")

    def _restart(self, spec: dict, p: _Proc, why: str) -> None:
        old = p.pid
        p.restarts += 1
        p.pid = self._launch(spec)
        self.say(f"restarted {spec['name']} ({exit_text(p.exit)}, pid {old}), restart "
                 f"{p.restarts}, {why}: pid {p.pid}")
        self._save(spec["name"], p)

    def step(self) -> None:
        self.reap()
        for f in sorted(folder(self.dir).glob("*.json")):
            spec = _read_json(f)
            if spec and spec.get("name") == f.stem:
                try:
                    self.tend(spec)
                except OSError as e:  # a binary gone, a folder removed: say so, go on
                    self.say(f"{f.stem}: cannot start: {e}")
        if len(self.exits) > 10000:  # statuses nobody asked for (orphans' children)
            self.exits.clear()

    def run(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        folder(self.dir).mkdir(parents=True, exist_ok=True)
        _write(pid_file(self.dir), str(os.getpid()))
        self.say(f"supervisor {os.getpid()} up ({self.policy})")
        while not self.stopping:
            self.step()
            time.sleep(POLL_S)
        self.say(f"supervisor {os.getpid()} stopped; what it supervised keeps running")

    def _stop(self, *_) -> None:
        self.stopping = True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testcluster.supervise",
                                description="Restart what a test plane runs when it exits.")
    p.add_argument("dir", type=Path, help="the plane's folder")
    p.add_argument("--backoff-initial", type=float, default=INITIAL_S)
    p.add_argument("--backoff-max", type=float, default=MAX_S)
    p.add_argument("--backoff-reset", type=float, default=RESET_S)
    a = p.parse_args(argv)
    Supervisor(a.dir, Policy(a.backoff_initial, a.backoff_max, a.backoff_reset)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
