"""Seconds since the epoch as the Kubernetes API writes time: RFC 3339, UTC, to the second.

One rule for the API's timestamps (conditions, Events), the CLI's kubectl-like output and the
scheduler's and story's "until" times, so what explain says matches what kubectl shows; core
keeps it (it may not import the Kubernetes edge, which the edge and the CLI may import).
"""

from __future__ import annotations

from datetime import UTC, datetime

#: the `strftime`/`strptime` pattern of such a stamp
RFC3339_SECONDS = "%Y-%m-%dT%H:%M:%SZ"


def utc_stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime(RFC3339_SECONDS)
