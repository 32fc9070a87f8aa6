"""The plane's supervisor (testcluster/supervise.py, testcluster/processes.py) without a
plane: a real supervisor process over a plane folder in tmp_path, supervising small
stand-in processes, with a fast backoff policy; then ``controlplane.down`` must stop it
first and leave nothing running.

Upstream behaviour it copies: the kubelet's container restart backoff
(k8s.io/kubernetes v1.36.3 pkg/kubelet/kubelet.go: ``initialCrashLoopBackOff`` 10 s,
``MaxCrashLoopBackOff`` 300 s, reset after 600 s; client-go util/flowcontrol/backoff.go
``Next`` doubles), and kwokctl's pid records (sigs.k8s.io/kwok v0.8.0
pkg/kwokctl/runtime/exec.go ``ForkExec``: a component forked in a new session, its pid in
``<cluster>/pids/<component>.pid``, which ``kwokctl delete cluster`` kills).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from testcluster import controlplane, processes, supervise

FAST = supervise.Policy(initial_s=0.3, max_s=1.2, reset_s=30)
SLEEP = shutil.which("sleep")

#: A stand-in daemon: records its pid, argv, $MARK and cwd in $OUT/<pid>.json, then sleeps.
RECORDER = ("import json, os, sys, time; "
            "open(os.path.join(os.environ['OUT'], f'{os.getpid()}.json'), 'w').write("
            "json.dumps({'argv': sys.argv, 'mark': os.environ.get('MARK'), "
            "'cwd': os.getcwd()})); time.sleep(300)")


def wait_for(fn, timeout: float = 10, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def log_lines(plane: Path, word: str = "restarted") -> list[str]:
    f = supervise.log_file(plane)
    return [ln for ln in f.read_text().splitlines() if word in ln] if f.exists() else []


def logged(plane: Path, new_pid: int) -> list[str]:
    """The "restarted" lines, once the one that started ``new_pid`` is among them: the
    supervisor writes the pid files first and logs the restart after (supervise._restart),
    so a test that saw the new pid must wait for the line too."""
    return wait_for(lambda: [ln for ln in log_lines(plane)
                             if ln.endswith(f": pid {new_pid}")] and log_lines(plane),
                    10, f"the log line of the restart to pid {new_pid}")


def _no_binaries(tools=()):
    raise controlplane.Unavailable("not built (test)")


@pytest.fixture()
def plane(tmp_path, monkeypatch):
    """A plane folder with a running supervisor (fast policy); taken down by
    ``controlplane.down`` (no kwokctl to ask) unless the test did."""
    monkeypatch.setattr(controlplane, "binaries", _no_binaries)
    d = tmp_path / "plane"
    (d / "pids").mkdir(parents=True)
    pid = processes.start(d, FAST)
    assert supervise.running(d) and supervise.alive(pid)
    yield d
    controlplane.down(d)
    assert not supervise.alive(pid), "the supervisor outlived down"


def recorder(plane: Path, out: Path, name: str = "daemon", mark: str = "m1") -> int:
    out.mkdir(exist_ok=True)
    cwd = plane.parent / "cwd"
    cwd.mkdir(exist_ok=True)
    env = dict(os.environ, OUT=str(out), MARK=mark)
    return processes.spawn(plane, name, [sys.executable, "-c", RECORDER, "arg-1"], env,
                           plane / f"{name}.log", [plane / "pids" / f"{name}.pid"],
                           cwd=str(cwd))


def current_pid(plane: Path, name: str) -> int | None:
    return supervise._read_pid(plane / "pids" / f"{name}.pid")


def test_the_policy_is_the_kubelets_crash_loop_backoff():
    p = supervise.KUBELET
    delays, d = [], None
    for _ in range(8):
        d = p.next(d, 1.0)
        delays.append(d)
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    assert p.next(300, 600.0) == 300  # 600 s is not yet more than 600 s
    assert p.next(300, 600.5) == 10  # ten minutes since the last restart: from the start
    assert p.next(None, None) == 10


def test_exit_text_names_the_status_or_signal():
    assert supervise.exit_text(3 << 8) == "exit status 3"
    assert supervise.exit_text(signal.SIGKILL) == "killed by SIGKILL"
    assert supervise.exit_text(None) == "exit status unknown"


def test_a_process_that_exits_is_restarted_with_its_argv_env_and_cwd(plane, tmp_path):
    out = tmp_path / "out"
    first = recorder(plane, out)
    assert wait_for(lambda: (out / f"{first}.json").exists(), what="the first record")
    assert current_pid(plane, "daemon") == first
    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (p := current_pid(plane, "daemon")) != first and p, 10,
                      "a restarted pid")
    wait_for(lambda: (out / f"{second}.json").exists(), what="the restarted record")
    a, b = (json.loads((out / f"{p}.json").read_text()) for p in (first, second))
    assert a == b and a["argv"][-1] == "arg-1" and a["mark"] == "m1"
    assert a["cwd"] == str(tmp_path / "cwd")
    [line] = logged(plane, second)
    assert re.search(rf"restarted daemon \(killed by SIGKILL, pid {first}\), restart 1, "
                     rf"after 0.3 s backoff: pid {second}$", line), line
    assert supervise.state(plane, "daemon")["restarts"] == 1
    assert os.getsid(second) == second  # a session of its own, as the first


def test_the_backoff_doubles_to_its_cap_one_line_per_restart(plane):
    processes.spawn(plane, "crasher", ["sh", "-c", "exit 3"], dict(os.environ),
                    plane / "crasher.log", [plane / "pids" / "crasher.pid"])
    wait_for(lambda: len(log_lines(plane)) >= 4, 15, "four restarts")
    lines = log_lines(plane)[:4]
    got = [(int(m[1]), float(m[2])) for m in
           (re.search(r"\(exit status 3, pid \d+\), restart (\d+), after ([\d.]+) s", ln)
            for ln in lines)]
    assert got == [(1, 0.3), (2, 0.6), (3, 1.2), (4, 1.2)], lines
    supervise.reset_backoff(plane, "crasher")  # as for a new pod: from the first delay
    n = len(log_lines(plane))
    wait_for(lambda: len(log_lines(plane)) >= n + 2, 15, "two more restarts")
    after = [re.search(r"after ([\d.]+) s backoff", ln)[1] for ln in log_lines(plane)[n:n + 2]]
    assert after in (["0.3", "0.6"], ["1.2", "0.3"]), after  # (one may have been due already)
    supervise.hold(plane, "crasher")


def test_a_held_process_stays_down_until_released(plane, tmp_path):
    first = recorder(plane, tmp_path / "out")
    supervise.hold(plane, "daemon")
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: log_lines(plane, "daemon held"), what="the held line")
    time.sleep(4 * FAST.initial_s)
    assert not supervise.alive(current_pid(plane, "daemon"))
    assert log_lines(plane) == []
    assert "killed by SIGKILL" in log_lines(plane, "daemon held")[0]
    supervise.release(plane, "daemon")
    second = wait_for(lambda: supervise.alive(p := current_pid(plane, "daemon")) and p, 5,
                      "the released restart")
    [line] = logged(plane, second)
    assert f"pid {first}), restart 1, released from hold: pid {second}" in line
    os.kill(second, signal.SIGKILL)  # a crash after the release: the backoff's first delay
    wait_for(lambda: len(log_lines(plane)) == 2, 5, "the restart after the crash")
    assert f"(killed by SIGKILL, pid {second}), restart 2, after 0.3 s backoff" in \
        log_lines(plane)[1]


def test_stop_process_is_not_undone_and_start_process_starts_again(plane):
    p = controlplane.Plane(plane)
    pid = p.start_process("op", [SLEEP, "300"])
    assert p.running("op") and supervise.state(plane, "op")["pid"] == pid
    p.stop_process("op", grace_s=5)
    assert not supervise.alive(pid) and not p.pid_file("op").exists()
    time.sleep(4 * FAST.initial_s)
    assert not p.running("op") and log_lines(plane) == []
    again = p.start_process("op", [SLEEP, "300"])
    assert again != pid and p.running("op") and not supervise.is_held(plane, "op")


def test_kwokctls_components_are_adopted_restarted_and_stopped_by_down(plane):
    """A stand-in kwokctl run through the supervisor forks a component in a new session
    (through ``<cluster>/bin/etcd``, its pid in ``<cluster>/pids/etcd.pid``) and exits:
    the orphan is reparented to the supervisor, which therefore sees its exit status;
    it restarts it with the same argv and writes the new pid to kwokctl's own pid file,
    and ``down`` (supervisor first) leaves none of them running."""
    home = plane / "kwok" / "clusters" / "c1"
    for sub in ("bin", "pids", "logs"):
        (home / sub).mkdir(parents=True)
    (home / "bin" / "etcd").symlink_to(SLEEP)
    # what kwokctl's ForkExec does: Setsid, Dir = home, output to logs/, pid file, exit
    fork = ("import subprocess, sys; h = sys.argv[1]; p = subprocess.Popen("
            "[h + '/bin/etcd', '300'], cwd=h, start_new_session=True, "
            "stdout=open(h + '/logs/etcd.log', 'ab'), stderr=subprocess.STDOUT); "
            "open(h + '/pids/etcd.pid', 'w').write(str(p.pid))")
    rc = processes.run_once(plane, "kwokctl-create", [sys.executable, "-c", fork, str(home)],
                            dict(os.environ), plane / "kwokctl.log", timeout=10)
    assert rc == 0
    first = supervise._read_pid(home / "pids" / "etcd.pid")
    assert int(Path(f"/proc/{first}/stat").read_text().rsplit(")", 1)[1].split()[1]) == \
        supervise._read_pid(supervise.pid_file(plane)), "the orphan's parent is the supervisor"
    # a component that exited before it was adopted: taken from kwokctl's kwok.yaml
    (home / "bin" / "kwok-controller").symlink_to(SLEEP)
    (home / "pids" / "kwok-controller.pid").write_text("999999999")
    (home / "kwok.yaml").write_text(yaml.safe_dump({"components": [{
        "name": "kwok-controller", "binary": str(home / "bin" / "kwok-controller"),
        "args": ["301"], "workDir": str(home), "envs": [{"name": "MARK", "value": "k"}]}]}))
    assert processes.adopt(plane, home) == ["etcd", "kwok-controller"]
    wait_for(lambda: supervise.state(plane, "etcd").get("pid") == first, what="adoption")
    late = wait_for(lambda: supervise.alive(p := supervise._read_pid(
        home / "pids" / "kwok-controller.pid")) and p, 10, "kwok-controller from kwok.yaml")
    assert Path(f"/proc/{late}/cmdline").read_bytes().split(b"\0")[:-1] == [
        str(home / "bin" / "kwok-controller").encode(), b"301"]
    assert b"MARK=k" in Path(f"/proc/{late}/environ").read_bytes().split(b"\0")
    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (p := supervise._read_pid(home / "pids" / "etcd.pid")) != first
                      and p, 10, "kwokctl's pid file to name the restarted etcd")
    argv = Path(f"/proc/{second}/cmdline").read_bytes().split(b"\0")[:-1]
    assert argv == [str(home / "bin" / "etcd").encode(), b"300"]
    assert os.readlink(f"/proc/{second}/cwd") == str(home)
    logged(plane, second)
    logged(plane, late)
    assert any(ln.split(" ", 1)[1].startswith(f"restarted etcd (killed by SIGKILL, pid {first})")
               for ln in log_lines(plane)), log_lines(plane)
    assert any(f"restarted kwok-controller (exit status unknown, pid 999999999), restart 1, "
               f"after 0.3 s backoff: pid {late}" in ln for ln in log_lines(plane))
    supervisor = supervise._read_pid(supervise.pid_file(plane))
    controlplane.down(plane)
    assert not supervise.alive(supervisor)
    # SIGKILLed by down; on a loaded machine the kernel may not have ended one yet when
    # down returns (CI 2026-11-29 read one alive at once): it gets up to 10 s
    wait_for(lambda: not [p for p in (first, second, late) if supervise.alive(p)], 10,
             "down's SIGKILL to end etcd and kwok-controller")
    assert not plane.exists()


def test_a_supervisor_started_again_adopts_what_runs_and_starts_nothing_twice(plane, tmp_path):
    first = recorder(plane, tmp_path / "out")
    processes.stop(plane)
    processes.start(plane, FAST)
    time.sleep(4 * FAST.initial_s)
    assert len(list((tmp_path / "out").glob("*.json"))) == 1, "a second copy was started"
    assert supervise.state(plane, "daemon")["pid"] == first
    os.kill(first, signal.SIGKILL)  # not its child now: the status is unknown, the restart not
    second = wait_for(lambda: (p := current_pid(plane, "daemon")) != first and p, 10,
                      "a restart by the new supervisor")
    assert f"(exit status unknown, pid {first}), restart 1" in logged(plane, second)[-1]
    assert supervise.alive(second)
