"""NATS credentials and TLS for Tessera's own broker: generated files, server config, client options.

`tessera up` writes one credential file per user of `contracts.permissions.USERS` (mode 0600, a
fresh random password each time) and gives nats-server an `authorization` block built from the
same table; each process is then started with the path of its own file, never the password on
its command line (`ps` shows every argument). TLS is optional: a CA file on the client side and a
certificate + key on the server side; `generate_tls` makes a self-signed set with `openssl` for a
local `up --nats-tls`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import string
import subprocess
from pathlib import Path

import msgspec

from contracts.permissions import USERS, inbox_prefix, nats_user, permissions
from contracts.subjects import Subjects


class Credential(msgspec.Struct, frozen=True):
    user: str
    password: str


def _write_private(path: Path, text: str) -> None:
    """Created 0600 from the first byte: a chmod after the write leaves a readable window."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def new_password() -> str:
    """A random password (≈ 190 bits) that nats-server also reads back unchanged through a
    variable (`password: $ADMISSION_PASSWORD`, as the chart's nats.conf has it): the value of a
    variable is parsed as a config value, so one that starts with `-` or a digit can be read as
    a number or a date and refused — NATS never starts. A letter first keeps it a string."""
    return secrets.choice(string.ascii_letters) + secrets.token_urlsafe(24)


def readable_password(value: str) -> bool:
    """Whether nats-server reads `value` back as a string through a variable: a password some
    earlier release made (`token_urlsafe`: 1 in 64 began with `-`, more with a digit) fails."""
    return bool(value) and (value[0].isascii() and (value[0].isalpha() or value[0] == "_"))


def write_credentials(directory: Path, users: tuple[str, ...] = USERS) -> dict[str, Path]:
    """A fresh credential file per user (`<dir>/<user>.json`, 0600; the dir 0700)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    paths: dict[str, Path] = {}
    for user in users:
        cred = Credential(user=nats_user(user), password=new_password())
        paths[user] = directory / f"{user}.json"
        _write_private(paths[user], msgspec.json.encode(cred).decode())
    return paths


def load(path: str | Path) -> Credential:
    """A credential file; a bad one is one line naming the file and the rule."""
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=Credential)
    except OSError as exc:
        raise SystemExit(f"--nats-creds {path}: {exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:
        raise SystemExit(f"--nats-creds {path}: {exc} (want {{\"user\": …, \"password\": …}})") from None


def authorization(files: dict[str, Path], subjects: Subjects, stream: str) -> dict:
    """nats-server's `authorization` block: each user with the permissions of its role."""
    users = []
    for role, path in files.items():
        cred = load(path)
        perms = permissions(role, subjects, stream)
        entry: dict = {"publish": {"allow": list(perms.publish)},
                       "subscribe": {"allow": list(perms.subscribe)}}  # fmt: skip
        if perms.responses:
            entry["allow_responses"] = True
        users.append({"user": cred.user, "password": cred.password, "permissions": entry})
    return {"users": users}


def server_config(auth: dict | None = None, tls: tuple[Path, Path] | None = None) -> str:
    """The part of nats-server's configuration beyond its flags (the format takes JSON values)."""
    lines = []
    if auth is not None:
        lines.append(f"authorization: {json.dumps(auth, indent=1)}")
    if tls is not None:
        cert, key = tls
        lines.append(f"tls: {json.dumps({'cert_file': str(cert), 'key_file': str(key), 'timeout': 5})}")
    return "\n".join(lines) + "\n"


def servers(url: str) -> list[str]:
    """`--nats` names one server or a cluster: comma-separated URLs, every one a seed."""
    return [u.strip() for u in url.split(",") if u.strip()]


#: A service's NATS user and password as the chart gives them (env from a Secret).
USER_ENV = "TESSERA_NATS_USER"
PASSWORD_ENV = "TESSERA_NATS_PASSWORD"
#: url -> (credential file, CA) a process learnt for a system it started or found (`remember`)
_KNOWN: dict[str, tuple[str, str]] = {}


def remember(url: str, creds: str, ca: str = "") -> None:
    """Connect to `url` with these from now on, where no credentials are named: the CLI learns
    them from `up`'s state file, `ControlPlane` (the operator: demo, tests) from what it made,
    so every connection helper keeps taking just a URL."""
    _KNOWN[url] = (creds, ca)


def connect_options(creds: str = "", ca: str = "", url: str = "") -> dict:
    """nats.connect keyword arguments for a credential file and a CA bundle (either optional;
    both default to what was remembered for `url`)."""
    if not creds and not ca and url in _KNOWN:
        creds, ca = _KNOWN[url]
    options: dict = {}
    if creds:
        cred = load(creds)
        options.update(user=cred.user, password=cred.password)
    elif os.environ.get(USER_ENV):  # in a pod: from the chart's Secret, never in argv
        options.update(user=os.environ[USER_ENV], password=os.environ.get(PASSWORD_ENV, ""))
    if options:  # replies come on the user's own prefix: nobody else may subscribe there
        options["inbox_prefix"] = inbox_prefix(options["user"])
    if ca:
        context = ssl.create_default_context(cafile=ca)
        options["tls"] = context
    return options


def generate_tls(directory: Path, host: str = "127.0.0.1", dns: tuple[str, ...] = (),
                 days: int = 30) -> tuple[Path, Path, Path]:  # fmt: skip
    """A self-signed CA and a server certificate for `host` and the names `dns` (ca, cert, key)
    made by `openssl`. The certificate has no extended key usage, so the servers of a cluster
    also present it as clients on their routes."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SystemExit("--nats-tls needs the openssl command to make a certificate")
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    cert, key, csr = directory / "server.pem", directory / "server-key.pem", directory / "server.csr"
    ext = directory / "san.ext"
    names = ",".join(f"DNS:{name}" for name in ("localhost", *dns))
    ext.write_text(f"subjectAltName=IP:{host},{names}\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", str(days), "-subj", "/CN=tessera-ca",
        "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=tessera-nats",
        "-keyout", str(key), "-out", str(csr))  # fmt: skip
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", str(days), "-extfile", str(ext), "-out", str(cert))  # fmt: skip
    for path in (ca_key, key):
        path.chmod(0o600)
    return ca, cert, key
