"""Gauges written straight in Prometheus' text format read back as the series they came from."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from services.core.observe import MetricSpec, Series
from services.runtime.exposition import GaugeText

CARD = MetricSpec("x_card_bytes", 'Bytes of a card\\ with "quotes"', ("node", "uuid"))
COUNT = MetricSpec("x_count", "How many")


def parsed(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip


def test_samples_read_back_with_const_labels_and_awkward_values() -> None:
    text = GaugeText([CARD, COUNT], const=[("zone", "vGPU")])
    odd = 'a"b\\c\nd'
    got = parsed(text.render([text.lines([
        Series("x_card_bytes", ("n1", odd), 2**36), Series("x_count", (), 3),
        Series("x_card_bytes", ("n2", "u2"), 0.5),
    ])]))  # fmt: skip
    assert got == {
        ("x_card_bytes", frozenset({("zone", "vGPU"), ("node", "n1"), ("uuid", odd)})): 2**36,
        ("x_card_bytes", frozenset({("zone", "vGPU"), ("node", "n2"), ("uuid", "u2")})): 0.5,
        ("x_count", frozenset({("zone", "vGPU")})): 3,
    }


def test_each_family_is_one_group_under_one_header() -> None:
    text = GaugeText([CARD, COUNT])
    out = text.render([text.lines([Series("x_card_bytes", ("n1", "u1"), 1)]),
                       text.lines([Series("x_count", (), 1), Series("x_card_bytes", ("n2", "u2"), 2)])])  # fmt: skip
    lines = [ln.split("{")[0].split(" ")[0] for ln in out.splitlines() if not ln.startswith("#")]
    assert lines == ["x_card_bytes", "x_card_bytes", "x_count"]
    assert out.count("# TYPE x_card_bytes gauge") == 1


def test_a_key_is_formatted_again_only_when_its_state_is_replaced() -> None:
    text = GaugeText([CARD])
    calls: list[str] = []

    def series_of(state: object) -> list[Series]:
        node, value = state  # type: ignore[misc]
        calls.append(node)
        return [Series("x_card_bytes", (node, node), value)]

    a, b = ("a", 1.0), ("b", 2.0)
    text.render_each([("a", a), ("b", b)], series_of)
    assert calls == ["a", "b"]
    b2 = ("b", 5.0)
    got = parsed(text.render_each([("a", a), ("b", b2)], series_of))
    assert calls == ["a", "b", "b"]  # only the replaced one
    assert got[("x_card_bytes", frozenset({("node", "b"), ("uuid", "b")}))] == 5.0
    got = parsed(text.render_each([("b", b2)], series_of))  # a card gone: its series too
    assert [k[1] for k in got] == [frozenset({("node", "b"), ("uuid", "b")})]
