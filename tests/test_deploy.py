"""The compose file and Helm chart are for users with Docker/Kubernetes; here we check structure."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SERVICES = {"admission": "services.admission", "queue": "services.queue", "scheduler": "services.scheduler",
            "allocator": "services.allocator", "node-agent": "services.nodeagent"}  # fmt: skip


def test_compose_runs_nats_with_jetstream_jaeger_and_the_five_services() -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    assert set(services) == {"nats", "jaeger", *SERVICES}
    assert "--jetstream" in services["nats"]["command"]
    for name, module in SERVICES.items():
        svc = services[name]
        assert svc["command"][0] == module, name
        assert (ROOT / svc["build"]["context"] / svc["build"]["dockerfile"]).exists()
        assert svc["environment"]["TESSERA_NATS_URL"] == "nats://nats:4222"
        assert "nats" in svc["depends_on"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["python", "-m"]' in dockerfile


def test_helm_chart_declares_the_services() -> None:
    """Without helm: the chart's component table names every service module (rendering is
    tests/test_chart.py's, which needs the helm binary)."""
    chart = yaml.safe_load((ROOT / "charts/tessera/Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "tessera"
    values = yaml.safe_load((ROOT / "charts/tessera/values.yaml").read_text())
    assert set(values["services"]) == {"admission", "queue", "scheduler", "allocator", "nodeAgent"}
    helpers = (ROOT / "charts/tessera/templates/_helpers.tpl").read_text()
    for module in SERVICES.values():
        assert f"module: {module}," in helpers, module
