"""PID 1 of a component container, as Argo's emissary executor behaves (test fixture).

Follows argoproj/argo-workflows v3.5.15 (KFP 2.5 moved to Argo 3.5; the same code in
v3.6.19, four lines further down in emissary.go):

- ``cmd/argoexec/commands/emissary.go`` lines 73-77: ``signal.Notify(signals)`` catches
  every signal; lines 146-154: each one but those ``CanIgnoreSignal`` names (SIGCHLD,
  SIGURG: ``workflow/executor/os-specific/signal_darwin.go`` lines 15-17) is forwarded to
  the command with ``osspecific.Kill``, which signals its whole process group
  (``signal_darwin.go`` lines 19-25, ``kill(-pgid, sig)``; ``signal_linux.go`` is a
  symlink to it). The command runs in its own group (``command_unix.go``: ``Setpgid``).
- ``emissary.go`` lines 159-172: every 2 s it reads ``/var/run/argo/ctr/<container>/signal``
  (written by the wait container's ``Kill``: SIGTERM, then SIGKILL after the grace period,
  ``workflow/executor/emissary/emissary.go`` lines 136-158), removes it and sends that
  signal to the command's group the same way. This is the only way a SIGKILL from Argo
  reaches the command: the controller's own SIGKILL, ``argoexec kill 9 1`` exec'd in the
  container after the pod's ``terminationGracePeriodSeconds`` (30 s when unset;
  ``workflow/controller/controller.go`` lines 531-543, 591-607; ``workflow/signal/
  signal.go`` lines 17-44), goes to PID 1 from inside its PID namespace, and the kernel
  drops it (pid_namespaces(7): init gets only signals it has a handler for; SIGKILL has
  none). This double, as PID 1, is under the same rule; ``docker kill -s KILL`` comes
  from outside the namespace and is forced, as the kubelet's kill is.
- ``signal_darwin.go`` lines 31-61 (``Wait``): reap with ``Wait4(-1, WNOHANG)`` once a
  second until the command's pid is seen; exit with its status, 128 + signal when killed
  (``emissary.go`` lines 193-201). Exiting as PID 1 ends the container: the processes
  left in it are killed.

So a component process that catches SIGTERM has at most about one second after the shell
that started it died to do its cleanup -- this reproduces that window.

Usage: ``python3 emissary.py CMD ARGS...`` (stdlib only; runs with any image's python).
Environment (tests): ``ARGO_CONTAINER_NAME`` (default ``main``), ``EMISSARY_VAR_RUN_ARGO``
(default ``/var/run/argo``).
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

#: Signals the emissary does not forward (``CanIgnoreSignal``).
IGNORED = {signal.SIGCHLD, signal.SIGURG}
#: Seconds between reaps (``Wait``) and between looks at the signal file (emissary.go).
REAP_S, SIGNAL_FILE_S = 1.0, 2.0


def signal_file() -> str:
    """``<var/run/argo>/ctr/<container>/signal``."""
    root = os.environ.get("EMISSARY_VAR_RUN_ARGO", "/var/run/argo")
    return os.path.join(root, "ctr", os.environ.get("ARGO_CONTAINER_NAME", "main"), "signal")


def kill_group(pid: int, signum: int) -> None:
    """``osspecific.Kill``: the process group of ``pid`` when it has one, else ``pid``."""
    try:
        os.killpg(os.getpgid(pid), signum)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def read_signal_file(path: str) -> int:
    """The signal number written to ``path`` (0 when none); the file is removed."""
    try:
        with open(path) as f:
            data = f.read()
    except OSError:
        return 0
    with contextlib.suppress(OSError):
        os.remove(path)
    try:
        return int(data)
    except ValueError:
        return 0


def main(argv: list[str]) -> int:
    child = subprocess.Popen(argv, process_group=0)

    def forward(signum, frame):
        kill_group(child.pid, signum)

    for sig in signal.valid_signals():
        if sig in IGNORED or sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            signal.signal(sig, forward)
    path, next_look = signal_file(), time.monotonic()
    while True:
        if time.monotonic() >= next_look:
            s = read_signal_file(path)
            if s > 0:
                kill_group(child.pid, s)
            next_look = time.monotonic() + SIGNAL_FILE_S
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code
        if pid == 0:
            time.sleep(REAP_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
