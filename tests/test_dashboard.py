"""The chart's metrics: every service scrapeable by default, and a Grafana dashboard that
reads only what the services export.

Every metric a panel queries is one a Tessera service serves, under the name and with the
labels its query groups by (a renamed metric or label leaves a panel silently empty: this
test is where it shows); the card tiles and queue shares are there; the chart ships it as the
ConfigMap Grafana's sidecar picks up.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from services.core.observe import hami, volcano
from services.runtime import liveness
from services.runtime.metrics import SeriesFamily, ServiceMetrics
from services.scheduler import metrics as scheduler_metrics
from services.scheduler.metrics import SessionMetrics
from tests.test_chart import needs_helm, of_kind, render

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "charts" / "tessera" / "dashboards" / "tessera.json"
METRIC = re.compile(r"\b((?:hami|volcano|tessera)_[a-zA-Z0-9_]+)")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> dict[str, set[str]]:
    """Sample name → label names, for everything the services serve (constant labels too)."""
    out: dict[str, set[str]] = {}
    for spec in hami.SPECS:
        out[spec.name] = {"zone", *spec.labels}
    for spec in (*volcano.SPECS, *liveness.SPECS, *scheduler_metrics.SPECS):
        out[spec.name] = set(spec.labels)
    metrics = ServiceMetrics("any", CollectorRegistry())
    session = SessionMetrics(metrics)
    for holder in (metrics, session):
        for m in vars(holder).values():
            if isinstance(m, MetricWrapperBase):
                for suffix in SUFFIXES[m._type]:
                    out[m._name + suffix] = set(m._labelnames) | ({"le"} if suffix == "_bucket" else set())
            elif isinstance(m, SeriesFamily):  # the per-event series, written at scrape time
                for suffix in SUFFIXES[m.kind]:
                    out[m.name + suffix] = set(m.label_names) | ({"le"} if suffix == "_bucket" else set())
    return out


def panels() -> list[dict]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def test_every_query_names_exported_metrics_and_groups_by_their_labels() -> None:
    known = exported()
    queried = 0
    for panel in panels():
        for target in panel["targets"]:
            expr = target["expr"]
            names = METRIC.findall(expr)
            assert names, f"{panel['title']}: {expr}"
            for name in names:
                assert name in known, f"{panel['title']}: {name} is not exported"
            labels = set().union(*(known[n] for n in names))
            for group in re.findall(r"\bby \(([^)]*)\)", expr):
                used = {x.strip() for x in group.split(",")}
                assert used <= labels, f"{panel['title']}: by {used - labels} not a label"
            for used in re.findall(r"\{\{(\w+)\}\}", target["legendFormat"]):
                assert used in labels, f"{panel['title']}: legend {used}"
            queried += 1
    assert queried >= 15


def test_it_has_card_tiles_and_queue_shares() -> None:
    def exprs(kinds: tuple[str, ...]) -> str:
        return " ".join(t["expr"] for p in panels() if p["type"] in kinds for t in p["targets"])

    tiles = exprs(("gauge", "stat"))
    for name in ("hami_gpu_memory_allocated_bytes", "hami_gpu_core_allocated_ratio",
                 "hami_gpu_memory_limit_bytes", "hami_gpu_core_limit_ratio"):  # fmt: skip
        assert name in tiles, name
    assert "volcano_queue_share" in exprs(("bargauge", "timeseries"))


def test_it_tells_a_stuck_service_from_an_idle_one() -> None:
    """The liveness gauges every service serves (services/runtime/liveness.py) and the
    scheduler's lease and loop are plotted: a backlog, the time since the last session and
    event, leaders and connections, the loop's state."""
    queried = " ".join(t["expr"] for p in panels() for t in p["targets"])
    for spec in (*liveness.SPECS, *scheduler_metrics.SPECS):
        if spec.name not in ("tessera_log_folded_sequence", "tessera_log_last_sequence",
                             "tessera_scheduler_loop_timestamp_seconds"):  # (the backlog says them)  # fmt: skip
            assert spec.name in queried, spec.name


def test_panels_use_the_datasource_variable_and_fit_the_grid() -> None:
    doc = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


@needs_helm
def test_the_chart_ships_it_for_grafanas_sidecar() -> None:
    maps = of_kind(render(), "ConfigMap")
    dash = maps["rel-tessera-dashboard"]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dash["data"]["tessera.json"]) == json.loads(DASHBOARD.read_text())
    moved = of_kind(render(sets=("metrics.dashboard.namespace=monitoring",
                                 "metrics.dashboard.label=dashboards",
                                 "metrics.dashboard.annotations.grafana_folder=Tessera")), "ConfigMap")  # fmt: skip
    other = moved["rel-tessera-dashboard"]["metadata"]
    assert other["namespace"] == "monitoring" and other["labels"]["dashboards"] == "1"
    assert other["annotations"] == {"grafana_folder": "Tessera"}
    assert "rel-tessera-dashboard" not in of_kind(render(sets=("metrics.dashboard.enabled=false",)), "ConfigMap")



@needs_helm
def test_every_service_is_scrapeable_by_default() -> None:
    """Each service pod serves /metrics on the metrics port, announced for Prometheus' pod
    discovery, behind a Service of its own (the ServiceMonitor's target when enabled)."""
    docs = render()
    services = of_kind(docs, "Service")
    for name, deployment in of_kind(docs, "Deployment").items():
        pod = deployment["spec"]["template"]
        notes = pod["metadata"]["annotations"]
        (container,) = pod["spec"]["containers"]
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
        assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/port"] == str(port)
        assert f"--metrics-port={port}" in container["args"], name
        assert services[name]["spec"]["ports"][0]["targetPort"] == "metrics"
    quiet = of_kind(render(sets=("metrics.scrapeAnnotations=false",)), "Deployment")
    assert not any("prometheus.io/scrape" in d["spec"]["template"]["metadata"]["annotations"]
                   for d in quiet.values())  # fmt: skip


def test_the_cores_tile_is_still_the_share_of_the_card_allocated() -> None:
    """"Cores allocated per card" divides hami_gpu_core_allocated_ratio by hami_gpu_core_limit_ratio:
    with HAMi's 0–100 normalization (both were AI-core counts on a template card) the quotient
    is still the share of the card's cores held, 0.5 for half a card."""
    from contracts.devices import SliceSpec
    from services.core.ledger import CardState, RegisterCard, ReserveSlice, decide, evolve
    from tests.allocator.scenario import ascend_node

    (tile,) = [t["expr"] for p in panels() if p["title"] == "Cores allocated per card" for t in p["targets"]]
    assert re.search(r"hami_gpu_core_allocated_ratio\{[^}]*\}\) / max by \([^)]*\) \(hami_gpu_core_limit_ratio", tile)
    spec = ascend_node("n1", cards=1).cards[0]
    state = CardState(uuid=spec.uuid)
    for command in (RegisterCard(spec), ReserveSlice("default/a/a-0", SliceSpec(kind="template", memory=32768,
                                                                                cores=10, template="vir10_3c_32g"))):
        for event in decide(state, command):  # type: ignore[union-attr]
            state = evolve(state, event)
    got = {s.name: s.value for s in hami.card_series([state])}
    assert got["hami_gpu_core_allocated_ratio"] / got["hami_gpu_core_limit_ratio"] == 10 / spec.cores
