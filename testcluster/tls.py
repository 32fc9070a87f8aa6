"""A throwaway CA and server certificate for a double that must speak HTTPS.

In-cluster Kubernetes clients only talk HTTPS to ``https://$KUBERNETES_SERVICE_HOST:$PORT``
and verify the server against the service account's ``ca.crt``
(kubernetes-client/python ``kubernetes/config/incluster_config.py``), so the double serves
a certificate signed by a CA written as that file. Made with ``cryptography`` (X.509 v3,
the CA with ``basicConstraints CA:TRUE`` and ``keyCertSign``, the server certificate with
``subjectAltName`` IP entries and ``serverAuth``), valid for one day.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerCert:
    """Files of :func:`server_cert`: the CA certificate (PEM) and the server's pair."""

    ca_file: Path
    cert_file: Path
    key_file: Path

    @property
    def tls(self) -> tuple[str, str]:
        """``(certfile, keyfile)`` for :class:`tests.doubles.http.LoopbackServer`."""
        return str(self.cert_file), str(self.key_file)


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def server_cert(folder: Path, ips: list[str], dns: list[str] = ()) -> ServerCert:
    """Write ``ca.crt``, ``server.crt`` and ``server.key`` (PEM) into ``folder``.

    Args:
        ips: IPv4/IPv6 addresses the server is reached at (subjectAltName IP entries).
        dns: host names it is reached at (subjectAltName DNS entries).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    later = now + dt.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("kfp-gpu test CA"))
          .issuer_name(_name("kfp-gpu test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips] + [
        x509.DNSName(d) for d in dns]
    cert = (x509.CertificateBuilder().subject_name(_name("kube-apiserver double"))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(later)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    out = ServerCert(folder / "ca.crt", folder / "server.crt", folder / "server.key")
    out.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key_file.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    out.key_file.chmod(0o600)
    return out
