"""Wire vocabulary: subject escaping, envelopes, registry round trips and schema drift."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.devices import CardSpec, CardUsage, SliceSpec
from contracts.envelope import Envelope, EnvelopeError, msg_id
from contracts.events import ALL_EVENTS, CardRegistered, SliceReserved
from contracts.registry import Registry, UndecodableEvent, UnknownEventType, default_registry
from contracts.schema import SCHEMA_PATH, render
from contracts.subjects import Subjects, escape, unescape

FORBIDDEN = set(" \t\r\n.*>")


@given(st.text(max_size=80))
def test_any_name_escapes_to_one_valid_token_and_back(name: str) -> None:
    token = escape(name)
    assert token and not (set(token) & FORBIDDEN)
    assert unescape(token) == name


@pytest.mark.parametrize("name", ["train-job", "npu-train-job-0", "abc123"])
def test_plain_kubernetes_names_stay_readable(name: str) -> None:
    assert escape(name) == name


def test_subject_builders_parse_back() -> None:
    s = Subjects("tessera")
    subj = s.card("node.example.com", "GPU-1234_abcd")
    assert subj.count(".") == 4
    assert s.parse(subj) == ("card", ("node.example.com", "GPU-1234_abcd"))
    assert s.parse(s.job("team.a", "job")) == ("job", ("team.a", "job"))
    with pytest.raises(ValueError, match="not a tessera event subject"):
        s.parse("other.ev.job.a.b")
    with pytest.raises(ValueError, match="subject root"):
        Subjects("bad.root")


def test_envelope_round_trip_and_errors() -> None:
    env = Envelope(type="SliceReserved", version=2, msg_id="m#1", traceparent="00-ab-cd-01")
    assert Envelope.from_headers(env.to_headers()) == env
    with pytest.raises(EnvelopeError, match="Tessera-Type"):
        Envelope.from_headers({"Nats-Msg-Id": "x"})
    with pytest.raises(EnvelopeError, match="not an integer"):
        Envelope.from_headers({"Tessera-Type": "X", "Tessera-Version": "v2"})


def test_msg_ids_are_deterministic_and_bounded() -> None:
    assert msg_id("seq:5", 2) == msg_id("seq:5", 2) != msg_id("seq:5", 3)
    assert len(msg_id("x" * 500, 1)) < 64
    assert msg_id("seq:5", 0, "allocator") != msg_id("seq:5", 0, "queue")  # services apart


def test_registry_round_trips_every_event_and_names_bad_fields() -> None:
    reg = default_registry()
    card = CardSpec(
        uuid="u0", node="n0", index=0, type="Ascend910B3", vendor="huawei", memory=65536, cores=20
    )
    usage = CardUsage(memory_used=16384, cores_used=5, slices_used=1, owners=("default/j/t-0",))
    for event in (
        CardRegistered(card=card),
        SliceReserved(
            card="u0",
            node="n0",
            owner="default/j/t-0",
            slice=SliceSpec(kind="template", memory=16384, cores=5, template="vir05_1c_16g"),
            usage=usage,
        ),
    ):
        assert reg.decode(event.type_name(), reg.encode(event)) == event
    assert set(reg.types) == {cls.type_name() for cls in ALL_EVENTS}
    with pytest.raises(UnknownEventType):
        reg.decode("Nope", b"{}")
    with pytest.raises(UndecodableEvent, match=r"\$\.card"):
        reg.decode("CardRegistered", b'{"type":"CardRegistered","card":5}')
    with pytest.raises(ValueError, match="registered twice"):
        Registry([CardRegistered, CardRegistered])


def test_events_ignore_unknown_fields_from_newer_writers() -> None:
    reg = default_registry()
    body = b'{"type":"NodeLost","node":"n1","added_in_v9":true}'
    assert reg.decode("NodeLost", body).node == "n1"  # type: ignore[attr-defined]


def test_committed_schema_matches_code() -> None:
    assert SCHEMA_PATH.read_text() == render(), "run `python -m contracts.schema` and commit"


def test_a_pods_containers_on_one_card_are_booked_as_one_slice_of_their_sum() -> None:
    """HAMi put two containers of a pod on one card (`GPU-x,…,3000,…:;GPU-x,…,5000,…:;`): the
    ledger holds one slice per card per pod, and refused the second, so 5000 MB of a card
    HAMi had filled looked free; booked as their sum, the card is as full as it is."""
    from contracts import hami
    from services.core.ledger import CardState, Rejection, ReserveSlice, decide, evolve

    annotations = {hami.NVIDIA_ALLOCATED: "GPU-x,NVIDIA,3000,10:;GPU-x,NVIDIA,5000,20:GPU-y,NVIDIA,1000,0:;"}
    slices = hami.annotated_slices("n1", annotations)
    assert {a.card: (a.slice.memory, a.slice.cores) for a in slices} == {"GPU-x": (8000, 30), "GPU-y": (1000, 0)}
    card = CardSpec(uuid="GPU-x", node="n1", index=0, type="NVIDIA-A100", vendor="nvidia", memory=40960,
                    cores=100, split_count=10)  # fmt: skip
    state = CardState(uuid="GPU-x", spec=card)
    (x,) = [a for a in slices if a.card == "GPU-x"]
    events = decide(state, ReserveSlice(owner="ns/p/p", slice=x.slice))
    assert not isinstance(events, Rejection), events
    for e in events:
        state = evolve(state, e)
    assert state.usage.memory_used == 8000
