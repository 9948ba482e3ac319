"""explain's words for a job its namespace's ResourceQuota holds at enqueue (issue 25): the
quota by name and key, the numbers, and what would let the job in — not the queue, and not
the nodes (which have room). Rows from the resourcequota table, so words and scenarios agree;
and a cluster without quotas opens sessions without the plugin doing any work."""

from __future__ import annotations

from services.core.scheduling.config import default_conf
from services.core.scheduling.decide import open_session
from services.core.scheduling.snapshot import Snapshot
from tests.core.scheduling.scenarios import load_table
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
    assert u.unblock == "ask for at most 2 nvidia.com/gpu, or raise limits.nvidia.com/gpu of ResourceQuota ml/gpu to 3"


def test_no_quota_no_work() -> None:
    ssn = open_session(Snapshot(), default_conf())
    plugin = ssn.plugins["resourcequota"]
    assert plugin.acc is None and plugin.quotas == {}  # type: ignore[attr-defined]
