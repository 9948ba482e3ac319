"""Issue 14: a gang `enqueue` refuses is tried on the nodes in a throw-away statement, so its
`JobUnschedulable` names the nodes the way `allocate`'s would — and the trial changes nothing:
not the decisions, not the session's nodes, cards and tasks, not the plugins' tallies."""

from __future__ import annotations

from typing import Any

import pytest

from services.core.scheduling import decide as decide_module
from services.core.scheduling import trial as trial_module
from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.scheduling.decide import close_session, decide, open_session
from services.core.scheduling.decisions import Unschedulable, unschedulable_key
from services.core.scheduling.registry import build_actions
from services.core.scheduling.session import Session
from services.core.scheduling.trial import gang_trials
from tests.core.scheduling.scenarios import Scenario, _simulation

B3 = "huawei.com/Ascend910B3"


def _nodes(n: int, cards: int = 8) -> dict[str, Any]:
    return {"nodes": [{"name": f"node-{chr(97 + i)}", "cpu": 192, "memory": "1536Gi",
                       "devices": [{"type": "Ascend910B3", "count": cards}]} for i in range(n)]}  # fmt: skip


def _gang(name: str, replicas: int, cards: int, queue: str = "default") -> str:
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, namespace: default}}
spec:
  minAvailable: {replicas}
  queue: {queue}
  tasks:
    - name: worker
      replicas: {replicas}
      template:
        spec:
          containers:
            - {{name: c, image: x, resources: {{limits: {{{B3}: "{cards}"}}}}}}
---"""


def _pod(name: str, cards: int = 1) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  containers:
    - {{name: c, image: x, resources: {{limits: {{{B3}: "{cards}"}}}}}}
---"""


def _snapshot(inventory: dict[str, Any], workload: str) -> Any:
    sim = _simulation(Scenario("trial", "t", DEFAULT_CONF, inventory, workload, {}), cycles=0)
    sim.run()  # submits the workload without running a session
    return sim.projection.snapshot()


def _waiting(snap: Any, name: str) -> Unschedulable:
    d = decide(snap, parse_conf(DEFAULT_CONF))
    return next(u for u in d.unschedulable if u.name == name)


def test_a_gang_bigger_than_the_cluster_names_the_nodes_the_third_pod_meets() -> None:
    """2 nodes × 8 cards, 4 pods × 8 whole cards: the first two pods fill the nodes in the
    trial, the third meets two full nodes; two of the gang's four pods stay unplaced."""
    u = _waiting(_snapshot(_nodes(2), _gang("huge", 4, 8)), "huge")
    assert u.code == "NotEnqueued"
    assert u.why == "gang needs 32 whole Ascend910B3 cards, the cluster has 16"  # the rule leads
    assert set(u.node_reasons) == {"node-a", "node-b"}
    assert all("CardInsufficientMemory" in r for r in u.node_reasons.values()), u.node_reasons
    # the rule, not Volcano's queue words: no queue limit is why (issue 26 item 5)
    assert u.reason.startswith("gang needs 32 whole Ascend910B3 cards, the cluster has 16; "
                               "2/4 tasks in gang unschedulable: 0/2 nodes are unavailable: 2 ")  # fmt: skip
    (group,) = u.groups  # the words describe the trial's state: both nodes full
    assert (group.nodes, group.plugin, group.examples) == (2, "deviceshare", ("node-a", "node-b"))
    assert group.reason.startswith("Ascend910B3: asked 8 whole cards, 0 of 8 free")
    assert u.unblock.startswith("add 16 Ascend910B3 cards to the cluster")


def test_a_queue_capability_refusal_names_no_node() -> None:
    """The queue may hold 2 cards, the gang asks 4 on a cluster of 16: every pod fits a node,
    so the queue rule stays the reason, the words say the nodes are not, and no node is listed."""
    queue = f"""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: small}}
spec: {{weight: 1, capability: {{{B3}: "2"}}}}
---"""
    u = _waiting(_snapshot(_nodes(2), queue + _gang("four", 4, 1, queue="small")), "four")
    assert u.code == "NotEnqueued" and u.plugin == "proportion"
    assert u.reason == "queue resource quota insufficient or cluster overused"
    assert u.node_reasons == {} and u.groups == ()
    assert "capability 2" in u.why, u.why
    assert u.why.endswith("; the nodes are not the reason: the gang's 4 pods fit on them now")


def test_the_key_ignores_how_many_pods_the_nodes_would_take() -> None:
    """A waiting job is not logged again because other jobs moved the trial's counts; it is
    when the nodes' reason changes in words."""
    refused = "queue resource quota insufficient or cluster overused"
    a = f"{refused}; 2/4 tasks in gang unschedulable: 0/2 nodes are unavailable: 2 8/8 CardInsufficientMemory."
    b = f"{refused}; 3/4 tasks in gang unschedulable: 0/3 nodes are unavailable: 3 8/8 CardInsufficientMemory."
    c = f"{refused}; 2/4 tasks in gang unschedulable: 0/2 nodes are unavailable: 2 Insufficient cpu."
    assert unschedulable_key(a, "w") == unschedulable_key(b, "w")
    assert unschedulable_key(a, "w") != unschedulable_key(c, "w")
    # allocate's own reasons keep their numbers, as before
    assert unschedulable_key("1/2 tasks in gang unschedulable: x", "") != unschedulable_key(
        "2/2 tasks in gang unschedulable: x", "")  # fmt: skip


def test_records_that_say_so_log_a_waiting_job_again_only_when_its_trial_names_other_reasons() -> None:
    """How the nodes fall into groups under the trial's reasons moves with every other job's
    placement and end: in a churn of Volcano Jobs (benchmarks.kube_churn: 400 Jobs on 16
    nodes) 19,966 of the log's 29,012 messages were such a waiting job's refusal said again.
    Records written before (`verdicts_by_words` False) re-run as they ran."""
    from services.core.scheduling.decisions import Decisions, by_words
    from services.core.scheduling.record import configured, decision_events

    refused = "queue resource quota insufficient or cluster overused"
    gang = "2/2 tasks in gang unschedulable: 0/16 nodes are unavailable:"
    a = f"{refused}; {gang} 7 8/8 CardInsufficientMemory, 1 1/8 CardTimeSlicingExhausted: every slice is taken (4/4 on n-a-npu-1)."
    b = f"{refused}; {gang} 9 8/8 CardInsufficientMemory, 2 7/8 CardInsufficientMemory, 1 1/8 CardTimeSlicingExhausted: every slice is taken (4/4 on n-b-npu-5)."
    c = f"{refused}; {gang} 10 8/8 CardInsufficientMemory."
    d = f"{refused}; {gang} 10 Insufficient cpu."
    assert unschedulable_key(a, "w") != unschedulable_key(b, "w")  # the groups moved
    assert by_words(unschedulable_key(a, "w")) == by_words(unschedulable_key(b, "w"))
    assert len({by_words(unschedulable_key(r, "w")) for r in (a, c, d)}) == 3  # other reasons named
    assert by_words(unschedulable_key(a, "w")) != by_words(unschedulable_key(a, "another rule"))
    plain = "2/2 tasks in gang unschedulable: 0/16 nodes are unavailable: 7 8/8 CardInsufficientMemory."
    assert by_words(unschedulable_key(plain, "w")) == unschedulable_key(plain, "w")  # allocate's own: as before

    def logged(reason: str, last: str, by: bool) -> int:
        u = Unschedulable(namespace="ns", name="j", reason=reason, why="w")
        return len(decision_events(Decisions(based_on=9, unschedulable=(u,)), session=1, mode="service",
                                   outstanding={}, last_reasons={"ns/j": unschedulable_key(last, "w")},
                                   proposed={}, verdicts_by_words=by))  # fmt: skip

    assert (logged(b, a, True), logged(b, a, False)) == (0, 1)
    assert (logged(d, a, True), logged(d, a, False)) == (1, 1)
    assert configured().verdicts_by_words  # what a scheduler records from now on


def _busy(nodes: int = 3) -> Any:
    """Placed pods, a placed gang and two refused gangs of one shape plus one of another; on
    100 nodes or more the node search samples and its start rotates with every task."""
    big = max(4, nodes + 1)
    work = _pod("one") + _gang("fits", 2, 4) + _gang("huge", big, 8) + _gang("huge2", big, 8)
    work += _gang("wide", 8 * nodes - 4, 1)
    return _snapshot(_nodes(nodes), work)


def _state(ssn: Session) -> Any:
    """Everything of the session a trial could disturb, as plain values."""
    nodes = [(n.name, repr(n.idle), repr(n.used), repr(n.pipelined), repr(n.releasing),
              sorted(n.tasks), [repr(c.usage) for c in n.cards]) for n in ssn.node_list]  # fmt: skip
    tasks = [(t.uid, t.status, t.node, t.slices, t.score, t.runners_up, t.feasible)
             for j in ssn.jobs.values() for t in j.tasks.values()]  # fmt: skip
    jobs = [(j.key, repr(j.allocated), j.ready_task_num()) for j in ssn.jobs.values()]
    prop = ssn.plugins["proportion"]
    tallies = {q: (a.allocated, a.inqueue, a.share) for q, a in prop.attrs.items()}  # type: ignore[attr-defined]
    return (nodes, tasks, jobs, tallies, ssn.__dict__.get("_next_start"), dict(ssn.shape_counts),
            dict(ssn.cards_why), list(ssn.committed_allocations))  # fmt: skip


@pytest.mark.parametrize("nodes", [3, 120])
def test_a_trial_leaves_the_session_as_it_found_it(nodes: int) -> None:
    snap = _busy(nodes)
    conf = parse_conf(DEFAULT_CONF)
    ssn = open_session(snap, conf)
    actions = build_actions()
    for name in conf.actions:
        actions[name].execute(ssn)
    assert ssn.committed_allocations, "the session placed something (non-trivial state)"
    before = _state(ssn)
    trials = gang_trials(ssn)
    assert {"default/huge", "default/huge2", "default/wide"} <= set(trials)
    assert trials["default/huge"] is trials["default/huge2"]  # one shape: one trial
    assert trials["default/huge"].summary and trials["default/wide"].summary
    assert _state(ssn) == before


@pytest.mark.parametrize("node_cache", [True, False])
def test_decisions_are_the_same_with_and_without_trials(
    monkeypatch: pytest.MonkeyPatch, node_cache: bool
) -> None:
    """Placements, phases and queue figures do not depend on the trials; only the refused jobs'
    reasons do (and the cached and plain node paths agree on those too)."""
    snap = _busy()
    conf = parse_conf(DEFAULT_CONF)
    with_trials = decide(snap, conf, node_cache=node_cache)
    monkeypatch.setattr(decide_module, "gang_trials", lambda ssn: {})
    without = decide(snap, conf, node_cache=node_cache)
    for field in ("placements", "evictions", "phases", "queue_allocated", "queue_deserved", "queue_share"):
        assert getattr(with_trials, field) == getattr(without, field), field
    assert with_trials.placements, "something was placed"
    tried = {u.name: u for u in with_trials.unschedulable}
    assert tried["huge"].node_reasons and not {u.name: u for u in without.unschedulable}["huge"].node_reasons
    monkeypatch.undo()
    other = decide(snap, conf, node_cache=not node_cache)
    assert other.unschedulable == with_trials.unschedulable


def test_the_budget_bounds_the_trials_and_equal_shapes_share_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the budget a refused job keeps enqueue's words; a job of a shape already tried
    reuses its result without a new trial."""
    snap = _busy()
    conf = parse_conf(DEFAULT_CONF)
    placed: list[str] = []
    real = trial_module._place

    def counting(ssn: Session, job: Any, tasks: Any) -> Any:
        placed.append(job.key)
        return real(ssn, job, tasks)

    monkeypatch.setattr(trial_module, "_place", counting)
    ssn = open_session(snap, conf)
    for name in conf.actions:
        build_actions()[name].execute(ssn)
    refused = [j.key for j in ssn.refused]
    assert gang_trials(ssn, budget=1).keys() == {k for k in refused if k.startswith("default/huge")}
    assert placed == [refused[0]]
    d = close_session(ssn)
    assert {u.name for u in d.unschedulable if u.node_reasons} >= {"huge", "huge2", "wide"}


def test_the_queue_tallies_are_not_told_of_a_trial() -> None:
    """Not even in the middle of one: proportion's sums are floats, and a task added and taken
    away again need not leave them bit for bit as they were."""
    from services.core.scheduling.statement import Statement

    ssn = open_session(_busy(), parse_conf(DEFAULT_CONF))
    prop = ssn.plugins["proportion"]
    task = next(t for t in ssn.jobs["default/one"].tasks.values())
    before = {q: dict(a.allocated) for q, a in prop.attrs.items()}  # type: ignore[attr-defined]
    with ssn.trial(()):
        stmt = Statement(ssn)
        stmt.allocate(task, ssn.node_list[0], ssn.bind_devices(task, ssn.node_list[0]))
        assert task.status == "Allocated"
        assert {q: dict(a.allocated) for q, a in prop.attrs.items()} == before  # type: ignore[attr-defined]
        stmt.discard()
    stmt = Statement(ssn)  # outside a trial the same step is counted
    stmt.allocate(task, ssn.node_list[0], ssn.bind_devices(task, ssn.node_list[0]))
    assert {q: dict(a.allocated) for q, a in prop.attrs.items()} != before  # type: ignore[attr-defined]
