"""PID 1 of a component container, as Argo's emissary executor behaves (test fixture).

argoproj/argo-workflows ``cmd/argoexec/commands/emissary.go`` starts the main command in
its own process group (``workflow/executor/osspecific/command_unix.go``: ``Setpgid``),
forwards every signal it gets to that whole group (``signal_darwin.go``, which is also
``signal_linux.go``: ``Kill`` = ``syscall.Kill(-pgid, s)``), and reaps with
``Wait4(-1, WNOHANG)`` once per second until the command's pid is seen, then exits with its
status (128 + signal when killed). Exiting as PID 1 ends the container: processes still
running in it are killed. So a component process that catches SIGTERM has at most about
one second after its parent shell died to do its cleanup -- this reproduces that window.

Usage: ``python3 emissary.py CMD ARGS...`` (stdlib only; runs with any image's python).
"""

import os
import signal
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    child = subprocess.Popen(argv, process_group=0)

    def forward(signum, frame):
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code
        if pid == 0:
            time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
