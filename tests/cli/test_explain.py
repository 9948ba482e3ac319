"""`tessera explain` (issue 16 items 1–2): the reasons the scheduler records in its decisions,
told in words from the log alone — for the cases the issue lists (a queue at its capability, a
gang larger than the cluster, a gang larger than what is free, NVIDIA switched off, the
proportion enqueue gate, cards too full on every node) and for a placed pod (each plugin's part
of the score, the cards and why, the runners-up). Logs come from `tessera simulate --events`
(the same cores the services run, in-process); one test reads the live NATS of `tessera up`."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from contracts.registry import default_registry
from services.cli.main import main
from services.core.freshwords import words_now
from services.core.logpoint import cut
from services.core.simulate.jsonl import read_jsonl
from services.core.simulate.report import build_report
from tests.cli.test_up_down import tessera
from tests.processes import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "explain"
EXAMPLES = ROOT / "examples"


def simulate(tmp_path: Path, inventory: Path, workload: Path, conf: Path | None = None,
             cycles: int | None = None) -> Path:  # fmt: skip
    log = tmp_path / f"{workload.stem}.jsonl"
    args = ["simulate", "--inventory", str(inventory), "--workload", str(workload),
            "--events", str(log), "-o", "json"]  # fmt: skip
    if conf is not None:
        args += ["--scheduler-conf", str(conf)]
    if cycles is not None:
        args += ["--cycles", str(cycles)]
    assert main(args) == 0
    return log


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["explain", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def waits(text: str) -> str:
    """The 'Why it waits' part of the text (the timeline above it says the same words)."""
    assert "Why it waits" in text, text
    return text[text.index("Why it waits"):]


def test_a_gang_larger_than_the_cluster_with_busy_cards_is_told_what_it_needs_free(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """8 cards, 3 busy, a gang of 12: "add 4 cards" would leave it 3 short (the newcomer's
    review: 16 cards, 6 busy, minAvailable 20 was told "add 4")."""
    busy = "\n---\n".join(f"""
apiVersion: v1
kind: Pod
metadata: {{name: busy-{i}, annotations: {{tessera.io/duration: "3600"}}}}
spec: {{containers: [{{name: c, image: x, resources: {{limits: {{huawei.com/Ascend910B3: "1"}}}}}}]}}""" for i in range(3))
    workload = tmp_path / "busy-gang.yaml"
    workload.write_text(busy + "\n---\n" + (FIXTURES / "gang-12.yaml").read_text())
    log = tmp_path / "busy.jsonl"  # cut at 60 s, while the busy pods run (they end at 3600 s)
    assert main(["simulate", "--inventory", str(FIXTURES / "one-node.yaml"), "--workload", str(workload),
                 "--events", str(log), "--until", "60", "-o", "json"]) == 0  # fmt: skip
    code, out, _ = explain(capsys, "job", "big-train", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "\n  gang needs 12 whole Ascend910B3 cards, the cluster has 8   [gang]\n" in text, text
    assert ("add 7 Ascend910B3 cards to the cluster (or 4 once its 3 busy ones are free), or lower the job's "
            "minAvailable (now 12)") in text, text


def test_queue_at_its_capability(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "train-queue.yaml",
                   FIXTURES / "no-enqueue.conf", cycles=1)  # fmt: skip
    code, out, _ = explain(capsys, "pod", "second", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "queue train-queue: Ascend910B3 1 requested, capability 8, allocated 8 (capacity)" in text
    assert "raise queue train-queue's capability of Ascend910B3 to 9" in text


def test_gang_larger_than_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16: reported as CardInsufficientMemory on a node with free cards; the gang itself
    is the reason, with or without the enqueue action. Refused at enqueue, the gang's trial
    placement (issue 14) adds the node as its first 8 pods left it: no card free."""
    for conf in (None, FIXTURES / "no-enqueue.conf"):
        log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "gang-12.yaml", conf)
        code, out, _ = explain(capsys, "job", "big-train", "--from", str(log))
        assert code == 0
        text = waits(out)
        assert text.splitlines()[1] == "  gang needs 12 whole Ascend910B3 cards, the cluster has 8   [gang]", text
        assert "add 4 Ascend910B3 cards to the cluster, or lower the job's minAvailable (now 12)" in text
        assert "8 of 8 free" not in text
        if conf is None:
            assert "  per node (1 of 1):\n    1 × Ascend910B3: asked 1 whole card, 0 of 8 free" in text, text
            assert "4/12 tasks in gang unschedulable: 0/1 nodes are unavailable" in text
        else:
            assert "CardInsufficientMemory" not in text


def test_gang_larger_than_what_is_free(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The gang's own discarded attempt filled the queue in-session; the answer is the cards
    other pods hold, and --at shows it as of then, after which the gang ran."""
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "holder-and-six.yaml",
                   FIXTURES / "no-enqueue.conf", cycles=3)  # fmt: skip
    code, out, _ = explain(capsys, "job", "six", "--from", str(log), "--at", "1s")
    assert code == 0
    text = waits(out)
    assert "gang needs 6 whole Ascend910B3 cards, 5 of the cluster's 8 are free" in text
    assert "free 1 Ascend910B3 card (their pods finish or are evicted)" in text
    code, now, _ = explain(capsys, "job", "six", "--from", str(log))
    assert code == 0 and "Why it waits" not in now and "Running" in now.splitlines()[0]
    assert "Why six-w-0 went to node-a" in now


def test_overcommits_fix_is_whole_cards_and_the_trial_says_what_filled_the_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """A gang of 8 beside a holder of 2 on 8 cards: overcommit's idle room is 8 × 1.2 − 2 =
    7.6, and the fix names whole cards to free (it said "free 0.4 Ascend910B3"), as many as
    the gang needs placed, not only past the gate (freeing 1 admits it, 7 free hold 7 of 8)."""
    workload = tmp_path / "holder-two-gang-eight.yaml"
    holder, six = (FIXTURES / "holder-and-six.yaml").read_text().split("---\n")
    workload.write_text(holder.replace("minAvailable: 3", "minAvailable: 2").replace("replicas: 3", "replicas: 2")
                        + "---\n" + six.replace("six}", "eight}").replace("6", "8"))  # fmt: skip
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", workload, cycles=3)
    code, out, _ = explain(capsys, "job", "eight", "--from", str(log), "--at", "1s")
    assert code == 0
    text = waits(out)
    # (the amounts of now, the holder running: the session said "inqueue 2 … idle room 9.6")
    assert "minResources 8 + inqueue 0 exceeds the idle room 7.6" in text, text
    assert "free 2 Ascend910B3" in text and "0.4" not in text, text
    # the gang's trial filled the node with its own first 6 pods: said so, not "0 of 8 free"
    # alone about a node with 6 free, and the fix counts the 2 pods beyond them
    assert "asked 1 whole card, 0 of 8 free once the gang's first 6 pods are placed [" in text, text
    assert "and room for 2 more of the gang's pods beyond those 6" in text, text


def test_nvidia_switched_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With deviceshare's NVIDIA switch off a GPU pod is not refused outright: its count is
    fitted as whole cards against the nodes' GPUs (as Volcano fits it against allocatable), so
    the words say what is missing, here any NVIDIA card at all."""
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "cuda.yaml", FIXTURES / "no-enqueue.conf")
    code, out, _ = explain(capsys, "pod", "cuda-pod", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "no node in the cluster has an NVIDIA card (it has Ascend910B3)" in text, text
    assert "devices are off" not in text


def test_proportion_enqueue_names_resource_and_amounts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Default configuration (enqueue + proportion): the PodGroup waits at enqueue."""
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "train-queue.yaml", cycles=1)
    code, out, _ = explain(capsys, "pod", "second", "--from", str(log))
    assert code == 0
    text = waits(out)
    # (the amounts of now: `first` runs, so allocated 8 — the session said "inqueue 8")
    assert "queue train-queue: Ascend910B3 minResources 1 + allocated 8 + inqueue 0 exceeds its capability 8 (proportion enqueue)" in text
    assert "raise queue train-queue's capability of Ascend910B3 to 9" in text
    assert "queue resource quota insufficient or cluster overused" in text  # Volcano's words too


def test_cards_too_full_on_every_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = simulate(tmp_path, FIXTURES / "soft-node.yaml", FIXTURES / "soft-slices.yaml", FIXTURES / "no-enqueue.conf")
    code, out, _ = explain(capsys, "pod", "slice-3", "--from", str(log), "-o", "json")
    assert code == 0
    w = json.loads(out)["waiting"]
    assert w["groups"] == [{
        "nodes": 1, "plugin": "deviceshare", "examples": ["node-s"],
        "reason": "Ascend910B3: asked 1 card with 40000 MB and 30% cores, 0 of 2 have that free "
                  "(most free: 25536 MB) [2/2 CardInsufficientMemory]",
    }]  # fmt: skip
    assert w["unblock"] == "free 14464 MB on one more Ascend910B3 card of node-s"
    code, text, _ = explain(capsys, "pod", "slice-3", "--from", str(log))
    assert code == 0 and "0/1 nodes are available:" in text and "1 × Ascend910B3: asked 1 card with 40000 MB" in text


def test_placed_pod_says_why_this_node_and_these_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = simulate(tmp_path, EXAMPLES / "inventory.yaml", EXAMPLES / "article.yaml")
    code, out, _ = explain(capsys, "pod", "npu-train-job-worker-0", "--from", str(log), "-o", "json")
    assert code == 0
    placed = json.loads(out)["placed"]
    assert placed["node"] == "node-a" and set(placed["parts"]) == {"nodeorder", "deviceshare"}
    assert sum(placed["parts"].values()) == pytest.approx(placed["score"]) and placed["score"] > 0
    # node-b: 300, and 1000 for the untouched HCCS ring its one card would open there (RING_STEP ×
    # ring fit 1 × ScheduleWeight 10); on node-a it joins a ring an earlier pod opened (fit 3)
    assert placed["runners_up"] == [{"node": "node-b", "score": 1300.0}] and placed["feasible"] == 2
    assert placed["cards_why"].startswith("card policy spread (deviceshare.SchedulePolicy): emptiest card first")
    code, text, _ = explain(capsys, "pod", "npu-train-job-worker-0", "--from", str(log))
    assert code == 0
    assert "Why npu-train-job-worker-0 went to node-a (session 1" in text
    assert "node-b  score 1300 (" in text and "less)" in text
    assert "Timeline:" in text and "submitted" in text and "committed" in text and "started" in text


def test_a_pod_whose_card_policy_hami_ignores_is_placed_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`binpak` left the pod Pending for ever; HAMi ignores it and uses the configured policy."""
    workload = tmp_path / "binpak.yaml"
    workload.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: typo, annotations: "
        "{hami.io/gpu-scheduler-policy: binpak}}\nspec:\n  containers:\n"
        '    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "4000"}}}\n'
    )
    inventory = tmp_path / "gpu.yaml"
    inventory.write_text("nodes:\n  - name: g1\n    cpu: 16\n    memory: 64Gi\n    devices:\n"
                         "      - {type: NVIDIA-A100, count: 2, memory: 40960}\n")  # fmt: skip
    conf = tmp_path / "vgpu.conf"
    conf.write_text('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n'
                    "  - name: deviceshare\n    arguments: {deviceshare.VGPUEnable: true}\n")  # fmt: skip
    log = simulate(tmp_path, inventory, workload, conf)
    code, out, _ = explain(capsys, "pod", "typo", "--from", str(log), "-o", "json")
    assert code == 0
    why = json.loads(out)["placed"]["cards_why"]
    assert why.startswith("card policy spread (deviceshare.SchedulePolicy): emptiest card first")
    assert why.endswith("; pod annotation hami.io/gpu-scheduler-policy='binpak' ignored (unknown "
                        "policy 'binpak' (known: binpack, mutex, numa, spread, topology-aware; "
                        "lower case)): the configured spread is used")  # fmt: skip


def test_a_gpu_pod_without_the_configured_runtime_class_waits_saying_what_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HAMi's webhook sets the device config's runtimeClassName on a GPU pod that names none (and
    keeps one the pod names); bound without it, the pod ran under runc without its GPUs."""
    pods = "".join(
        f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{extra}  containers:\n"
        '    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "4000"}}}\n'
        for name, extra in (("bare", ""), ("own", "  runtimeClassName: kata-nvidia\n")))  # fmt: skip
    workload = tmp_path / "rc.yaml"
    workload.write_text(pods)
    inventory = tmp_path / "gpu.yaml"
    inventory.write_text("nodes:\n  - name: g1\n    cpu: 16\n    memory: 64Gi\n    devices:\n"
                         "      - {type: NVIDIA-A100, count: 2, memory: 40960}\n")  # fmt: skip
    conf = tmp_path / "vgpu.conf"
    conf.write_text('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n'
                    "  - name: deviceshare\n    arguments: {deviceshare.VGPUEnable: true}\n")  # fmt: skip
    devices = tmp_path / "device-config.yaml"
    devices.write_text("nvidia:\n  runtimeClassName: nvidia\n")
    log = tmp_path / "rc.jsonl"
    assert main(["simulate", "--inventory", str(inventory), "--workload", str(workload), "--events",
                 str(log), "-o", "json", "--scheduler-conf", str(conf), "--device-config", str(devices)]) == 0  # fmt: skip
    capsys.readouterr()
    code, text, _ = explain(capsys, "pod", "bare", "--from", str(log))
    assert code == 0
    assert ("set spec.runtimeClassName: nvidia: HAMi's webhook would have set it (device-config "
            "runtimeClassName); Tessera has no webhook and a created pod's spec cannot change") in waits(text)
    code, out, _ = explain(capsys, "pod", "own", "--from", str(log), "-o", "json")
    assert code == 0 and json.loads(out)["placed"]["node"] == "g1"


def test_unknown_object_and_bad_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "cuda.yaml")
    code, _, err = explain(capsys, "pod", "nope", "--from", str(log))
    assert code == 1 and "pod 'nope' not found in namespace default in Tessera's log" in err
    assert "kubectl describe pod" in err  # where a refused pod's reason is (it never enters the log)
    code, _, err = explain(capsys, "pod", "cuda-pod", "--from", str(log), "--at", "yesterday")
    assert code == 2 and "--at 'yesterday'" in err
    code, _, err = explain(capsys, "pod", "cuda-pod", "--from", str(log), "--at", "3")
    assert code == 1 and "as of 3" in err  # the pod was submitted later in the log


def test_events_prints_the_real_min_available(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """msgspec leaves minAvailable out of the body at its default (1); `events` read 0."""
    from services.cli.events import event_line
    from services.core.simulate.jsonl import read_jsonl

    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "cuda.yaml")
    lines = [event_line(m) for m in read_jsonl(log) if m.headers.get("Tessera-Type") == "JobSubmitted"]
    assert lines and "minAvailable=1 " in lines[0], lines


def test_explain_reads_the_live_log(tmp_path: Path) -> None:
    """The five services over NATS: a pod too big for the cluster and a placed one."""
    state = tmp_path / "state"
    up = tessera("up", "--detach", "--state-dir", str(state), "--inventory", str(EXAMPLES / "inventory.yaml"))
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        manifest = tmp_path / "pods.yaml"
        manifest.write_text(POD_TOO_BIG + "---\n" + POD_SLICE)
        applied = tessera("apply", "-f", str(manifest), "--state-dir", str(state))
        assert applied.returncode == 0, applied.stdout + applied.stderr
        for _ in range(300):  # until the scheduler has decided on both
            big = tessera("explain", "pod", "too-big", "-o", "json", "--state-dir", str(state))
            small = tessera("explain", "pod", "small", "-o", "json", "--state-dir", str(state))
            if (big.returncode == small.returncode == 0 and json.loads(big.stdout).get("waiting", {}).get("groups") is not None
                    and json.loads(big.stdout)["waiting"].get("seq") and "placed" in json.loads(small.stdout)):
                break
        waiting = json.loads(big.stdout)["waiting"]
        assert waiting["why"] == ("cluster: cpu minResources 500, the cluster has 384 (460.8 with "
                                  "overcommit's overcommit-factor 1.2)"), waiting
        assert waiting["plugin"] == "overcommit" and waiting["session"] > 0
        assert waiting["unblock"] == "add 33 cpu to the cluster, or ask for less"
        assert waiting["time"].endswith("Z") and waiting["time"][:4].isdigit()  # the store's time
        placed = json.loads(small.stdout)["placed"]
        assert placed["score"] > 0 and placed["parts"] and placed["cards"]
        text = tessera("explain", "pod", "small", "--state-dir", str(state)).stdout
        assert "Why small went to" in text and "Not the runners-up:" in text
    finally:
        tessera("down", "--state-dir", str(state))


POD_TOO_BIG = """
apiVersion: v1
kind: Pod
metadata: {name: too-big}
spec:
  containers:
    - {name: c, image: x, resources: {requests: {cpu: "500"}}}
"""
POD_SLICE = """
apiVersion: v1
kind: Pod
metadata: {name: small}
spec:
  containers:
    - {name: c, image: x, resources: {limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "8192"}}}
"""


def test_advice_never_asks_to_free_more_than_a_card_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26 item 3: 50000 MB on an A100-40G node and a busy H100-80G node. Freeing the
    A100 cannot help (it holds 40960 MB): explain says so for that node, and the advice is
    about the H100 — before, it read "free 9040 MB on one more NVIDIA card of gpu-a"."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes:\n"
                   "- {name: gpu-a, cpu: 16, memory: 64Gi, devices: [{type: NVIDIA-A100, count: 1, memory: 40960}]}\n"
                   "- {name: gpu-h, cpu: 16, memory: 64Gi, devices: [{type: NVIDIA-H100, count: 1, memory: 81920}]}\n")  # fmt: skip
    work = tmp_path / "w.yaml"
    pod = ("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {n}}}\nspec:\n  containers: [{{name: c, image: busybox, "
           "resources: {{limits: {{nvidia.com/gpu: '1', nvidia.com/gpumem: '{m}'}}}}}}]\n")  # fmt: skip
    work.write_text(pod.format(n="holder", m=81920) + pod.format(n="big", m=50000))
    conf = tmp_path / "vgpu.conf"
    conf.write_text((FIXTURES / "no-enqueue.conf").read_text() + "      deviceshare.VGPUEnable: true\n")
    log = simulate(tmp_path, inv, work, conf)
    code, out, _ = explain(capsys, "pod", "big", "--from", str(log), "-o", "json")
    assert code == 0
    w = json.loads(out)["waiting"]
    by_node = {g["examples"][0]: g["reason"] for g in w["groups"]}
    assert "more than any card here holds (40960 MB)" in by_node["gpu-a"], by_node
    assert "gpu-a" not in w["unblock"] and "gpu-h" in w["unblock"], w["unblock"]


def _append(log: Path, subject: str, event: object, **headers: str) -> None:
    """One event written after the simulation, as a service would append it."""
    from contracts.registry import default_registry

    lines = log.read_text().splitlines()
    seq = json.loads(lines[-1])["seq"] + 1
    reg = default_registry()
    data = json.loads(reg.encode(event))  # type: ignore[arg-type]
    lines.append(json.dumps({"seq": seq, "subject": subject, "data": data,
                             "headers": {"Tessera-Type": type(event).type_name(), **headers}}))  # type: ignore[attr-defined]  # fmt: skip
    log.write_text("\n".join(lines) + "\n")


def test_explain_speaks_of_aicores_the_current_placement_and_not_of_waiting_once_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26 item 4: a whole 910B3 holds 20 of 20 aiCores (it said "20% cores"); after a
    restart placed the job again, explain job speaks of the last placement, not the first;
    a Terminated job has no "Why it waits"."""
    from contracts.events import JobPhaseChanged, PlacementCommitted, PlacementProposed

    log = simulate(tmp_path, EXAMPLES / "inventory.yaml", EXAMPLES / "article.yaml")
    code, text, _ = explain(capsys, "pod", "npu-train-job-worker-0", "--from", str(log))
    assert code == 0 and "65536 MB, 20/20 aiCores" in text, text
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    subject = next(r["subject"] for r in rows if r["subject"].endswith(".job.default.npu-train-job"))
    first = next(r for r in rows if r["subject"] == subject and r["headers"]["Tessera-Type"] == "PlacementProposed")
    from contracts.registry import default_registry

    proposal = default_registry().decode("PlacementProposed", json.dumps(first["data"]).encode())
    assert isinstance(proposal, PlacementProposed)
    moved = tuple(msgspec.structs.replace(p, node="node-b") for p in proposal.placements)
    again = msgspec.structs.replace(proposal, placements=moved)
    _append(log, subject, again)
    seq = json.loads(log.read_text().splitlines()[-1])["seq"]
    _append(log, subject, PlacementCommitted(namespace="default", name="npu-train-job", proposal_seq=seq,
                                             placements=moved))  # fmt: skip
    code, out, _ = explain(capsys, "job", "npu-train-job", "--from", str(log), "-o", "json")
    assert code == 0 and json.loads(out)["placed"]["node"] == "node-b"

    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "gang-12.yaml")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    subject = next(r["subject"] for r in rows if r["subject"].endswith(".job.default.big-train"))
    _append(log, subject, JobPhaseChanged(namespace="default", name="big-train", phase="Terminated"))
    code, out, _ = explain(capsys, "job", "big-train", "--from", str(log))
    assert code == 0 and "Terminated" in out and "Why it waits" not in out and "What would unblock" not in out


def test_replay_verify_does_not_call_the_queue_services_decisions_a_schedulers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26 item 4: the queue service writes EvictionRequested (a restart) and Running
    phases; `replay --verify` noted them as "written by a scheduler before sessions were
    recorded". Only a scheduler's decision without a session record is noted so."""
    from contracts.events import EvictionRequested, JobPhaseChanged

    log = simulate(tmp_path, EXAMPLES / "inventory.yaml", EXAMPLES / "article.yaml")
    subject = next(json.loads(line)["subject"] for line in log.read_text().splitlines()
                   if json.loads(line)["subject"].endswith(".job.default.npu-train-job"))  # fmt: skip
    _append(log, subject, EvictionRequested(namespace="default", name="npu-train-job", task="npu-train-job-worker-0",
                                            reason="job restart"), **{"Nats-Msg-Id": "queue:cmd-restart#0"})  # fmt: skip
    capsys.readouterr()
    assert main(["replay", "--verify", "--from", str(log)]) == 0
    assert "before sessions were recorded" not in capsys.readouterr().out
    _append(log, subject, JobPhaseChanged(namespace="default", name="npu-train-job", phase="Inqueue"),
            **{"Nats-Msg-Id": "sched:3#9"})  # fmt: skip
    assert main(["replay", "--verify", "--from", str(log)]) == 0
    assert "note: 1 decisions carry no session record" in capsys.readouterr().out


REASONS_INVENTORY = "nodes: [{name: node-a, cpu: 64, memory: 256Gi, devices: [{type: Ascend910B3, count: 4}]}]\n"


def _pod_yaml(name: str, limits: str, annotations: str = "") -> str:
    meta = f"{{name: {name}" + (f", annotations: {{{annotations}}}" if annotations else "") + "}"
    return (f"---\napiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec:\n  containers: [{{name: c, image: x, "
            f"resources: {{limits: {{{limits}}}}}}}]\n")  # fmt: skip


def test_reasons_name_what_keeps_a_pod_not_the_queue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26 item 5: an NVIDIA pod on an Ascend-only cluster and a 5-card pod on 4 cards were
    reported as "queue resource quota insufficient or cluster overused" (their queue has no
    limit); a default queue without capability "exceeds its capability 4" (that is the
    cluster); a use-uuid naming a missing card had "nothing the log can tell" to unblock it."""
    inv, work = tmp_path / "inv.yaml", tmp_path / "w.yaml"
    inv.write_text(REASONS_INVENTORY)
    work.write_text(_pod_yaml("cuda", 'nvidia.com/gpu: "1"') + _pod_yaml("five", 'huawei.com/Ascend910B3: "5"')
                    + _pod_yaml("pinned", 'huawei.com/Ascend910B3: "1"', 'hami.io/use-Ascend910B3-uuid: no-such-card')
                    + _pod_yaml("three-a", 'huawei.com/Ascend910B3: "3"') + _pod_yaml("three-b", 'huawei.com/Ascend910B3: "3"'))  # fmt: skip
    report, conf = tmp_path / "r.json", tmp_path / "proportion.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
                    "- plugins:\n  - name: proportion\n  - name: predicates\n  - name: nodeorder\n"
                    "  - name: deviceshare\n    arguments:\n      deviceshare.AscendHAMiVNPUEnable: true\n")  # fmt: skip
    assert main(["simulate", "--inventory", str(inv), "--workload", str(work), "--report", str(report),
                 "--events", str(tmp_path / "l.jsonl"), "--cycles", "1", "--scheduler-conf", str(conf),
                 "-o", "json"]) == 0  # fmt: skip
    capsys.readouterr()
    pods = {p["name"]: p for p in json.loads(report.read_text())["pods"]}
    for name in ("cuda", "five"):
        assert pods[name]["phase"] == "Pending" and "queue resource quota" not in pods[name]["reason"], pods[name]
    code, out, _ = explain(capsys, "pod", "pinned", "--from", str(tmp_path / "l.jsonl"))
    assert code == 0
    assert "hami.io/use-Ascend910B3-uuid names no-such-card: no card of the cluster has that uuid" in out
    assert "correct hami.io/use-Ascend910B3-uuid to cards the cluster has (e.g. node-a-Ascend910B3-0" in out
    waiting = [n for n in ("three-a", "three-b") if pods[n]["phase"] == "Pending"]
    assert len(waiting) == 1
    code, out, _ = explain(capsys, "pod", waiting[0], "--from", str(tmp_path / "l.jsonl"))
    assert "exceeds its capability" not in out and "exceeds the 4 cards the cluster has for it" in out, out


def test_explain_pg_takes_the_names_get_pg_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`get pg` lists Volcano's names (`<job>-<uid>`, `podgroup-<pod uid>`): explain takes them."""
    from services.cli import kubeobjects as ko
    from services.core.simulate.jsonl import read_jsonl
    from services.core.simulate.report import build_report

    log = simulate(tmp_path, EXAMPLES / "inventory.yaml", EXAMPLES / "article.yaml")
    messages = read_jsonl(log)
    cat = ko.catalog(messages)
    names = {j["name"]: ko.podgroup_name(cat, j) for j in build_report(messages)["jobs"]}
    for job in ("npu-train-job", "npu-share-test"):
        assert names[job] != job
        code, out, _ = explain(capsys, "pg", names[job], "--from", str(log), "-o", "json")
        assert code == 0 and json.loads(out)["job"] == job


def test_the_whole_logs_listing_names_each_events_object(tmp_path: Path) -> None:
    """`tessera events` without `--job` listed `#154 JobDeleted` and nothing else: which job? Each
    line of the whole log names its object; one job's history does not repeat its name."""
    from contracts.subjects import Subjects
    from services.cli.events import about, event_line
    from services.core.simulate.jsonl import read_jsonl

    messages = read_jsonl(simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "cuda.yaml"))
    subjects = Subjects("tessera")
    submitted = next(m for m in messages if m.headers.get("Tessera-Type") == "JobSubmitted")
    _, (ns, name) = subjects.parse(submitted.subject)
    assert about(subjects, submitted) == f"job {ns}/{name}"
    assert f" job {ns}/{name} " in event_line(submitted, about(subjects, submitted))
    assert f"{ns}/{name}" not in event_line(submitted)  # (its fields name the queue, not the job)
    card = next(m for m in messages if m.headers.get("Tessera-Type") == "CardRegistered")
    assert about(subjects, card).startswith("card ") and about(subjects, card).count("/") == 1


def test_a_gang_short_of_free_cards_is_shown_where_the_free_ones_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Admitted, then short of free whole cards: the nodes' words were those of the session's
    discarded gang attempt ("8/8 CardInsufficientMemory" on every node, its own first pods
    having taken the free cards) under "11 of the cluster's 16 are free" — a contradiction to
    read. The nodes are now shown as the session left them."""
    workload = tmp_path / "both.yaml"
    workload.write_text((EXAMPLES / "article.yaml").read_text() + "\n---\n" + (FIXTURES / "gang-12.yaml").read_text())
    log = simulate(tmp_path, EXAMPLES / "inventory.yaml", workload)
    code, out, _ = explain(capsys, "job", "big-train", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "of the cluster's 16 are free" in text
    assert "per node (2 of 2):" in text and "one pod fits here now" in text
    assert "node-a: 8/8" not in text  # (the discarded attempt's words, no longer the nodes')


def test_a_pod_asking_more_cards_than_any_node_has_is_not_told_to_free_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nine whole cards on nodes of eight: the advice was "free 1 Ascend910B3 card on node-a",
    a node with all eight free — no freeing can help; another node or fewer cards can."""
    workload = tmp_path / "nine.yaml"
    workload.write_text("""apiVersion: v1
kind: Pod
metadata: {name: nine}
spec:
  schedulerName: volcano
  containers:
    - name: c
      image: x
      resources: {limits: {huawei.com/Ascend910B3: "9"}}
""")
    log = simulate(tmp_path, EXAMPLES / "inventory.yaml", workload)
    code, out, _ = explain(capsys, "pod", "nine", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "asked 9 cards, more than the node has (8)" in text
    assert "free 1" not in text
    assert "ask for at most 8 Ascend910B3 cards per pod, or add a node with 9" in text


def test_a_gang_larger_than_its_queues_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each pod fits the share, the gang does not: said of the gang at once (10 of a share of
    8, the queue holding nothing), not "1 requested, allocated 8" with "must deserve 9" —
    the gang's own discarded attempt taken for the queue's use, and a fix too small."""
    log = simulate(tmp_path, FIXTURES / "two-nodes.yaml", FIXTURES / "gang-over-share.yaml",
                   FIXTURES / "proportion.conf", cycles=2)  # fmt: skip
    code, out, _ = explain(capsys, "job", "a-big", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "queue qa: the gang's 10 pods need 10 Ascend910B3 at once, deserved 8, allocated 0" in text, text
    assert "queue qa must deserve 10 Ascend910B3" in text and "lower the job's minAvailable (now 10)" in text, text
    assert "allocated 8" not in text and "deserve 9" not in text, text


def test_the_pods_reason_in_the_report_is_the_clusters_condition(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """`get pods`, `describe pod` and `get po -o yaml` read the report: a pod held by its queue's
    capability said "queue resource quota insufficient" there (the scheduler's reason) while
    explain and the pod's condition on a cluster named the capability."""
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "train-queue.yaml",
                   FIXTURES / "no-enqueue.conf", cycles=1)  # fmt: skip
    (second,) = [p for p in build_report(read_jsonl(log))["pods"] if p["name"] == "second"]
    assert "capability 8" in second["reason"] and "quota insufficient" not in second["reason"], second
    code, out, _ = explain(capsys, "pod", "second", "--from", str(log))
    assert code == 0 and "capability 8" in waits(out)


def test_a_node_selector_no_node_has(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The selector and the nodes' label are in the log: named, with the fix — "nothing the log
    can tell" was all a typo in a nodeSelector got."""
    log = simulate(tmp_path, FIXTURES / "two-nodes.yaml", FIXTURES / "selector-typo.yaml", cycles=2)
    code, out, _ = explain(capsys, "pod", "picky", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "2 × node(s) didn't match Pod's node affinity/selector: nodeSelector accelerator=huawei-Ascend910B3" in text
    assert ("label a node accelerator=huawei-Ascend910B3 (kubectl label node node-a accelerator=huawei-Ascend910B3;"
            " it has no accelerator label), or change the pod's nodeSelector") in text, text  # fmt: skip


def test_a_waiting_jobs_amounts_are_those_of_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The log keeps a rule's first words (a verdict is appended again only when its rule
    changes): `six` was told "5 of the cluster's 8 are free, free 1" at 0 s; `late` took 3 more
    at 10 s. explain says the amounts of now, and that they are."""
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "holder-six-late.yaml", FIXTURES / "no-enqueue.conf")
    code, out, _ = explain(capsys, "job", "six", "--from", str(log), "--at", "50s")
    assert code == 0
    text = waits(out)
    assert "gang needs 6 whole Ascend910B3 cards, 2 of the cluster's 8 are free" in text, text
    assert "free 4 Ascend910B3 cards (their pods finish or are evicted)" in text, text
    assert "(amounts as of log #" in text
    code, then, _ = explain(capsys, "job", "six", "--from", str(log), "--at", "5s")  # before late came
    assert code == 0 and "5 of the cluster's 8 are free" in waits(then)


def test_a_job_a_session_would_place_now_says_the_scheduler_has_not_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The log cut right after `holder`'s pods ended (its cards free, no session since): `six`
    would be placed by a session now — said, as what a scheduler that is down or standing by
    looks like from the log."""
    log = simulate(tmp_path, FIXTURES / "one-node.yaml", FIXTURES / "holder-and-six.yaml",
                   FIXTURES / "no-enqueue.conf", cycles=3)  # fmt: skip
    messages = read_jsonl(log)
    ended = [m.seq for m in messages if m.headers.get("Tessera-Type") == "TaskFinished"
             and b"holder" in m.data]  # fmt: skip
    assert len(ended) == 3
    code, out, _ = explain(capsys, "job", "six", "--from", str(log), "--at", str(ended[-1]))
    assert code == 0
    assert f"(a session over the log as it stands, #{ended[-1]}, would place it now" in waits(out), out


def test_fresh_amounts_follow_the_schedulers_own_rule_for_logging_a_verdict_again(tmp_path: Path) -> None:
    """A verdict the scheduler would not log again (`by_words`: the trial's counts moved, its
    kinds did not) still gets today's amounts; one naming another rule does not."""
    workload = tmp_path / "holder-two-gang-eight.yaml"
    holder, six = (FIXTURES / "holder-and-six.yaml").read_text().split("---\n")
    workload.write_text(holder.replace("minAvailable: 3", "minAvailable: 2").replace("replicas: 3", "replicas: 2")
                        + "---\n" + six.replace("six}", "eight}").replace("6", "8"))  # fmt: skip
    messages = cut(read_jsonl(simulate(tmp_path, FIXTURES / "one-node.yaml", workload, cycles=3)), "1s")  # still waiting
    reg = default_registry()
    logged = next(reg.decode("JobUnschedulable", m.data) for m in messages
                  if m.headers.get("Tessera-Type") == "JobUnschedulable" and b"eight" in m.data)  # fmt: skip
    assert "2/8 tasks in gang unschedulable" in logged.reason, logged.reason
    # the nodes fell into other groups under the same kinds of reason (another job moved)
    moved = logged.reason.replace("1 8/8 CardInsufficientMemory.", "1 8/8 CardInsufficientMemory, 1 7/8 CardInsufficientMemory.")
    assert moved != logged.reason
    assert words_now(messages, "default", "eight", moved, logged.why).verdict is not None
    other = "queue resource quota insufficient or cluster overused; 2/8 tasks in gang unschedulable: 0/1 nodes are unavailable: 1 Insufficient cpu."
    assert words_now(messages, "default", "eight", other, "cpu: asked 1").verdict is None


def test_a_pod_held_to_a_node_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """matchFields metadata.name: no label makes another node fit, so the fix does not say to
    label one (it did)."""
    log = simulate(tmp_path, FIXTURES / "two-nodes.yaml", FIXTURES / "pinned-by-name.yaml", cycles=2)
    code, out, _ = explain(capsys, "pod", "pinned", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "required node affinity (node name In node-z)" in text, text
    assert "the pod is held to nodes by name (matchFields metadata.name)" in text and "label a node" not in text, text


def test_a_card_mode_the_node_does_not_run_is_named_as_the_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pod asking MIG cards on hami-core A100s read "has no NVIDIA card (it has NVIDIA-A100)"
    (the end-of-session review): the cards are there, in another mode."""
    inventory = tmp_path / "a100.yaml"
    inventory.write_text("nodes:\n  - name: g1\n    cpu: 64\n    memory: 256Gi\n    devices:\n"
                         "      - {type: NVIDIA-A100, count: 2, memory: 40960, mode: hami-core}\n")  # fmt: skip
    workload = tmp_path / "mig.yaml"
    workload.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: m, annotations: {nvidia.com/vgpu-mode: mig}}\n"
                        "spec:\n  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1, "
                        "nvidia.com/gpumem: 1000}}}]\n")  # fmt: skip
    log = simulate(tmp_path, inventory, workload)
    code, out, _ = explain(capsys, "pod", "m", "--from", str(log))
    assert code == 0
    text = waits(out)
    assert "NVIDIA: the pod asks cards in mig mode, the node's run hami-core [2/2 CardTypeMismatch]" in text, text
    # not "add a node whose cards run mig": Tessera keeps MIG cards off (devices/mig.py)
    assert ("drop the pod's nvidia.com/vgpu-mode: mig (MIG mode: Tessera does not carve MIG instances yet, "
            "on any node)") in text, text
    assert "has no NVIDIA card" not in text
