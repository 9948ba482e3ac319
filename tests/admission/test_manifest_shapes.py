"""A field of the wrong shape (rev-newcomer findings 2 and 10): a list where a map belongs, or
the reverse, or `replicas: "2"`, is refused on its object naming the field path and the shape
it must have, as the API server's decoder refuses it; the other objects of the same apply are
judged on their own (it was `AttributeError: 'str' object has no attribute 'get'` for the whole
request). A bad quantity is said once."""

from __future__ import annotations

import pytest

from contracts.api import ACCEPTED, REJECTED
from contracts.events import JobSubmitted
from services.admission.plan import Known, plan_apply
from services.core.devices import build_vendors
from services.core.workload.devicerequests import hami_parser
from services.runtime.eventlog import EventLog
from tests.admission.test_admission import events_of, started

VENDORS = build_vendors()

GOOD = """
apiVersion: v1
kind: Pod
metadata: {name: good-one}
spec:
  containers: [{name: c, image: busybox}]
"""

LIST_WANTED = "(a list's items each start with `- `)"
MAP_WANTED = "(a map's entries are `key: value` lines, without `- `)"

SHAPES = {
    "containers as a map": ("""
apiVersion: v1
kind: Pod
metadata: {name: dash}
spec:
  containers:
    name: c
    image: busybox
""", [f"spec.containers: must be a list, not a map {LIST_WANTED}"]),
    "labels and limits as lists": ("""
apiVersion: v1
kind: Pod
metadata:
  name: limlist
  labels:
    - app: web
spec:
  containers:
    - name: c
      image: busybox
      resources:
        limits:
          - huawei.com/Ascend910B3: 1
""", [f"metadata.labels: must be a map, not a list {MAP_WANTED}",
      f"spec.containers[0].resources.limits: must be a map, not a list {MAP_WANTED}"]),
    "tasks as a map": ("""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j22}
spec:
  minAvailable: 1
  tasks:
    name: worker
    replicas: 1
    template: {spec: {containers: [{name: c, image: busybox}]}}
""", [f"spec.tasks: must be a list, not a map {LIST_WANTED}"]),
    "resources as a string": ("""
apiVersion: v1
kind: Pod
metadata: {name: p24}
spec:
  containers:
    - name: c
      image: busybox
      resources: "1 card"
""", ["spec.containers[0].resources: must be a map, not a string (value: 1 card)"]),
    "a policy as a string": ("""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: pol}
spec:
  policies: [AbortJob]
  tasks: [{name: w, template: {spec: {containers: [{name: c, image: busybox}]}}}]
""", ["spec.policies[0]: must be a map, not a string (value: AbortJob)"]),
    "matchLabels as a list": ("""
apiVersion: v1
kind: Pod
metadata: {name: aff}
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - {topologyKey: zone, labelSelector: {matchLabels: [app=web]}}
  containers: [{name: c, image: busybox}]
""", ["spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels: "
      f"must be a map, not a list {MAP_WANTED}"]),
    "replicas as a quoted number": ("""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j12}
spec:
  minAvailable: 1
  tasks:
    - name: worker
      replicas: "2"
      template: {spec: {containers: [{name: c, image: busybox}]}}
""", ["spec.tasks[0].replicas: must be an integer, not a string (write the number without quotes) (value: 2)"]),
    "a queue's weight as a word": ("""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {weight: two}
""", ["spec.weight: must be an integer, not a string (value: two)"]),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_wrong_shape_is_refused_naming_the_field_and_the_shape(case: str) -> None:
    text, reasons = SHAPES[case]
    plan = plan_apply(text, Known(), hami_parser(VENDORS), VENDORS.resource_names())
    assert plan.error == ""
    assert [(r.outcome, list(r.reasons)) for r in plan.results] == [(REJECTED, reasons)]


async def test_the_other_objects_of_the_apply_are_judged_on_their_own(event_log: EventLog) -> None:
    svc = await started(event_log)
    bad_pod, _ = SHAPES["containers as a map"]
    bad_job, _ = SHAPES["tasks as a map"]
    reply = await svc.apply(GOOD + "---" + bad_pod + "---" + bad_job)
    assert reply.error == ""
    assert [(r.name, r.outcome) for r in reply.results] == [
        ("good-one", ACCEPTED), ("dash", REJECTED), ("j22", REJECTED)]  # fmt: skip
    assert [e.spec.name for e in await events_of(event_log) if isinstance(e, JobSubmitted)] == ["good-one"]


BAD_QUANTITY = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j15}
spec:
  tasks:
    - name: worker
      template:
        spec:
          containers:
            - name: train
              image: busybox
              resources: {limits: {huawei.com/Ascend910B3: "one"}}
"""


def test_a_bad_quantity_is_said_once() -> None:
    plan = plan_apply(BAD_QUANTITY, Known(), hami_parser(VENDORS), VENDORS.resource_names())
    assert [r.reasons for r in plan.results] == [(
        "spec.tasks[0].template.spec.containers[0].resources.limits.huawei.com/Ascend910B3: 'one' is "
        "not a quantity (value: one)",)]  # fmt: skip


def tripping(containers: object, annotations: dict[str, str], path: str, field: str = "containers") -> tuple:
    """A device parser that trips over a shape nobody foresaw, on the pods that say so."""
    if "trip" in annotations:
        raise TypeError("'int' object is not iterable")
    return (), ()


def test_a_rule_that_trips_refuses_only_its_object_naming_it() -> None:
    tripped = GOOD.replace("good-one}", "tripped, annotations: {trip: 'yes'}}")
    plan = plan_apply(GOOD + "---" + tripped, Known(), tripping, frozenset())  # type: ignore[arg-type]
    assert plan.error == ""
    assert [(r.name, r.outcome) for r in plan.results] == [("good-one", ACCEPTED), ("tripped", REJECTED)]
    assert plan.results[1].reasons == (
        "spec: could not be read (TypeError: 'int' object is not iterable): a field has a shape it "
        "cannot have (a list where a map belongs, or the reverse)",)  # fmt: skip
