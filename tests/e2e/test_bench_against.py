"""`benchmarks.k8s --against`: issue 29's goals are ratios against kube-scheduler on one API
server, measured elsewhere (no kube-apiserver installs here), so the driver must run a foreign
scheduler from its command line on the same server, measure it as it measures Tessera and put
the two side by side. Here the foreign scheduler is `tests.kube.toybinder` on the emulator."""

from __future__ import annotations

import sys

import pytest

from benchmarks import k8s

TOY = f"{sys.executable} -m tests.kube.toybinder --kubeconfig {{kubeconfig}} --name toy"


@pytest.mark.slow
async def test_side_by_side_rows_and_ratios() -> None:
    args = k8s.parse(["--nodes", "4", "--pods", "24", "--shapes", "whole,slice", "--modes", "backlog",
                      "--against", TOY, "--against-name", "toy", "--timeout", "120"])  # fmt: skip
    rows = await k8s.main_async(args)

    # Tessera on both shapes, the other on whole cards only (it cannot cut a card)
    assert [(r["scheduler"], r["shape"]) for r in rows] == [("tessera", "whole"), ("toy", "whole"),
                                                            ("tessera", "slice")]  # fmt: skip
    assert all(r["bound"] == 24 for r in rows)
    tessera, toy = rows[0], rows[1]
    assert set(k8s.SERVICES) <= set(tessera["cpu"]) and "toy" not in tessera["cpu"]
    assert "toy" in toy["cpu"] and not set(k8s.SERVICES) & set(toy["cpu"])  # its process, not ours
    assert toy["reads_per_pod"] == {} and tessera["reads_per_pod"]["admission"] >= 1
    # the window is read at the first binding: never more than the whole run
    assert all(0 <= r["window_cpu"][k] <= r["cpu"][k] for r in rows for k in r["window_cpu"])

    [pair] = k8s.compare(rows)
    assert (pair["other"], pair["shape"], pair["nodes"]) == ("toy", "whole", 4)
    assert pair["pods_per_s"] == round(tessera["pods_per_s"] / toy["pods_per_s"], 2)
    assert pair["p99"] == round(tessera["p99"] / toy["p99"], 2)
    whole = k8s._ms_per_pod(tessera["cpu"], (*k8s.SERVICES, "nats-server"), 24)
    assert pair["cpu_ms"] == (whole, k8s._ms_per_pod(toy["cpu"], ("toy",), 24))

    table = "\n".join(k8s.render(rows, args))
    assert f"| 4 | 24 | whole | backlog | toy | {pair['pods_per_s']} | {pair['p99']} |" in table
    assert "| toy | 4 | 24 | whole | backlog | 24 |" in table


async def test_a_foreign_scheduler_that_exits_stops_the_run() -> None:
    """A command that cannot run (a wrong flag, a missing binary's wrapper) is told at once,
    with its exit code and output, not after `--timeout` of waiting for bindings."""
    args = k8s.parse(["--nodes", "2", "--pods", "3", "--shapes", "whole", "--modes", "stream", "--timeout", "600",
                      "--against", f"{sys.executable} -c \"print('no such flag: --kubeconfig'); raise SystemExit(3)\""])  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        await k8s._on_server(args, "whole", "stream", args.against)
    assert "exited with 3" in str(stopped.value) and "no such flag" in str(stopped.value)


async def test_volcano_jobs_are_measured_from_their_jobs_creation() -> None:
    """Shape `vcjob`: Volcano Jobs of `--job-size` workers, whose pods Tessera's job controller
    makes; each pod's latency counts from its Job's creation, and the against scheduler (which
    cannot run a Volcano Job) is not run on it."""
    args = k8s.parse(["--nodes", "2", "--pods", "12", "--shapes", "vcjob", "--job-size", "4", "--modes", "backlog",
                      "--against", TOY, "--against-name", "toy", "--timeout", "120"])  # fmt: skip
    [row] = await k8s.main_async(args)
    assert (row["scheduler"], row["shape"], row["bound"]) == ("tessera", "vcjob", 12)
    assert row["p99"] is not None and row["p99"] > 0
    # the job controller made every pod (a creation asked again before its watch brought the
    # pod is a 409, counted too: under load a quarter more)
    assert row["api_per_pod"]["queue"]["create pods"] >= 1.0
