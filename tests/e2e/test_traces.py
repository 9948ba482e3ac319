"""One trace per job, through the real OTLP exporter: `tessera apply` of one pod, then the five
service processes, each exporting HTTP/protobuf to a receiver this test runs on loopback. The
job's trace (the id its `JobSubmitted` carries in the log) holds a span of every service, rooted
at its admission and linked with the command's, and the scheduler's decision with node, cards
and score; span names are subject templates. With `up --trace-exporter console` the spans go into the service logs, with no
`BrokenPipeError` after `up --detach` has gone, and log lines carry trace ids."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from contracts.envelope import TRACEPARENT, TYPE
from services.cli.up import ControlPlane
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.processes import ROOT, wait_until

SERVICES = {"tessera-admission", "tessera-queue", "tessera-scheduler", "tessera-allocator",
            "tessera-nodeagent"}  # fmt: skip
POD = """
apiVersion: v1
kind: Pod
metadata: {name: traced-infer}
spec:
  containers:
    - name: server
      image: ascend-vllm:0.9
      resources: {limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "8192"}}
"""


class Receiver(ThreadingHTTPServer):
    """OTLP/HTTP: POST /v1/traces with an `ExportTraceServiceRequest` protobuf body."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[dict] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest.FromString(body)
        got = []
        for rs in request.resource_spans:
            service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attrs = {a.key: _value(a.value) for a in span.attributes}
                    got.append({"service": service, "name": span.name, "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                                "links": [link.trace_id.hex() for link in span.links], "attributes": attrs})  # fmt: skip
        with self.server.lock:
            self.server.spans.extend(got)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_args: object) -> None:
        pass


def _value(v) -> object:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def otlp_env(receiver: Receiver) -> dict[str, str]:
    return {"TESSERA_TRACE_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100"}  # fmt: skip


def tessera(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, **(env or {})})  # fmt: skip


async def job_trace_id(url: str, job: str) -> str:
    log = await JetStreamLog.connect(url)
    try:
        messages = [m async for m in log.replay(1, log.subjects.job("default", job))]
    finally:
        await log.close()
    (submitted,) = [m for m in messages if m.headers.get(TYPE) == "JobSubmitted"]
    return submitted.headers[TRACEPARENT].split("-")[1]


async def test_one_job_one_trace_through_every_service(receiver: Receiver, tmp_path: Path) -> None:
    env = otlp_env(receiver)
    plane = ControlPlane(tmp_path / "state", inventory=str(ROOT / "examples" / "inventory.yaml"), env=env)
    plane.start(report=lambda _line: None)
    try:
        (tmp_path / "pod.yaml").write_text(POD)
        applied = tessera("apply", "-f", str(tmp_path / "pod.yaml"), "--nats", plane.url,
                          "--nats-creds", plane.creds("cli"), env=env)  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        trace_id = await job_trace_id(plane.url, "traced-infer")

        def in_trace() -> list[dict]:
            with receiver.lock:
                return [s for s in receiver.spans if s["trace_id"] == trace_id]

        async def whole() -> bool:
            spans = in_trace()
            return SERVICES <= {s["service"] for s in spans} and any(
                s["attributes"].get("tessera.event.type") == "TaskStarted" for s in spans)

        await wait_until(whole, timeout=60, what="spans of every service in the job's trace, to TaskStarted")
    finally:
        plane.stop()
    spans = in_trace()
    # the job's trace is its own, rooted at its admission, linked with `tessera apply`'s
    (root,) = [s for s in spans if not s["parent"]]
    assert (root["service"], root["name"]) == ("tessera-admission", "admit tessera.ev.job.{ns}.{job}")
    (asked,) = root["links"]
    with receiver.lock:
        assert "tessera-cli" in {s["service"] for s in receiver.spans if s["trace_id"] == asked}
        assert any(trace_id in s["links"] for s in receiver.spans if s["trace_id"] == asked)
    (decision,) = [s for s in spans if s["name"] == "decide tessera.ev.job.{ns}.{job}"]
    facts = decision["attributes"]
    assert facts["tessera.job"] == "default/traced-infer" and facts["tessera.queue"] == "default"
    assert facts["tessera.node"] in ("node-a", "node-b") and facts["tessera.decision"] == "inqueue,placed"
    assert len(facts["tessera.cards"]) == 1 and facts["tessera.cards"][0].startswith(facts["tessera.node"])
    assert isinstance(facts["tessera.score"], float)
    with receiver.lock:
        sessions = [s for s in receiver.spans if s["name"] == "session" and trace_id in s["links"]]
    assert sessions, "the session span links the job's decision"
    # one parent chain: every span of the trace but its root has its parent in the trace
    ids = {s["span_id"] for s in spans}
    assert [s["name"] for s in spans if s["parent"] and s["parent"] not in ids] == []
    assert not [s["name"] for s in spans if "traced-infer" in s["name"] or "node-" in s["name"]]


async def test_console_spans_under_up_detach_and_trace_ids_in_logs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = tessera("up", "--detach", "--trace-exporter", "console", "--inventory",
                 str(ROOT / "examples" / "inventory.yaml"), "--state-dir", str(state))  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        (tmp_path / "pod.yaml").write_text(POD)
        assert tessera("apply", "-f", str(tmp_path / "pod.yaml"), "--state-dir", str(state)).returncode == 0
        logs = state / "logs"

        async def started() -> bool:  # the node agent's handling of its commit is a span in its log
            text = (logs / "nodeagent.log").read_text()
            return '"name": "process tessera.ev.job.{ns}.{job}"' in text and "TaskStarted" in (
                logs / "queue.log").read_text()

        await wait_until(started, timeout=60, what="the node agent's spans in its log")
    finally:
        down = tessera("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
    texts = {p.stem: p.read_text() for p in logs.glob("*.log")}
    assert {"admission", "queue", "scheduler", "allocator", "nodeagent"} <= set(texts)
    for name, text in texts.items():
        assert "BrokenPipeError" not in text and "Traceback" not in text, (name, text[-2000:])
    assert '"name": "decide tessera.ev.job.{ns}.{job}"' in texts["scheduler"]
    for name in ("admission", "queue", "scheduler", "allocator", "nodeagent"):  # spans one line each
        unparsed = [line for line in texts[name].splitlines() if line.strip() and not _parses(line)]
        assert unparsed == [], (name, unparsed[:5])
    records = [json.loads(line) for text in texts.values() for line in text.splitlines()
               if line.startswith('{"ts": ')]  # fmt: skip
    decided = [r for r in records if r["msg"].startswith("default/traced-infer: inqueue,placed on node-")]
    assert len(decided) == 1 and re.fullmatch(r"[0-9a-f]{32}", decided[0]["trace_id"]), decided


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
