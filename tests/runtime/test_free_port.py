"""Ports for the servers a test (or `tessera up`) starts: never one an outgoing connection may
take as its local port, so a server restarted on its port finds it free."""

from __future__ import annotations

import socket

from services.runtime.natsserver import _ephemeral_low, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    low = _ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert all(1024 <= p < low for p in ports), (low, sorted(ports))
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            s.listen()
