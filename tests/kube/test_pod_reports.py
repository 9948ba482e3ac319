"""The node agent's word on pods. Tessera's own: a pod bound for a commit and then deleted is
told to the log as finished (`TaskFinished`, "pod deleted") — also when the deletion came
before this process had read that commit from the log (its reading behind the binder's, as
under a burst of placements): before, nothing was told, and a Volcano Job whose pod went that
way stood waiting for its word for good, the pod's cards booked. Other schedulers': their use
of a node is appended (`NodeUsage`), and an append that failed is tried again by itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts.envelope import Envelope
from contracts.events import NodeUsage, PlacementCommitted, TaskFinished, TaskPlacement, TaskStarted
from contracts.registry import default_registry
from services.core.scheduling.snapshot import POD_DELETED
from services.kube import volcano
from services.kube.client import pods_path
from services.kube.nodesource import KubeNodeAgent
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import EventService, Outgoing, Received
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster
from tests.processes import fail_once, wait_until


def job_pod(name: str, stamp: int) -> dict[str, Any]:
    """A pod as Volcano's job controller makes one, bound as the binder binds it (its commit stamped)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {volcano.PLACEMENT: str(stamp)},
                         "ownerReferences": [{"apiVersion": volcano.BATCH, "kind": "Job", "name": "train",
                                              "uid": "job-uid", "controller": True}]},
            "spec": {"schedulerName": "volcano", "nodeName": "n1",
                     "containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip


async def test_a_pod_deleted_before_its_commit_was_read_is_told_finished_once_it_is(
    cluster: Cluster, jetstream_log: JetStreamLog
) -> None:
    log = jetstream_log
    agent = KubeNodeAgent(log, cluster.kube)
    await agent.recover()
    stopping = asyncio.Event()
    running = asyncio.create_task(agent.background(stopping))
    try:
        # the commit is in the log; this agent has not read it (its consumer is not running)
        scheduler = EventService("scheduler", log, [], {})
        commit = PlacementCommitted(namespace="default", name="train",
                                    placements=(TaskPlacement(task="train-worker-0", node="n1"),))  # fmt: skip
        appended = await scheduler.publish(Outgoing(log.subjects.job("default", "train"), commit))
        seq = appended.seq  # type: ignore[union-attr]
        await cluster.create_pod(job_pod("train-worker-0", seq))

        await wait_until(lambda: _has(agent, "train-worker-0"), 30, "the bound pod on the agent's watch")
        await cluster.kube.delete(pods_path("default", "train-worker-0"),
                                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})  # fmt: skip
        await wait_until(lambda: _has(agent, "train-worker-0", False), 30, "its deletion on the agent's watch")

        # now the agent reads the commit — its first telling fails (the log out of reach),
        # and the delivery comes again: the deleted pod is still told
        msg = await log.last(log.subjects.job("default", "train"))
        assert msg is not None and msg.seq == seq
        failed = fail_once(agent.service)
        rx = Received(msg, Envelope.from_headers(msg.headers))
        with pytest.raises(ConnectionError):
            await agent.on_event(commit, rx)
        await agent.on_event(commit, rx)  # delivered again
        assert [type(e).__name__ for e in failed] == ["TaskFinished"]

        told = [m async for m in log.replay(seq + 1, log.subjects.job("default", "train"))]
        kinds = [m.headers["Tessera-Type"] for m in told]
        assert kinds == ["TaskFinished"], kinds
        finished = default_registry().decode("TaskFinished", told[0].data)
        assert isinstance(finished, TaskFinished)
        assert (finished.task, finished.node, finished.reason) == ("train-worker-0", "n1", POD_DELETED)
        assert agent.gone_early == {}

        # a pod of a later commit deleted early is kept for it; one of a commit read already is not
        await cluster.create_pod(job_pod("train-worker-1", seq))
        await wait_until(lambda: _has(agent, "train-worker-1"), 30, "the second pod on the agent's watch")
        await cluster.kube.delete(pods_path("default", "train-worker-1"),
                                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})  # fmt: skip
        await wait_until(lambda: _has(agent, "train-worker-1", False), 30, "its deletion on the agent's watch")
        assert agent.gone_early == {}  # its stamp is a commit this agent has read
    finally:
        stopping.set()
        await cancel_all([running])


async def test_a_new_commit_read_while_a_finish_is_told_is_not_written_over(
    cluster: Cluster, jetstream_log: JetStreamLog
) -> None:
    """The pod of commit N deleted; while its TaskFinished is on the wire the agent reads the
    task's next commit N'. Its note of the task said (finished, N) afterwards: the pod made for
    N' failed the stamp check and its start was never told."""
    log = jetstream_log
    subject = log.subjects.job("default", "train")
    agent = KubeNodeAgent(log, cluster.kube)
    await agent.recover()
    scheduler = EventService("scheduler", log, [], {})
    commit = PlacementCommitted(namespace="default", name="train",
                                placements=(TaskPlacement(task="train-worker-0", node="n1"),))  # fmt: skip

    async def commit_read() -> int:
        appended = await scheduler.publish(Outgoing(subject, commit))
        msg = await log.last(subject)
        assert msg is not None and msg.seq == appended.seq  # type: ignore[union-attr]
        await agent.on_event(commit, Received(msg, Envelope.from_headers(msg.headers)))
        return msg.seq

    first = await commit_read()
    later: list[int] = []
    tell = agent.service.publish

    async def telling(out: Outgoing, *args: Any) -> Any:
        result = await tell(out, *args)
        if isinstance(out.event, TaskFinished) and not later:
            later.append(await commit_read())  # read while the finish's publish is out
        return result

    agent.service.publish = telling  # type: ignore[method-assign]
    stopping = asyncio.Event()
    running = asyncio.create_task(agent.background(stopping))
    try:
        await cluster.create_pod(job_pod("train-worker-0", first))
        await wait_until(lambda: _has(agent, "train-worker-0"), 30, "the bound pod on the agent's watch")
        await cluster.kube.delete(pods_path("default", "train-worker-0"),
                                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})  # fmt: skip
        await wait_until(lambda: _has(agent, "train-worker-0", False), 30, "its deletion on the agent's watch")
        # the watch drops the pod before the agent's TaskFinished is out (seen in CI under load)
        await wait_until(lambda: asyncio.sleep(0, result=bool(later)), 30, "the next commit read while the finish was told")
        again = job_pod("train-worker-0", later[0])
        again["status"] = {"phase": "Running"}
        made = await cluster.create_pod(again)
        await cluster.kube.patch(pods_path("default", "train-worker-0", "status"), {"status": {
            "phase": "Running", "containerStatuses": [{"name": "c", "ready": True, "state": {"running": {}}}]}})  # fmt: skip
        assert made["metadata"]["annotations"][volcano.PLACEMENT] == str(later[0])

        async def started() -> bool:
            kinds = [m.headers["Tessera-Type"] async for m in log.replay(later[0] + 1, subject)]
            return kinds == ["TaskStarted"]

        await wait_until(started, 30, "the start of the pod of the next commit told")
        msg = await log.last(subject)
        assert msg is not None and isinstance(default_registry().decode("TaskStarted", msg.data), TaskStarted)
    finally:
        stopping.set()
        await cancel_all([running])


async def test_a_usage_append_that_failed_is_tried_again_with_nothing_else_changing(
    cluster: Cluster, jetstream_log: JetStreamLog
) -> None:
    """Before, the retry waited for the next change of another scheduler's pod: on a quiet
    cluster sessions placed against usage the log never got."""
    log = jetstream_log
    agent = KubeNodeAgent(log, cluster.kube)
    await agent.recover()
    refused = fail_once(agent.service, lambda out: isinstance(out.event, NodeUsage))
    stopping = asyncio.Event()
    running = asyncio.create_task(agent.background(stopping))
    try:
        web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx",
                                                          "resources": {"requests": {"cpu": "2"}}}]}}  # fmt: skip
        await cluster.create_pod(web)

        async def usage() -> NodeUsage | None:
            msg = await log.last(log.subjects.usage("n1"))
            return None if msg is None else default_registry().decode("NodeUsage", msg.data)  # type: ignore[return-value]

        async def appended() -> bool:
            return await usage() is not None

        await wait_until(appended, 30, "the other scheduler's use of n1 in the log after a failed append")
        assert [e.node for e in refused] == ["n1"]
        got = await usage()
        assert got is not None and got.cpu_milli == 2000
    finally:
        stopping.set()
        await cancel_all([running])


async def _has(agent: KubeNodeAgent, pod: str, there: bool = True) -> bool:
    return (("default", pod) in agent.pods) is there
