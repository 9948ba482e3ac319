"""The header-block parser Tessera installs in nats-py gives what nats-py's own gives.

It was rewritten for speed (every delivery of every service goes through it), so the one thing
it must not do is read a header block differently: an envelope's type or message id parsed
otherwise would dispatch or de-duplicate another way than nats-py, which other clients follow.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from services.runtime.eventlog import jetstream

# nats-py's parser as shipped (jetstream.py replaces the class attribute when imported)
reference = jetstream._NATS_HEADER_LINES

lines = st.lists(st.one_of(
    st.tuples(st.text(min_size=0, max_size=12), st.sampled_from([":", ": ", ":\t", " : "]), st.text(max_size=20))
    .map(lambda t: f"{t[0]}{t[1]}{t[2]}".encode("utf-8", "surrogatepass")),
    st.binary(max_size=24),
), max_size=8)


@settings(max_examples=400, deadline=None)
@given(lines)
def test_any_block_reads_as_nats_py_reads_it(block: list[bytes]) -> None:
    raw = b"\r\n".join(block)
    assert jetstream._header_lines(raw) == reference(raw)


def test_an_envelope_and_its_edge_cases() -> None:
    raw = (b"Tessera-Type: PlacementCommitted\r\nNats-Msg-Id:allocator:1#0\r\nA b: skipped\r\n"
           b"\xff: skipped\r\nK: \xffv \r\n\r\n")  # fmt: skip
    got = jetstream._header_lines(raw)
    assert got == reference(raw)
    assert got["Tessera-Type"] == "PlacementCommitted" and got["Nats-Msg-Id"] == "allocator:1#0"
    assert "A b" not in got and got["K"] == "\ufffdv"
    assert Client._parse_header_lines is not reference  # (installed: the test compares two)
