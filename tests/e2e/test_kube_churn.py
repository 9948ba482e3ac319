"""`benchmarks.kube_churn` at a small size: Volcano Jobs arrive, run, complete and go (half by
their ttl, half deleted as `kubectl delete` does) on four nodes with more demand than cards, and
the run is judged clean — every Job Completed and gone with its pods and PodGroup, no pod made
twice, the whole log audited without a finding. What a cluster does all day; the binding
benchmark binds pods once and ends nothing."""

from __future__ import annotations

from benchmarks import kube_churn


def test_the_workload_is_seeded_and_asks_more_than_the_cards() -> None:
    a, b = (kube_churn.workload(7, 30, 10.0, (0.2, 0.8)) for _ in range(2))
    assert a.jobs == b.jobs and a.run_for == b.run_for and a.arrivals == b.arrivals
    assert kube_churn.workload(8, 30, 10.0, (0.2, 0.8)).jobs != a.jobs
    whole = sum(int(c["resources"]["limits"][kube_churn.DEVICE]) * j["spec"]["tasks"][0]["replicas"]
                for j in a.jobs for c in j["spec"]["tasks"][0]["template"]["spec"]["containers"])  # fmt: skip
    assert whole > 4 * 8  # more than four nodes' cards: gangs wait for each other's ends
    assert {"ttlSecondsAfterFinished" in j["spec"] for j in a.jobs} == {True, False}


async def test_jobs_run_complete_and_go_with_nothing_left_or_doubled() -> None:
    args = kube_churn.parse(["--nodes", "4", "--jobs", "30", "--rate", "10", "--run-min", "0.2",
                             "--run-max", "0.8", "--seeds", "3", "--timeout", "240"])  # fmt: skip
    [row] = await kube_churn.main_async(args)
    assert row["completed"] == row["gone"] == 30, row
    assert row["clean"], row
