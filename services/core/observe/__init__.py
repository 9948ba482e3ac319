"""What the services export to Prometheus, as pure functions of their state (no registry, no I/O).

Each module names its metrics exactly as the project they come from does, so dashboards and
alerts written for that project read Tessera unchanged: `hami.py` (HAMi scheduler's per-card
gauges, from the allocator's ledgers), `volcano.py` (volcano-scheduler's queue and session
metrics, from a session's decisions). `Series` is one sample; `MetricSpec` its family.
"""

from services.core.observe.series import MetricSpec, Series

__all__ = ["MetricSpec", "Series"]
