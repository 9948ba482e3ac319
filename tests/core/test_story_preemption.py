"""`explain` of a job that preempted: it waits for its victims to stop, and says so.

A preemptor is pipelined onto the room its victims will leave; until they are gone no session
has a verdict on it, and explain said "no scheduling session has decided on it yet" while the
victims' own stories said only "evicted: preempt". The eviction now names the job it makes
room for (`EvictionRequested.for_job`), and both stories tell it."""

from __future__ import annotations

from contracts.events import JobSubmitted, JobUnschedulable
from contracts.registry import default_registry
from contracts.subjects import Subjects
from services.core.story import story
from services.runtime.eventlog.model import StoredMessage
from tests.core.scheduling.scenarios import engine_log, load_table
from tests.core.scheduling.test_wait_advice import helm_conf, job_doc, run, same_queue

ROWS = {sc.name: sc for sc in load_table("preempt_devices")}


def _until_the_victim_stops(sc_name: str) -> list:
    """The scenario's log up to the victim's end (its pod still stopping)."""
    messages = engine_log(ROWS[sc_name])
    reg = default_registry()
    for i, m in enumerate(messages):
        if m.headers.get("Tessera-Type") == "TaskFinished":
            ev = reg.decode("TaskFinished", m.data)
            if ev.task == "victim":
                return messages[:i]
    raise AssertionError("the victim never stopped")


def test_the_preemptor_waits_for_its_victims_and_they_say_for_whom() -> None:
    messages = _until_the_victim_stops("P1")
    preemptor = story(messages, "pod", "preemptor")
    assert preemptor is not None and "waiting" in preemptor, preemptor
    waiting = preemptor["waiting"]
    assert waiting["why"] == ("room is being made for it: 1 pod(s) of other jobs evicted for it (preempt) "
                              "have not stopped yet: default/victim"), waiting  # fmt: skip
    assert waiting["unblock"].startswith("nothing to do: it is placed once they are gone"), waiting
    victim = story(messages, "pod", "victim")
    assert victim is not None
    assert any(t["event"] == "evicted" and t["details"] == "victim: preempt (room for default/high)"
               for t in victim["timeline"]), victim["timeline"]  # fmt: skip


def test_once_the_victims_stopped_the_preemptor_runs_and_waits_for_nothing() -> None:
    messages = engine_log(ROWS["P1"])
    preemptor = story(messages, "pod", "preemptor")
    assert preemptor is not None and "waiting" not in preemptor, preemptor


def _then(messages: list, event: object, session: tuple[str, str], job: str = "high") -> list:
    """`event` appended after `messages` on job `default/<job>`'s subject, as the session
    (based on, number) wrote it."""
    reg = default_registry()
    conf = next(m.headers["Tessera-Conf"] for m in messages if "Tessera-Conf" in m.headers)  # a session's record
    headers = {**reg.envelope(event, msg_id=f"t{len(messages)}").to_headers(),  # type: ignore[arg-type]
               "Tessera-Based-On": session[0], "Tessera-Session": session[1], "Tessera-Conf": conf}  # fmt: skip
    return [*messages, StoredMessage(messages[-1].seq + 1, Subjects().job("default", job), reg.encode(event), headers)]  # type: ignore[arg-type]


def test_a_verdict_of_the_evicting_session_leaves_the_victims_story() -> None:
    """A gang whose replicas beyond minAvailable stay pending gets a verdict in the very session
    that evicted for it (appended after the evictions): the victims are still what it waits for;
    a later incarnation of the job waits for nothing evicted for the old one."""
    messages = _until_the_victim_stops("P1")
    reg = default_registry()
    evicted = next(m for m in messages if m.headers.get("Tessera-Type") == "EvictionRequested")
    based_on, number = evicted.headers["Tessera-Based-On"], evicted.headers["Tessera-Session"]
    assert int(number) > 0
    verdict = JobUnschedulable(namespace="default", name="high", reason="1/2 tasks unschedulable: more replicas")
    same = story(_then(messages, verdict, (based_on, number)), "pod", "preemptor")
    assert same is not None and same["waiting"]["why"].startswith("room is being made for it"), same["waiting"]
    # a later session — or another scheduler process's, whose numbers start again at 1
    later = story(_then(messages, verdict, (str(messages[-1].seq), number)), "pod", "preemptor")
    assert later is not None and later["waiting"]["why"] == verdict.reason, later["waiting"]
    spec = next(reg.decode("JobSubmitted", m.data).spec for m in messages
                if m.headers.get("Tessera-Type") == "JobSubmitted" and reg.decode("JobSubmitted", m.data).spec.name == "high")
    again = story(_then(messages, JobSubmitted(spec=spec), ("0", "0")), "pod", "preemptor")
    assert again is not None and "room is being made" not in again["waiting"]["why"], again["waiting"]


def test_a_pod_stopped_before_it_had_a_node_is_told_without_one() -> None:
    """A pod killed before it was placed finishes on no node: its row read
    "finished w-0 on : exit code 137, evicted" (the newcomer's review)."""
    from contracts.events import TaskFinished, TaskStarted
    from services.core.story import _line

    assert _line(TaskFinished(namespace="default", name="j", task="w-0", node="", exit_code=137,
                              reason="evicted"), "") == ("finished", "w-0: exit code 137, evicted")  # fmt: skip
    assert _line(TaskStarted(namespace="default", name="j", task="w-0", node="n1"), "") == ("started", "w-0 on n1")


# --- what the preemptor's own story says of its victims (a platform lead's review) ---------------


def _preempted() -> list:
    """Two nodes of 8 cards: low-job (priority 10, 16 pods, minAvailable 4) holds them all;
    high-job (priority 1000, a gang of 4) arrives at 60 s in the same queue and preempts 4."""
    return run(helm_conf(), *same_queue(high=1000))


def test_the_preemptors_timeline_names_the_pods_evicted_for_it() -> None:
    messages = _preempted()
    reg = default_registry()
    victims = [f"default/{reg.decode('EvictionRequested', m.data).task}" for m in messages
               if m.headers.get("Tessera-Type") == "EvictionRequested"]  # fmt: skip
    assert len(victims) == 4, victims
    job = story(messages, "job", "high-job")
    assert job is not None
    lines = [t for t in job["timeline"] if t["event"] == "evicted for it"]
    assert len(lines) == 1, job["timeline"]
    assert lines[0]["details"].startswith("4 pod(s) of other jobs (preempt): "), lines[0]
    assert all(v in lines[0]["details"] for v in victims), (lines[0], victims)
    pod = story(messages, "pod", "high-job-w-0")
    assert pod is not None and any(t["event"] == "evicted for job" for t in pod["timeline"]), pod["timeline"]


def test_mid_preemption_the_preemptor_is_told_room_was_made_for_it() -> None:
    """The log cut after the session's first evictions (their pods stopped), before its
    proposal: "no scheduling session has decided on it yet" was the answer."""
    messages = _preempted()
    seqs = [m.seq for m in messages if m.headers.get("Tessera-Type") == "EvictionRequested"]
    cut = [m for m in messages if m.seq <= seqs[1] + 1]  # two evictions and the second's stop
    assert cut[-1].headers.get("Tessera-Type") == "TaskFinished", cut[-1].headers
    job = story(cut, "job", "high-job")
    assert job is not None and "waiting" in job, job
    why = job["waiting"]["why"]
    assert why.startswith("room was made for it: 2 pod(s) of other jobs evicted for it (preempt)"), why
    assert "no scheduling session has decided" not in why and job["waiting"]["unblock"].startswith("nothing to do")


def test_a_running_pods_timeline_says_its_jobs_verdict_is_about_other_pods() -> None:
    """An elastic job (minAvailable 1) of 20 pods on 16 cards: its placed pods' stories show the
    job's "unschedulable" line for the 4 left pending, and say so."""
    messages = run(helm_conf(), job_doc("train", "default", 20, 1), until=10)
    placed = story(messages, "pod", "train-w-0")
    assert placed is not None and placed["phase"] == "Running", placed
    lines = [t for t in placed["timeline"] if t["event"] == "unschedulable"]
    assert lines, placed["timeline"]
    node = placed["node"]
    assert all(t["details"].startswith(f"for the job's pending pods (this pod is on {node}): ") for t in lines), lines
    pending = story(messages, "pod", "train-w-19")
    assert pending is not None and pending["phase"] == "Pending", pending
    assert all(not t["details"].startswith("for the job's pending pods")
               for t in pending["timeline"] if t["event"] == "unschedulable"), pending["timeline"]  # fmt: skip
