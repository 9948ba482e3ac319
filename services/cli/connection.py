"""How every CLI command reaches the running system: the NATS URL and one bounded connection.

The services reconnect forever (a broker restart must not kill them); a command typed by a
person must not: it connects once, with a short timeout and no reconnects, and a failure becomes
one line — "cannot reach NATS at URL (is `tessera up` running?)" — instead of nats.py's retry
loop printing a traceback per attempt (issue 13, item 11).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nats
import nats.js.errors
from nats.aio.client import Client

from contracts.permissions import CLI
from contracts.subjects import Subjects
from services.cli import statedir
from services.cli.up import read_state
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsauth import connect_options, remember, servers

CONNECT_TIMEOUT = 3.0


class Unreachable(Exception):
    """The system (NATS, or the service that answers a request) cannot be reached; says why."""


def nats_url(args: argparse.Namespace, user: str = CLI) -> str:
    """The URL of the running system, its credentials remembered for every connection to it:
    a command reads and applies as the CLI user (no append, no purge); `compact` is `ADMIN`.
    `--nats-creds FILE` names them for a `--nats URL`."""
    if args.nats:
        url = args.nats
        if getattr(args, "nats_creds", "") or getattr(args, "nats_ca", ""):
            remember(url, args.nats_creds, args.nats_ca)
        return url
    state = read_state(Path(args.state_dir))
    directory = state.get("credentials", "")
    creds = Path(directory) / f"{user}.json" if directory else None
    remember(state["nats"], str(creds) if creds and creds.exists() else "", state.get("ca", ""))
    return state["nats"]


async def _quiet(_exc: Exception) -> None:
    """nats.py logs every failed attempt with a traceback; the caller reports the outcome."""


async def connect(url: str, timeout: float = CONNECT_TIMEOUT) -> Client:
    """One attempt, bounded by `timeout`; `Unreachable` with the hint when it fails."""
    try:
        # nats.py reads max_reconnect_attempts=0 as "forever" for the first connect: 1 it is
        return await nats.connect(servers(url), connect_timeout=timeout, allow_reconnect=False,
                                  max_reconnect_attempts=1, reconnect_time_wait=0.2,
                                  error_cb=_quiet, name="tessera-cli",
                                  **connect_options(url=url))  # fmt: skip
    except Exception:
        raise Unreachable(f"cannot reach NATS at {url} (is `tessera up` running?)") from None


async def open_log(url: str, root: str, create: bool = True) -> JetStreamLog:
    """The log of the system at `url`, over a bounded connection. The streams are looked at,
    and created only when absent (and `create`: `up` leaves that to the services, which know
    the replicas): the CLI user may read them, not create or change them. The log knows the
    user's rights (`JetStreamLog.rights`), as a service's does."""
    nc = await connect(url)
    log = JetStreamLog(nc, subjects=Subjects(root), user=nc.options.get("user") or "")
    try:
        try:
            await log.js.stream_info(log.stream)
        except nats.js.errors.NotFoundError:
            if not create:
                raise
            await log.ensure()
    except Exception as exc:
        await log.close()
        raise Unreachable(f"NATS at {url} has no usable JetStream: {exc}") from None
    return log


def connection_args(p: argparse.ArgumentParser) -> None:
    """--nats / --root / --state-dir: how every command finds the running system."""
    p.add_argument("--nats", default="", help="NATS URL (default: the running `tessera up`)")
    p.add_argument("--root", default="tessera", help="subject root the services use (default: tessera)")
    p.add_argument("--state-dir", default=str(statedir.find()), help=statedir.HELP)
    p.add_argument("--nats-creds", default="", help="with --nats: a NATS credential file")
    p.add_argument("--nats-ca", default="", help="with --nats: the CA of its TLS certificate")
