"""`tessera get vcjob` and `get pg` print the columns `kubectl get` prints for Volcano's CRDs
(the printer columns of the chart's crds/: STATUS, MINAVAILABLE or MINMEMBER, RUNNINGS, AGE;
QUEUE with `-o wide`), listed by namespace and name as the API server lists objects. Before:
NAME QUEUE PHASE REASON AGE and NAME KIND QUEUE PHASE AGE, groups in submission order."""

from __future__ import annotations

from pathlib import Path

import msgspec
import yaml

from contracts.envelope import TYPE
from contracts.events import JobSubmitted, PlacementCommitted, TaskPlacement, TaskStarted
from contracts.subjects import Subjects
from services.cli.get import columns_of, listing_of
from services.cli.tables import table
from services.core.workload import admit, load_documents
from services.runtime.eventlog import StoredMessage
from tests.cli.test_kubectl_shapes import cell

CRDS = Path(__file__).resolve().parents[2] / "charts" / "tessera" / "files" / "crds"
JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: %s}
spec:
  minAvailable: 1
  tasks:
    - {name: w, replicas: 2, template: {spec: {containers: [{name: c, image: busybox}]}}}
"""


def _log() -> list[StoredMessage]:
    s = Subjects()
    out: list[StoredMessage] = []

    def put(subject: str, event: object) -> None:
        out.append(StoredMessage(len(out) + 1, subject, msgspec.json.encode(event),
                                 {TYPE: type(event).__name__}))  # fmt: skip

    for name in ("zeta", "alpha"):  # submitted in the other order than their names
        (spec,) = admit(load_documents(JOB % name)).jobs
        put(s.job("default", name), JobSubmitted(spec=spec))
    started = TaskPlacement(task="alpha-w-0", node="n")
    put(s.job("default", "alpha"), PlacementCommitted(namespace="default", name="alpha", placements=(started,)))
    put(s.job("default", "alpha"), TaskStarted(namespace="default", name="alpha", task="alpha-w-0", node="n"))
    return out


def _printer_columns(crd: str) -> list[str]:
    doc = yaml.safe_load((CRDS / crd).read_text())
    (version,) = doc["spec"]["versions"]
    return [c["name"].upper() for c in version["additionalPrinterColumns"] if not c.get("priority")]


def test_get_vcjob_prints_the_crds_printer_columns() -> None:
    got, _ = listing_of(_log(), "jobs", None)
    header, *rows = table(got.rows, columns_of("jobs", "table", all_namespaces=False)).splitlines()
    assert header.split() == ["NAME", *_printer_columns("batch.volcano.sh_jobs.yaml")]
    assert header.split() == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE"]
    text = "\n".join([header, *rows])
    assert [cell(text, n, "RUNNINGS") for n in ("alpha", "zeta")] == ["1", ""]  # none running: empty
    assert [cell(text, n, "MINAVAILABLE") for n in ("alpha", "zeta")] == ["1", "1"]
    assert [r.split()[0] for r in rows] == ["alpha", "zeta"]  # by name, as the API server lists
    wide = table(got.rows, columns_of("jobs", "wide", all_namespaces=False)).splitlines()[0].split()
    assert wide[:7] == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE", "QUEUE", "REASON"]


def test_get_pg_prints_the_crds_printer_columns_sorted_by_name() -> None:
    got, _ = listing_of(_log(), "podgroups", None)
    header, *rows = table(got.rows, columns_of("podgroups", "table", all_namespaces=False)).splitlines()
    assert header.split() == ["NAME", *_printer_columns("scheduling.volcano.sh_podgroups.yaml")]
    assert header.split() == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE"]
    names = [r.split()[0] for r in rows]
    assert names == sorted(names) and names[0].startswith("alpha-") and names[1].startswith("zeta-")
    alpha = rows[0].split()
    assert alpha[2:4] == ["1", "1"]  # minMember 1, one pod running
    wide = table(got.rows, columns_of("podgroups", "wide", all_namespaces=False)).splitlines()[0].split()
    assert wide[5] == "QUEUE"
