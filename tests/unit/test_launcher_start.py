"""kfp_gpu.training.launcher_start: a queued job's Launcher waits for the Workers' sshd
(kubeflow/mpi-operator issue 615), with real sockets and a real process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kfp_gpu.mpi.spec import mpirun
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


def aws_preset_secret_env(secret: str = "s3-creds") -> tuple[dict, ...]:
    """The Secret env of ``kfp-gpu compile --secret-env SECRET`` as the KFP 2.17 driver
    hands it to the component (EnvVar dicts with ``secretKeyRef``; the optional keys with
    ``optional: true``)."""
    from kfp_gpu.dsl import task_settings

    return tuple({"name": env, "valueFrom": {"secretKeyRef": {
        "name": s.secret, "key": key, **({"optional": True} if s.optional else {})}}}
        for s in task_settings.parse_secret_env(secret) for key, env in s.key_to_env)


def forwarded(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == "-x"]


def test_the_launcher_forwards_only_the_variables_that_are_set(tmp_path):
    """The Launcher of a job compiled with ``--secret-env s3-creds`` whose Secret holds the
    two keys and AWS_ENDPOINT_URL but none of the other optional keys: the real
    launcher_start process execs mpirun (a stand-in printing its argv) with ``-x`` for each
    variable its environment sets, and none for AWS_ENDPOINT_URL_S3, AWS_DEFAULT_REGION,
    AWS_REGION, AWS_SESSION_TOKEN (Open MPI would warn about each at the top of the log);
    the rest of the line is the builder's."""
    from kfp_gpu.dsl.task_settings import AWS_OPTIONAL
    from kfp_gpu.mpi.spec import mpijob
    from tests.support.mpijob_options import options

    opts = options(secret_env=aws_preset_secret_env())
    built = mpijob.launcher_command(opts)
    line = built[built.index("--") + 1:]
    fake = tmp_path / "bin" / "mpirun"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    fake.chmod(0o755)
    port = free_port()
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=1\n")
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": "",
           "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_ENDPOINT_URL": "http://minio:9000", **mpijob.rank_env(opts)}
    stop = listen_later(port, 0)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kfp_gpu.training.launcher_start", "--hostfile",
             str(hostfile), "--port", str(port), "--timeout", "30", "--", str(fake),
             *line[1:]], capture_output=True, text=True, timeout=60, check=False, env=env,
            cwd=Path(__file__).resolve().parents[2])
    finally:
        stop.set()
    assert proc.returncode == 0, proc.stderr
    argv = proc.stdout.splitlines()[1:]  # after launcher_start's own line
    unset = [n for n in AWS_OPTIONAL if n != "AWS_ENDPOINT_URL"]
    assert forwarded(line) == [*mpirun.BASE_FORWARDED_ENV, *mpijob.forwarded_env(opts)]
    assert set(unset) <= set(forwarded(line))  # the builder forwards them all...
    assert forwarded(argv) == [n for n in forwarded(line) if n in env]  # ...only set ones go
    assert not set(unset) & set(forwarded(argv))
    assert {"AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "LD_LIBRARY_PATH"} <= set(forwarded(argv))
    no_x = lambda a: [w for i, w in enumerate(a) if w != "-x" and (i == 0 or a[i - 1] != "-x")]
    assert no_x(argv) == no_x(line[1:])


def test_forward_set_only_reads_the_mpirun_options_not_the_program():
    cmd = ["python", "-m", "kfp_gpu.training.worker_start",  # a TrainJob launcher with RDMA
           *mpirun.mpirun_command(2, ["prog", "-x", "GONE"], forwarded_env=["SET", "GONE"]),
           "-x", "X=1"]
    got = ls.forward_set_only(cmd, {"PATH": "/bin", "SET": "1"})
    assert got[:4] == ["python", "-m", "kfp_gpu.training.worker_start", "mpirun"]
    assert forwarded(got[:got.index("prog")]) == ["PATH", "SET"]
    assert got[got.index("prog"):] == ["prog", "-x", "GONE", "-x", "X=1"]  # the program's
    # -x NAME=VALUE carries its value: kept even when NAME is unset
    assert ls.forward_set_only(["mpirun", "-x", "A=1", "p"], {}) == [
        "mpirun", "-x", "A=1", "p"]
    # Intel MPI / MPICH: the unset names leave -genvlist, an empty list the option too
    intel = mpirun.mpirun_command(2, ["p"], forwarded_env=["SET", "GONE"],
                                  implementation="Intel")
    assert ls.forward_set_only(intel, {"PATH": "/bin", "SET": "1"}) == [
        "mpirun", "-n", "2", "-genvlist", "PATH,SET", "p"]
    assert ls.forward_set_only(intel, {}) == ["mpirun", "-n", "2", "p"]
    # no mpirun word: unchanged
    assert ls.forward_set_only(["sh", "-c", "-x"], {}) == ["sh", "-c", "-x"]


@pytest.mark.parametrize("form", [{}, {"as_root": False}, {"implementation": "Intel"},
                                  {"implementation": "MPICH"}, {"local": True}])
def test_every_option_the_builder_writes_is_one_forward_set_only_reads(form):
    """forward_set_only stops at the first word it does not know: the program. Each word
    mpirun_command writes before the program must be a known option or its value."""
    argv = mpirun.mpirun_command(2, ["prog", "--flag"], forwarded_env=["A"], **form)
    i = 1
    while argv[i] in ls.MPIRUN_OPTIONS:
        i += 1 + ls.MPIRUN_OPTIONS[argv[i]]
    assert argv[i:] == ["prog", "--flag"]
