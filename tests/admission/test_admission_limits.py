"""One hostile object cannot kill or hang the admission process (issue 12 item 3).

Through the real process on a real nats-server: each object is answered with a rejection that
names the limit, and the same process then accepts a valid object. Before the limits, a 4,100
character name made a subject longer than NATS' control line (the server dropped the
connection and admission exited), `replicas: 1000000000000` hung it, and `replicas: 100000`
came back as "nats: maximum payload exceeded".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contracts.api import ACCEPTED, REJECTED, ApplyReply, ApplyRequest, decode, encode
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.core.workload.test_names import pod
from tests.processes import ServiceProcess

QUEUE = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q%d}\n"


def job(replicas: int, tasks: int = 1, annotations: str = "{}") -> str:
    task = f"""
    - name: t%d
      replicas: {replicas}
      template:
        spec:
          containers: [{{name: c, image: busybox}}]"""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: big, annotations: {annotations}}}
spec:
  tasks:{"".join(task % i for i in range(tasks))}
"""


@pytest.fixture
def admission(jetstream_log: JetStreamLog, nats_url: str) -> Iterator[ServiceProcess]:
    log = jetstream_log
    proc = ServiceProcess("services.admission", ["--nats", nats_url, "--root", log.subjects.root,
                                                 "--stream", log.stream])  # fmt: skip
    proc.start("admission ready")
    try:
        yield proc
    finally:
        proc.stop()


async def apply(log: JetStreamLog, manifest: str) -> ApplyReply:
    msg = await log.nc.request(f"{log.subjects.api('admission')}.apply",
                               encode(ApplyRequest(manifest=manifest)), timeout=30)  # fmt: skip
    return decode(msg.data, ApplyReply)


def only_reasons(reply: ApplyReply) -> tuple[str, ...]:
    assert not reply.error, reply.error
    [result] = reply.results
    assert result.outcome == REJECTED, result
    return result.reasons


HOSTILE = {
    "4100-character name": (pod("a" * 4100), "metadata.name: Invalid value:", "no more than 253"),
    "4100-character namespace": (pod("p", "n" * 4100), "metadata.namespace: Invalid value:",
                                 "no more than 63"),
    "a trillion replicas": (job(1_000_000_000_000), "spec.tasks[0].replicas:",
                            "at most 10000 pods per job"),
    "100,000 replicas": (job(100_000), "spec.tasks[0].replicas:", "at most 10000 pods per job"),
    "a 10^999999 quantity": (pod("q", resources="{limits: {cpu: 1e999999}}"),
                             "spec.containers[0].resources.limits.cpu:", "no more than 9223372036854775807"),
    "an event larger than max_payload": (
        # job annotations are every task's defaults: 4 × 250 KB in one JobSubmitted
        job(1, tasks=4, annotations="{a: " + "x" * 250_000 + "}"),
        "metadata.name: Too long: its JobSubmitted event would be", "a log message holds at most"),
}  # fmt: skip


async def test_each_hostile_object_is_rejected_naming_its_limit_and_service_goes_on(
    jetstream_log: JetStreamLog, admission: ServiceProcess
) -> None:
    for i, (what, (manifest, starts, names_limit)) in enumerate(HOSTILE.items()):
        reasons = only_reasons(await apply(jetstream_log, manifest))
        assert any(r.startswith(starts) and names_limit in r for r in reasons), (what, reasons)
        assert (await apply(jetstream_log, QUEUE % i)).results[0].outcome == ACCEPTED, what
    assert admission.proc is not None and admission.proc.poll() is None


async def test_a_reply_too_large_for_one_message_still_arrives(
    jetstream_log: JetStreamLog, admission: ServiceProcess
) -> None:
    # 4,000 rejected pods: ~100 bytes of manifest each, ~900 bytes of reasons each
    manifest = "\n---\n".join(pod(f"P{i}") for i in range(4000))
    reply = await apply(jetstream_log, manifest)
    assert reply.error.startswith("the reply for 4000 objects (4000 rejected) is larger") or (
        len(reply.results) == 4000 and all(r.outcome == REJECTED for r in reply.results)
    ), reply.error
    assert (await apply(jetstream_log, QUEUE % 99)).results[0].outcome == ACCEPTED
