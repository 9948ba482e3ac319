"""One watch batch, one judgment per object: admission gets each Volcano object of a batch
once, as its last change shows it (services/kube/podsource.py `_latest`). Two changes of one
Queue in a batch (created, then edited or given its status before admission read either) were
both sent, and admission refused the second as a "duplicate queue" with a FailedAdmission
Warning — seen once in a loaded full run."""

from __future__ import annotations

from services.core.devices import build_vendors
from services.core.workload import admit
from services.core.workload.devicerequests import hami_parser
from services.kube import volcano
from services.kube.podsource import _latest


def queue(name: str, weight: int, state: str | None = None) -> dict[str, object]:
    obj: dict[str, object] = {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": name},
                              "spec": {"weight": weight}}  # fmt: skip
    if state:
        obj["status"] = {"state": state}
    return volcano.manifest(obj)


def test_a_batch_judges_each_object_once_as_it_last_is() -> None:
    reg = build_vendors()
    batch = [queue("twice", 1), queue("other", 2), queue("twice", 3), queue("twice", 3, "Open")]
    sent = _latest(batch)
    assert [(d["metadata"]["name"], d["spec"]["weight"]) for d in sent] == [("other", 2), ("twice", 3)]
    judged = admit(sent, hami_parser(reg), reg.resource_names())
    assert not judged.rejections and {q.name: q.weight for q in judged.queues} == {"other": 2, "twice": 3}
    # what the batch used to send: the second "twice" refused
    before = admit(batch, hami_parser(reg), reg.resource_names())
    assert [r.rule for r in before.rejections] == ["duplicate queue", "duplicate queue"]
