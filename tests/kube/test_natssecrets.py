"""The chart's NATS Secrets, made once by its hook Job (`services.kube.natssecrets`): a second
run — every `helm upgrade` — keeps every password and the certificate, and adds only a key a
newer chart needs; the certificate is the CA's, for the servers' names."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from services.kube.natssecrets import KEYS, ROUTE, ensure_tls, ensure_users, secret_path
from tests.kube.cluster import Cluster


async def test_secrets_are_made_once_and_kept(cluster: Cluster, tmp_path: Path) -> None:
    kube, ns = cluster.kube, cluster.namespace
    older = {k: base64.b64encode(f"old-{k}".encode()).decode() for k in KEYS if k != ROUTE}
    await kube.create(secret_path(ns), {"apiVersion": "v1", "kind": "Secret",
                                         "metadata": {"name": "users"}, "data": older})  # fmt: skip
    assert await ensure_users(kube, ns, "users") == [ROUTE]  # an older chart's: route added
    assert await ensure_users(kube, ns, "users") == []
    kept = (await kube.get(secret_path(ns, "users")))["data"]
    assert {k: v for k, v in kept.items() if k != ROUTE} == older and kept[ROUTE]

    assert await ensure_users(kube, ns, "fresh") == sorted(KEYS)
    first = (await kube.get(secret_path(ns, "fresh")))["data"]
    assert await ensure_users(kube, ns, "fresh") == []
    assert (await kube.get(secret_path(ns, "fresh")))["data"] == first
    assert len(set(first.values())) == len(KEYS)  # a password of its own per user

    dns = ("tessera-nats.default.svc", "*.tessera-nats-headless.default.svc")
    assert await ensure_tls(kube, ns, "tls", dns, days=10)
    made = await kube.get(secret_path(ns, "tls"))
    assert not await ensure_tls(kube, ns, "tls", dns, days=10)
    assert (await kube.get(secret_path(ns, "tls")))["data"] == made["data"]
    assert made["type"] == "kubernetes.io/tls"
    for name in ("ca.crt", "tls.crt"):
        (tmp_path / name).write_bytes(base64.b64decode(made["data"][name]))
    ca, cert = tmp_path / "ca.crt", tmp_path / "tls.crt"
    assert openssl("verify", "-CAfile", str(ca), str(cert)).endswith("OK\n")
    text = openssl("x509", "-noout", "-text", "-in", str(cert))
    assert all(f"DNS:{name}" in text for name in dns), text


def openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout
