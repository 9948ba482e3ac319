"""The API servers the edge tests run against: kmock's emulator always, a real one when the
machine has it (`KUBEBUILDER_ASSETS`, `TESSERA_TEST_KUBECONFIG`); see cluster.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kube.cluster import Cluster, open_cluster, real_backends


@pytest.fixture(params=["kmock", "envtest", "kubeconfig"])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    if request.param != "kmock" and request.param not in real_backends():
        pytest.skip(f"no {request.param} API server here (KUBEBUILDER_ASSETS / TESSERA_TEST_KUBECONFIG)")
    async with open_cluster(request.param) as c:
        yield c
