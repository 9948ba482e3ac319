"""The event log: one interface (`model.EventLog`), an in-memory and a JetStream backend."""

from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import (
    MAX_BATCH,
    Appended,
    AppendResult,
    BatchCommitted,
    BatchResult,
    Conflict,
    Consumer,
    Delivery,
    Duplicate,
    Entry,
    EventLog,
    Followed,
    LogError,
    StoredMessage,
)

__all__ = [
    "MAX_BATCH",
    "AppendResult",
    "Appended",
    "BatchCommitted",
    "BatchResult",
    "Conflict",
    "Consumer",
    "Delivery",
    "Duplicate",
    "Entry",
    "EventLog",
    "Followed",
    "LogError",
    "MemoryLog",
    "StoredMessage",
]
