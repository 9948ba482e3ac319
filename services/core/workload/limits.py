"""Bounds on one submitted object, checked before any work proportional to what they bound.

Admission serves every client from one process, so one object must not be able to kill or hang
it (issue 12: `replicas: 1000000000000` built a trillion pod names, 11 GB in 60 s; `replicas:
100000` made an event larger than NATS' max_payload, answered with a transport error instead of
a rejection). Each limit is checked on the raw count first, and a rejection names the limit.

Kubernetes has its own size limits where it has them (annotations: 256 KiB in total,
`TotalAnnotationSizeLimitB`; quantities: at most 2^63-1, the largest `resource.Quantity`);
the rest are Tessera's, generous for real batch jobs and small enough to keep one apply cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

#: apimachinery `TotalAnnotationSizeLimitB`: keys + values of one object's annotations.
ANNOTATIONS_MAX_BYTES = 256 * 1024
#: The largest value a Kubernetes `resource.Quantity` holds (int64).
QUANTITY_MAX = 2**63 - 1
#: NATS' default max_payload (1 MiB), for callers that do not know their connection's.
NATS_DEFAULT_MAX_PAYLOAD = 1024 * 1024
#: Room left in a message for its headers (type, version, message id with the subject in it,
#: traceparent, correlation ids, expected sequence): the event body gets the rest.
HEADER_ALLOWANCE = 8 * 1024


@dataclass(frozen=True, slots=True)
class WorkloadLimits:
    """What one object may hold; `max_event_bytes` is the encoded size of one appended event."""

    max_pods: int = 10_000  # Σ replicas of one Job (or pods of one PodGroup)
    max_tasks: int = 256  # tasks of one Volcano Job
    max_containers: int = 64  # containers + initContainers of one pod template
    max_annotation_bytes: int = ANNOTATIONS_MAX_BYTES
    max_event_bytes: int = NATS_DEFAULT_MAX_PAYLOAD - HEADER_ALLOWANCE
    #: Volcano job plugins this installation does not run (the chart's `jobPlugins.ssh: false`
    #: leaves the queue service no right to Secrets): a Job naming one, or one that implies it,
    #: is refused rather than left with pods waiting on a Secret never made
    plugins_off: frozenset[str] = frozenset()
    #: the schedulerNames this installation serves (`--scheduler-name`): a pod naming another,
    #: or none (the API server's `default-scheduler`), is placed but warned about — on a
    #: cluster it would not be Tessera's (`schedulernames.py`); empty: not checked (simulate)
    scheduler_names: tuple[str, ...] = ()

    @classmethod
    def for_payload(cls, max_payload: int) -> WorkloadLimits:
        """Limits for a log whose messages may carry `max_payload` bytes (NATS' INFO field)."""
        return cls(max_event_bytes=max(0, max_payload - HEADER_ALLOWANCE))


DEFAULT_WORKLOAD_LIMITS = WorkloadLimits()
