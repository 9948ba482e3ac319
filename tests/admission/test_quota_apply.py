"""`tessera apply` of a ResourceQuota (issue 25): its spec.hard becomes the quota subject's
`QuotaChanged` (status ignored, as kubectl apply never writes it); the same again is unchanged,
a change configured; a bad quantity is refused naming its key."""

from __future__ import annotations

from contracts.api import ACCEPTED, CONFIGURED, REJECTED, UNCHANGED
from contracts.events import QuotaChanged
from services.admission.plan import Known, fold_known, plan_apply

QUOTA = """
apiVersion: v1
kind: ResourceQuota
metadata: {{name: npu, namespace: team-a}}
spec: {{hard: {{requests.huawei.com/Ascend910B3: '{cards}', limits.memory: 8Gi}}}}
status: {{used: {{requests.huawei.com/Ascend910B3: '5'}}}}
"""


def test_a_quota_is_appended_then_unchanged_then_configured() -> None:
    known = Known()
    plan = plan_apply(QUOTA.format(cards=8), known, None, frozenset())
    assert [r.outcome for r in plan.results] == [ACCEPTED]
    (write,) = plan.writes
    assert write.event == QuotaChanged(namespace="team-a", name="npu", used={},
                                       hard={"requests.huawei.com/Ascend910B3": 8000, "limits.memory": 8192})  # fmt: skip
    assert write.expected_seq == 0  # a new subject: a racing apply of the same name conflicts
    fold_known(known, 7, "quota", write.event)
    assert [
        r.outcome for r in plan_apply(QUOTA.format(cards=8), known, None, frozenset()).results
    ] == [UNCHANGED]
    again = plan_apply(QUOTA.format(cards=10), known, None, frozenset())
    assert [r.outcome for r in again.results] == [CONFIGURED]
    assert again.writes[0].expected_seq == 7


def test_a_bad_quantity_is_refused_naming_its_key() -> None:
    plan = plan_apply(QUOTA.format(cards="many"), Known(), None, frozenset())
    (result,) = plan.results
    assert result.outcome == REJECTED and not plan.writes
    assert result.reasons[0].startswith(
        "spec.hard[requests.huawei.com/Ascend910B3]: 'many' is not a quantity"
    )
