"""kfp_gpu.training.launcher_start: a queued job's Launcher waits for the Workers' sshd
(issue 21 item 4, mpi-operator issue 615), with real sockets and a real process."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

from kfp_gpu.training import launcher_start as ls


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listen_later(port: int, delay_s: float) -> threading.Event:
    """Start listening on 127.0.0.1:port after ``delay_s`` (a Worker whose sshd comes up
    late, e.g. after a slow image pull); set the returned event to stop."""
    stop = threading.Event()

    def serve():
        time.sleep(delay_s)
        with socket.socket() as srv:
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", port))
            srv.listen()
            srv.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                    conn.close()
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return stop


def test_hostfile_hosts_in_order_without_duplicates_or_comments():
    text = ("# mpi-operator hostfile\njob-worker-0.job.ns.svc slots=2\n"
            "job-worker-1.job.ns.svc slots=2\n\njob-worker-0.job.ns.svc slots=2\n")
    assert ls.hosts(text) == ["job-worker-0.job.ns.svc", "job-worker-1.job.ns.svc"]


def test_waits_until_a_late_sshd_answers():
    port = free_port()
    stop = listen_later(port, 1.0)
    try:
        assert not ls.answers("127.0.0.1", port)  # not yet
        t0 = time.monotonic()
        assert ls.wait_for(["127.0.0.1"], port, timeout_s=20, poll_s=0.2) == []
        assert time.monotonic() - t0 >= 0.5
    finally:
        stop.set()


def test_names_the_hosts_that_never_answer():
    port = free_port()
    silent = ls.wait_for(["127.0.0.1", "no-such-worker.invalid"], port, timeout_s=0.5,
                         poll_s=0.1)
    assert silent == ["127.0.0.1", "no-such-worker.invalid"]


def test_main_execs_the_command_once_workers_answer(tmp_path):
    """The Launcher process: waits for the Worker, then becomes the command (exit code and
    output are the command's)."""
    port = free_port()
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=2\n")
    stop = listen_later(port, 1.0)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kfp_gpu.training.launcher_start", "--hostfile",
             str(hostfile), "--port", str(port), "--timeout", "30", "--",
             sys.executable, "-c", "import sys; print('mpirun would run'); sys.exit(7)"],
            capture_output=True, text=True, timeout=60, check=False)
    finally:
        stop.set()
    assert proc.returncode == 7, proc.stderr
    assert "1 Worker(s) answer on port" in proc.stdout and "mpirun would run" in proc.stdout


def test_main_gives_up_with_one_line(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kfp_gpu.training.launcher_start", "--hostfile", str(hostfile),
         "--port", str(free_port()), "--timeout", "0.5", "--", "true"],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "launcher_start: no sshd on port " + proc.stderr.split("port ")[1].split(" ")[0]
        + " of 127.0.0.1 after 0.5 s; the Workers did not start (see their pods' events)"]


def test_the_own_hostfile_name_is_waited_for_until_it_resolves_not_for_sshd():
    """A TrainJob launcher is node 0 (Trainer v2.3.0 runLauncherAsNode writes its endpoint
    into the hostfile) and runs no sshd: its own name only has to resolve before mpirun,
    which otherwise takes it for a remote host (the real node's CI failure, 2026-11-28:
    ``ssh: Could not resolve hostname tj-launcher-0-0.tj``). The DNS publishes the name on
    the third poll here; the other node must still answer on sshd's port."""
    assert ls.is_own("tj-launcher-0-0.tj", "tj-launcher-0-0")
    assert ls.is_own("tj-launcher-0-0.tj.ns.svc", "tj-launcher-0-0.tj.ns.svc.cluster.local")
    assert not ls.is_own("tj-node-0-0.tj", "tj-launcher-0-0")
    assert not ls.is_own("tj-launcher-0-0.tj", "")
    polls: list[str] = []

    def resolve(host):
        polls.append(host)
        return len(polls) >= 3

    probed: list[str] = []

    def probe(host, port):
        probed.append(host)
        return host == "tj-node-0-0.tj"

    names = ["tj-launcher-0-0.tj", "tj-node-0-0.tj"]
    assert ls.wait_for(names, 2222, 60, hostname="tj-launcher-0-0", probe=probe,
                       resolve=resolve, sleep=lambda s: None) == []
    assert polls == ["tj-launcher-0-0.tj"] * 3 and probed == ["tj-node-0-0.tj"]
    # never published: the own name is what is still waited for
    assert ls.wait_for(names, 2222, 0, hostname="tj-launcher-0-0", probe=probe,
                       resolve=lambda h: False) == ["tj-launcher-0-0.tj"]


def test_main_names_an_own_name_that_never_resolves(tmp_path):
    """The process as the TrainJob launcher runs it: its own entry under a subdomain that
    cannot resolve (RFC 6761 ``.invalid``) -> exit 1, one line saying so, no mpirun."""
    hostfile = tmp_path / "hostfile"
    own = f"{socket.gethostname().split('.')[0]}.tj.invalid"
    hostfile.write_text(f"{own} slots=1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kfp_gpu.training.launcher_start", "--hostfile", str(hostfile),
         "--port", str(free_port()), "--timeout", "0.5", "--", "echo", "mpirun ran"],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "mpirun ran" not in proc.stdout
    expected = (f"launcher_start: this host's name {own} does not resolve after 0.5 s; the "
                "cluster DNS does not publish the job's headless Service (see the Service "
                "and the DNS pods)")
    assert proc.stderr.strip().splitlines() == [expected]
