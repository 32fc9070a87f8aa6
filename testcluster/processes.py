"""Starting the plane's processes under its supervisor (:mod:`testcluster.supervise`),
and the supervisor itself: what :class:`testcluster.controlplane.Plane` and ``up`` /
``down`` call. Without a running supervisor (a plane folder an older ``up`` made, unit
tests) a process is started directly and recorded, and a supervisor started later adopts
it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from testcluster.supervise import (
    KUBELET,
    REPO,
    Policy,
    _read_pid,
    _write,
    alive,
    folder,
    log_file,
    pid_file,
    running,
    state,
    write_spec,
)


def _wait_state(plane_dir: Path, name: str, token: str, key: str, timeout: float):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s = state(plane_dir, name)
        if s.get("token") == token and s.get(key) is not None:
            return s[key]
        if not running(plane_dir):
            raise RuntimeError(f"the supervisor exited: see {log_file(plane_dir)}")
        time.sleep(0.05)
    raise RuntimeError(f"the supervisor did not start {name} in {timeout:.0f} s: see "
                       f"{log_file(plane_dir)}")


def spawn(plane_dir: Path, name: str, argv: list[str], env: dict[str, str], log: Path,
          pid_files: list[Path], cwd: str | None = None, timeout: float = 30) -> int:
    """Start ``argv`` as ``name`` in a session of its own, stdout and stderr appended to
    ``log``, and supervise it; returns its pid (also written to ``pid_files``). Through
    the plane's supervisor when it runs (it is then the parent: exit statuses reach it),
    else directly (recorded for a supervisor started later, which adopts it).

    Raises:
        RuntimeError: the supervisor did not start it in ``timeout`` seconds.
    """
    cwd = cwd or os.getcwd()
    if running(plane_dir):
        for f in pid_files:
            Path(f).unlink(missing_ok=True)
        token = write_spec(plane_dir, name, argv, env, cwd, str(log), [str(f) for f in pid_files])
        return _wait_state(plane_dir, name, token, "pid", timeout)
    with open(log, "ab") as out:
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    for f in pid_files:
        _write(Path(f), str(p.pid))
    write_spec(plane_dir, name, argv, env, cwd, str(log), [str(f) for f in pid_files],
               adopt=True)
    return p.pid


def run_once(plane_dir: Path, name: str, argv: list[str], env: dict[str, str], log: Path,
             timeout: float, cwd: str | None = None) -> int:
    """Run ``argv`` to its end as a child of the supervisor (not restarted) and return its
    exit status: what it forks and leaves (kwokctl's components) is then reparented to
    the supervisor. Without a running supervisor: run directly.

    Raises:
        RuntimeError, subprocess.TimeoutExpired: it did not end in ``timeout`` seconds.
    """
    cwd = cwd or os.getcwd()
    if not running(plane_dir):
        with open(log, "ab") as out:
            return subprocess.run(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout, check=False).returncode
    token = write_spec(plane_dir, name, argv, env, cwd, str(log), [], once=True)
    try:
        return _wait_state(plane_dir, name, token, "rc", timeout)
    except RuntimeError:
        pid = state(plane_dir, name).get("pid")
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        (folder(plane_dir) / f"{name}.json").unlink(missing_ok=True)


def adopt(plane_dir: Path, home: Path, env: dict[str, str] | None = None) -> list[str]:
    """Supervise the components kwokctl started for the cluster in ``home``: for each
    ``home/pids/<component>.pid`` (kwok v0.8.0 pkg/kwokctl/runtime/exec.go ``ForkExec``:
    the process runs in ``home``, its output in ``home/logs/<component>.log``) a spec with
    the process's own argv, environment and cwd read from /proc, and that pid file, so a
    restart updates kwokctl's record. A component that already exited is taken from
    kwokctl's own record of it, ``home/kwok.yaml`` (``binary``, ``args``, ``workDir``,
    ``envs`` on top of kwokctl's environment ``env``: pkg/kwokctl/runtime/binary
    cluster_operation.go ``startComponent``), and restarted after the backoff. Returns the
    names adopted.

    Raises:
        RuntimeError: a recorded component neither runs nor is in kwok.yaml.
    """
    import yaml

    conf = {}
    with contextlib.suppress(OSError, yaml.YAMLError):
        for doc in yaml.safe_load_all((Path(home) / "kwok.yaml").read_text()):
            for c in (doc or {}).get("components") or []:
                conf[c["name"]] = c
    names = []
    for f in sorted((Path(home) / "pids").glob("*.pid")):
        pid = _read_pid(f)
        try:
            argv = [a.decode() for a in
                    Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
            raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            out = os.readlink(f"/proc/{pid}/fd/1")
            envs = dict(kv.decode().split("=", 1) for kv in raw if b"=" in kv)
        except (OSError, TypeError):
            c = conf.get(f.stem)
            if c is None:
                raise RuntimeError(f"kwokctl's {f.stem} (pid {pid}) does not run and is not "
                                   f"in {home}/kwok.yaml") from None
            argv, cwd, out = [c["binary"], *(c.get("args") or [])], c.get("workDir") or home, ""
            envs = {**(env or os.environ), **{e["name"]: e.get("value", "")
                                              for e in c.get("envs") or []}}
        log = out if out.startswith("/") else str(Path(home) / "logs" / f"{f.stem}.log")
        write_spec(plane_dir, f.stem, argv, envs, str(cwd), log, [str(f)], adopt=True)
        names.append(f.stem)
    return names


def start(plane_dir: Path, policy: Policy = KUBELET, timeout: float = 30) -> int:
    """Start the plane's supervisor (``python -m testcluster.supervise DIR``) in a session
    of its own; returns its pid once it runs as a subreaper. A running one is kept."""
    plane_dir = Path(plane_dir)
    if running(plane_dir):
        return _read_pid(pid_file(plane_dir))
    log_file(plane_dir).parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "testcluster.supervise", str(plane_dir),
            f"--backoff-initial={policy.initial_s}", f"--backoff-max={policy.max_s}",
            f"--backoff-reset={policy.reset_s}"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    with open(log_file(plane_dir), "ab") as out:
        p = subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _read_pid(pid_file(plane_dir)) == p.pid:
            return p.pid
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the supervisor did not start: see {log_file(plane_dir)}")


def stop(plane_dir: Path, grace_s: float = 10.0) -> bool:
    """Stop the plane's supervisor (SIGTERM; SIGKILL after ``grace_s``); what it
    supervises keeps running. Returns whether one was running."""
    pid = _read_pid(pid_file(plane_dir))
    was = alive(pid)
    if was:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + grace_s
        while time.monotonic() < end and alive(pid):
            time.sleep(0.05)
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    pid_file(plane_dir).unlink(missing_ok=True)
    return was
