"""A small certificate authority for test clusters and the compose secure profile:
a CA, and certificates it signs for nodes and clients, written as the PEM files a
listener reads (`ssl.keystore.location`: key then chain; `ssl.truststore.location`:
the CA). Not for production: keys are unencrypted on disk.

    python -m seglog.node.security.certificates --out certs --node node-1 --host 127.0.0.1 \\
        --client alice
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from seglog.storage.disk_and_clock import plain_wall_s

DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """One certificate with its key, as PEM."""

    key_pem: bytes
    cert_pem: bytes

    @property
    def keystore_pem(self) -> bytes:
        """What `ssl.keystore.location` holds: the private key, then the chain."""
        return self.key_pem + self.cert_pem

    def write(self, path: Path) -> Path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(self.keystore_pem)
        return path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


class CertificateAuthority:
    def __init__(self, name: str = "seglog-test-ca", now: datetime.datetime | None = None) -> None:
        self.now = now or datetime.datetime.fromtimestamp(plain_wall_s(), datetime.UTC)
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.name = subject
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.now - DAY)
            .not_valid_after(self.now + 3650 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        hosts: Sequence[str] = (),
        organizational_unit: str | None = None,
        valid_days: float = 825,
        not_before: datetime.datetime | None = None,
    ) -> Issued:
        """A certificate for a server and client (both usages), valid for `hosts`."""
        key = _key()
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organizational_unit:
            attributes.append(
                x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit)
            )
        start = not_before or (self.now - DAY)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=valid_days))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(_key_pem(key), cert.public_bytes(serialization.Encoding.PEM))

    def write(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seglog.node.security.certificates",
        description="Write a test CA (ca.pem) and certificates it signs (NAME.pem: key + chain).",
    )
    parser.add_argument("--out", required=True, help="directory to write the PEM files to")
    parser.add_argument("--node", action="append", default=[], help="a node's name (CN, SAN)")
    parser.add_argument(
        "--host", action="append", default=[], help="a host name or IP every node cert also holds"
    )
    parser.add_argument("--client", action="append", default=[], help="a client's name (CN)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority()
    ca.write(out / "ca.pem")
    for name in args.node:
        ca.issue(name, [name, *args.host]).write(out / f"{name}.pem")
    for name in args.client:
        ca.issue(name).write(out / f"{name}.pem")
    print(f"wrote ca.pem and {len(args.node) + len(args.client)} certificates to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
