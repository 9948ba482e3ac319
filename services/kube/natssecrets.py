"""The chart's NATS Secrets — the users' passwords and the TLS material — made once, in the
cluster, by a hook Job, and never rendered by Helm (issue 23).

A Secret rendered with random content is new on every render: `helm template | kubectl apply`,
Argo CD or `--dry-run` see no running Secret through `lookup`, so each such render made new
passwords and locked the running pods out. Made here instead, the Secret is whatever the first
run made: a later run (every `helm upgrade`) adds only the keys a newer chart needs (a new user,
the route password) and changes none, and the rendered manifests hold no secret at all, so two
renders are the same. The TLS Secret is the same kind of object cert-manager makes
(`kubernetes.io/tls` with `ca.crt`): a self-signed CA and one certificate for every NATS server
name, clients and routes alike, made by `openssl` (`natsauth.generate_tls`).

Run as `python -m services.kube.natssecrets --namespace NS --users-secret NAME --tls-secret NAME
--dns NAME…` with a service account that may get, create and patch Secrets in NS.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from contracts.permissions import USERS
from services.kube.client import Kube, KubeError, agent_of, secret_path
from services.runtime.natsauth import generate_tls, new_password, readable_password

#: the cluster routes' user (nats.conf `cluster.authorization`): a server joins only with it
ROUTE = "route"
KEYS = (*USERS, ROUTE)
LABELS = {"app.kubernetes.io/part-of": "tessera", "app.kubernetes.io/component": "nats"}
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def missing_passwords(existing: Mapping[str, str], keys: Sequence[str]) -> dict[str, str]:
    """A new password (base64, as a Secret's `data` holds it) for each key not there yet, or
    holding one nats-server cannot read through its variable (`readable_password`: earlier
    releases made such a password about once in ten installs, and NATS never started with it,
    so nothing used it); any other is kept — a user-made or older Secret stays as it is."""
    return {k: base64.b64encode(new_password().encode()).decode()
            for k in keys if k not in existing or not readable_password(_text(existing[k]))}  # fmt: skip


def _text(data: str) -> str:
    try:
        return base64.b64decode(data, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return ""  # not base64 text: not a password nats-server could read either


def _secret(name: str, data: Mapping[str, str], kind: str = "Opaque") -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": kind,
            "metadata": {"name": name, "labels": LABELS}, "data": dict(data)}  # fmt: skip


async def _existing(kube: Kube, namespace: str, name: str) -> dict | None:
    try:
        return await kube.get(secret_path(namespace, name))
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise


async def ensure_users(kube: Kube, namespace: str, name: str, keys: Sequence[str] = KEYS) -> list[str]:
    """The users' Secret with a password per key; returns the keys it added (or replaced: a
    password nats-server could not read)."""
    found = await _existing(kube, namespace, name)
    added = missing_passwords((found or {}).get("data") or {}, keys)
    if found is None:
        try:
            await kube.create(secret_path(namespace), _secret(name, added))
        except KubeError as exc:
            if exc.status != 409:  # made meanwhile (a second run of the Job): that one stands
                raise
            return await ensure_users(kube, namespace, name, keys)
    elif added:
        await kube.patch(secret_path(namespace, name), {"data": added})
    return sorted(added)


async def ensure_tls(kube: Kube, namespace: str, name: str, dns: Sequence[str], days: int) -> bool:
    """The TLS Secret (`ca.crt`, `tls.crt`, `tls.key`), made if absent; True if made now."""
    if await _existing(kube, namespace, name) is not None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        ca, cert, key = await asyncio.to_thread(generate_tls, Path(tmp), dns=tuple(dns), days=days)
        data = {field: base64.b64encode(path.read_bytes()).decode()
                for field, path in (("ca.crt", ca), ("tls.crt", cert), ("tls.key", key))}  # fmt: skip
    try:
        await kube.create(secret_path(namespace), _secret(name, data, "kubernetes.io/tls"))
    except KubeError as exc:
        if exc.status != 409:
            raise
        return False
    return True


async def ensure_secrets(args: argparse.Namespace) -> list[str]:
    kube = await Kube.connect(args.kubeconfig, agent=agent_of("natssecrets"))
    done = []
    try:
        if args.users_secret:
            added = await ensure_users(kube, args.namespace, args.users_secret)
            done.append(f"secret/{args.users_secret}: " + (f"added {', '.join(added)}" if added else "kept"))
        if args.tls_secret:
            made = await ensure_tls(kube, args.namespace, args.tls_secret, args.dns, args.days)
            done.append(f"secret/{args.tls_secret}: {'made' if made else 'kept'}")
    finally:
        await kube.close()
    return done


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m services.kube.natssecrets", description=__doc__.split("\n\n")[0])
    p.add_argument("--namespace", default="", help="default: the pod's own")
    p.add_argument("--kubeconfig", default="", help="default: the in-cluster service account")
    p.add_argument("--users-secret", default="", help="the NATS users' passwords (a key per user and `route`)")
    p.add_argument("--tls-secret", default="", help="the NATS servers' CA, certificate and key")
    p.add_argument("--dns", action="append", default=[], help="a name the certificate holds (repeatable)")
    p.add_argument("--days", type=int, default=3650, help="validity of the CA and the certificate")
    args = p.parse_args(argv)
    if not args.namespace:
        if not NAMESPACE_FILE.exists():
            p.error("--namespace: not given, and not in a pod (no service account namespace)")
        args.namespace = NAMESPACE_FILE.read_text().strip()
    if args.tls_secret and not args.dns:
        p.error("--tls-secret needs the server names: --dns NAME (repeatable)")
    for line in asyncio.run(ensure_secrets(args)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
