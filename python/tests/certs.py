"""Certificates made by the tests, never checked in: a throwaway CA and a
server certificate it signs, for 127.0.0.1, ::1 and localhost, written with
the ``openssl`` command (OpenSSL 1.1.1 or later) into a temporary folder.
"""

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Certs:
    ca: Path    # the CA certificate (PEM): what clients trust
    cert: Path  # the server certificate (PEM)
    key: Path   # the server's private key (PEM)


def available() -> bool:
    return shutil.which("openssl") is not None


def make(folder: Path, names=("localhost",), ips=("127.0.0.1", "::1")) -> Certs:
    """A CA and a server certificate for ``names`` and ``ips`` (EC P-256,
    valid for a day)."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    san = ",".join([f"DNS:{n}" for n in names] + [f"IP:{i}" for i in ips])
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
        "-subj", "/CN=unienv-remote test CA", "-keyout", "ca.key", "-out", "ca.pem",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-subj", "/CN=unienv-remote test server", "-keyout", "server.key", "-out", "server.csr")
    (folder / "server.ext").write_text(
        f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
        "-extfile", "server.ext", "-out", "server.pem")
    return Certs(ca=folder / "ca.pem", cert=folder / "server.pem", key=folder / "server.key")
