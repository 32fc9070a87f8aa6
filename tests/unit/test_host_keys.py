"""sshd host keys made when a Worker starts, with the real ssh-keygen.

The container test (tests/containers/test_worker_ssh.py) shows two Workers of one image
with different keys and mpirun across them; here the pieces, without Docker.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kfp_gpu.training import host_keys

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")


def _config(home: Path) -> Path:
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("the operator's Secret key\n")
    cfg = home / ".sshd_config"
    cfg.write_text(f"PidFile {home}/sshd.pid\nHostKey {home}/.sshd/ssh_host_ed25519_key\n"
                   f"hostkey {home}/.ssh/id_rsa\nStrictModes no\nPort 2222\n")
    return cfg


def test_each_start_makes_its_own_key_and_leaves_the_secret_alone(tmp_path):
    keys = []
    for worker in ("w0", "w1"):
        cfg = _config(tmp_path / worker)
        argv = ["/usr/sbin/sshd", "-De", "-f", str(cfg)]
        made = host_keys.ensure_host_keys(argv)
        key = tmp_path / worker / ".sshd" / "ssh_host_ed25519_key"
        assert made == [key] and key.stat().st_mode & 0o077 == 0
        assert key.with_suffix(".pub").read_text().startswith("ssh-ed25519 ")
        assert (tmp_path / worker / ".ssh" / "id_rsa").read_text() == "the operator's Secret key\n"
        assert host_keys.ensure_host_keys(argv) == []  # a restart keeps the key it made
        keys.append(key.with_suffix(".pub").read_text())
    assert keys[0] != keys[1]


def test_what_it_reads_from_the_command_and_the_config(tmp_path):
    assert host_keys.sshd_config(["python", "-c", "x"]) is None
    assert host_keys.sshd_config(["/usr/sbin/sshd", "-De"]) == host_keys.SYSTEM_CONFIG
    assert host_keys.sshd_config(["sshd", "-f", "/x/c"]) == Path("/x/c")
    assert host_keys.host_key_files("# HostKey /no\nHostKey /a_rsa\n  HOSTKEY \"/b\"\n") == [
        Path("/a_rsa"), Path("/b")]
    assert host_keys.ensure_host_keys(["python", "-c", "pass"]) == []


def test_a_key_that_cannot_be_made_is_reported_not_fatal(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cfg = tmp_path / "c"
    cfg.write_text(f"HostKey {blocker}/ssh_host_ed25519_key\n")
    assert host_keys.ensure_host_keys(["sshd", "-f", str(cfg)]) == []
    assert "cannot make sshd host key" in capsys.readouterr().err
