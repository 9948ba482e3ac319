"""explain's words for a job its namespace's ResourceQuota holds at enqueue (issue 25): the
quota by name and key, the numbers, and what would let the job in — not the queue, and not
the nodes (which have room). Rows from the resourcequota table, so words and scenarios agree.
Also: the API server's status.used counts Tessera's own pods once (only its excess over them is
other pods' use), a raised quota admits the held job, and a cluster without quotas opens
sessions without the plugin doing any work."""

from __future__ import annotations

from contracts.events import QuotaChanged
from services.core.scheduling.config import default_conf, parse_conf
from services.core.scheduling.decide import decide, open_session
from services.core.scheduling.snapshot import Snapshot
from tests.core.scheduling.scenarios import _simulation, bound_of, load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("resourcequota")}


def test_a_job_over_its_namespace_quota_is_explained_by_the_quota() -> None:
    u = unschedulable(ROWS["ascend-cards-over-quota"], "team-a/big")
    assert u.plugin == "resourcequota"
    assert u.code == "NotEnqueued"
    assert u.why.startswith("namespace team-a: huawei.com/Ascend910B3 requested 4, quota 8, used 6 "
                            "(ResourceQuota npu: requests.huawei.com/Ascend910B3)"), u.why  # fmt: skip
    assert "the nodes are not the reason" in u.why  # 16 cards, 8 free: the quota alone holds it
    assert u.unblock == ("let jobs in namespace team-a finish (2 huawei.com/Ascend910B3 must be freed), "
                         "or raise requests.huawei.com/Ascend910B3 of ResourceQuota team-a/npu to 10")  # fmt: skip


def test_a_job_larger_than_the_quota_says_to_ask_for_less() -> None:
    u = unschedulable(ROWS["hami-limits-gpu-count"], "ml/p3")
    assert u.reason.startswith("namespace ml: nvidia.com/gpu requested 3, quota 2, used 0")
    assert (
        u.unblock
        == "ask for at most 2 nvidia.com/gpu, or raise limits.nvidia.com/gpu of ResourceQuota ml/gpu to 3"
    )


def test_no_quota_no_work() -> None:
    ssn = open_session(Snapshot(), default_conf())
    plugin = ssn.plugins["resourcequota"]
    assert plugin.acc is None and plugin.quotas == {}  # type: ignore[attr-defined]


def _held(sim: object, conf: object) -> dict[str, str]:
    return {
        f"{u.namespace}/{u.name}": u.reason
        for u in decide(sim.projection.snapshot(), conf).unschedulable
    }  # type: ignore[attr-defined, arg-type]


def test_status_used_counts_tessera_pods_once_and_a_raised_quota_admits() -> None:
    """`pre` (6 cards) exists in the API server, which counts it in status.used: with 6 used
    there the gang still sees 6 (not 12); with 7 (another scheduler's pod holds 1) it sees 7;
    raised to 11 the quota takes the gang."""
    sc = ROWS["ascend-cards-over-quota"]
    sim = _simulation(sc, cycles=0)
    sim.run()
    conf = parse_conf(sc.conf)
    key = "requests.huawei.com/Ascend910B3"

    def quota(hard: int, used: int) -> QuotaChanged:
        return QuotaChanged(
            namespace="team-a", name="npu", hard={key: hard * 1000}, used={key: used * 1000}
        )

    sim.emit(quota(8, 6))
    assert "requested 4, quota 8, used 6 (" in _held(sim, conf)["team-a/big"]
    sim.emit(quota(8, 7))
    assert "requested 4, quota 8, used 7 (" in _held(sim, conf)["team-a/big"]
    sim.emit(quota(11, 7))
    assert "team-a/big" not in _held(sim, conf)
    bound = bound_of(decide(sim.projection.snapshot(), conf))
    assert {k for k in bound if k.startswith("team-a/big-")} == {
        f"team-a/big-w-{i}" for i in range(4)
    }
