"""A node's allocatable beyond cpu, memory, pods and cards (`NodeRegistered.resources`): read
from a Kubernetes Node's status as the pod side reads requests (units, device names left to
the cards), and from a simulated inventory's `resources`, refused with the field and the rule
where it names something the node's other fields or its cards hold."""

from __future__ import annotations

import pytest

from services.core.devices import build_vendors
from services.core.simulate.inventory import InventoryError, load_inventory
from services.core.workload.quantity import to_units
from services.kube.nodes import other_resources

CAT = build_vendors().catalogue


def test_a_kubelets_allocatable_gives_what_pods_are_fitted_against() -> None:
    allocatable = {"cpu": "96", "memory": "1Ti", "pods": "110", "ephemeral-storage": "95551679124",
                   "hugepages-1Gi": "0", "hugepages-2Mi": "2Gi", "huawei.com/Ascend910B3": "8",
                   "nvidia.com/gpu": "4", "rdma/hca_shared_devices_a": "1k", "example.com/broken": "x"}  # fmt: skip
    assert other_resources(allocatable) == {
        "ephemeral-storage": 91125,  # whole MiB, rounded down: 95551679124 bytes are 91125.18 MiB
        "hugepages-2Mi": to_units("hugepages-2Mi", "2Gi"),
        "rdma/hca_shared_devices_a": 1_000_000,  # milli-units
    }


def test_an_inventory_node_lists_its_other_resources() -> None:
    [node] = load_inventory({"nodes": [{"name": "n1", "cpu": 8, "memory": "8Gi",
                                        "resources": {"ephemeral-storage": "10Gi", "rdma/hca": 2}}]}, CAT)  # fmt: skip
    assert node.resources == {"ephemeral-storage": 10240, "rdma/hca": 2000}


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"cpu": 4}, "nodes[0].resources.cpu: given by the node's own `cpu` field"),
        ({"huawei.com/Ascend910B3": 8}, "nodes[0].resources.huawei.com/Ascend910B3: a device resource: "
         "list the cards under `devices`"),
        ({"ephemeral-storage": "lots"}, "nodes[0].resources.ephemeral-storage: "),
        ("10Gi", "nodes[0].resources: a map of resource name to quantity"),
    ],
)  # fmt: skip
def test_what_an_inventory_may_not_list_there_is_refused(resources: object, message: str) -> None:
    with pytest.raises(InventoryError) as err:
        load_inventory({"nodes": [{"name": "n1", "cpu": 8, "memory": "8Gi", "resources": resources}]}, CAT)
    assert str(err.value).startswith(message), str(err.value)


def test_bytes_that_hold_asks_are_whole_mib_rounded_down() -> None:
    """kube counts memory and ephemeral-storage in bytes: a 954Mi request does not fit a node of
    1000M (953.67 MiB). In whole MiB the ask rounds up and the node's allocatable down (a
    ResourceQuota's hard limit too); rounded up, the node held 954 and took the pod."""
    from services.core.workload.quota import quota_event
    from services.kube.nodes import node_view

    assert to_units("memory", "954Mi") == 954 and to_units("memory", "1000M") == 954  # an ask
    [node] = load_inventory({"nodes": [{"name": "n1", "cpu": 4, "memory": "1000M",
                                        "resources": {"ephemeral-storage": "1000M"}}]}, CAT)  # fmt: skip
    assert (node.memory_mib, node.resources) == (953, {"ephemeral-storage": 953})
    obj = {"metadata": {"name": "n1"}, "spec": {},
           "status": {"allocatable": {"cpu": "4", "memory": "1000M", "ephemeral-storage": "1000M", "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    got = node_view(obj, CAT, 0.0).registered
    assert (got.memory_mib, got.resources) == (953, {"ephemeral-storage": 953})
    quota, errors = quota_event({"metadata": {"name": "q"}, "spec": {"hard": {"requests.memory": "1000M"}},
                                 "status": {"used": {"requests.memory": "1000M"}}}, with_status=True)  # fmt: skip
    assert not errors and quota is not None
    assert (quota.hard, quota.used) == ({"requests.memory": 953}, {"requests.memory": 954})
