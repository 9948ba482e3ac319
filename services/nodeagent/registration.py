"""Node registration: append `NodeRegistered` only when the log does not already say so.

Idempotent in two ways: an agent restarting with the same inventory finds an identical
`NodeRegistered` as the node subject's last event and appends nothing; two agents racing to
register write under `Nats-Expected-Last-Subject-Sequence` with a message id derived from the
content and the sequence it follows, so the duplicate window or the expectation drops the loser.
After a `NodeLost` the last event differs, so the node registers again (it is alive). A
listing's end (`NodesListed`) is announced only when the log lacks one or the listing changed
something (`listing_owed`), by the kube agent and the simulated one alike.
"""

from __future__ import annotations

import hashlib

import msgspec

from contracts.base import Event
from contracts.events import NodeRegistered
from services.runtime.eventlog.model import EventLog


def needs_registration(node: NodeRegistered, last: Event | None) -> bool:
    return last != node


def registration_msg_id(node: NodeRegistered, after_seq: int) -> str:
    digest = hashlib.sha256(msgspec.json.encode(node)).hexdigest()[:16]
    return f"register/{node.node}/{digest}/{after_seq}"


async def listing_owed(log_: EventLog, changed: int) -> bool:
    """Whether a node agent's listing must be announced (`NodesListed`): always when it changed
    a node, else only if the log has no listing yet (a restart that found every node as it was
    adds nothing to the log; the scheduler reads any agent's listing as the inventory's)."""
    return bool(changed) or not await log_.last_per_subject(log_.subjects.all_inventory())
