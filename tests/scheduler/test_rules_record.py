"""An upgraded scheduler restarted on the same configuration texts appends a record of the
current rules' generation: the log's last record (written by a binary before generation 1, no
`rules`) is not its own, so its sessions would otherwise reference a record that re-runs them by
the older rules (`tessera replay --verify` would report every new decision as a divergence).
The older scheduler appended its record with the id of the texts alone; the new one's id
names its generation, so JetStream's duplicate window does not drop it."""

from __future__ import annotations

import msgspec

from contracts.events import SchedulerConfigured
from services.core.scheduling import record
from services.core.scheduling.config import RULES
from services.runtime.eventlog import EventLog
from services.scheduler.service import Scheduler
from tests.allocator.scenario import decoded, put


async def test_a_scheduler_on_an_older_generations_record_appends_its_own(event_log: EventLog) -> None:
    current = record.configured()
    older = msgspec.structs.replace(current, rules=0)
    subject = event_log.subjects.scheduler(current.scheduler)
    first = await put(event_log, subject, older, mid=f"sched-conf:{record.conf_digest(older)}")
    sched = Scheduler(event_log)
    await sched.recover()
    ours = await event_log.last_per_subject(subject)
    (last,) = decoded(ours)
    assert isinstance(last, SchedulerConfigured) and last.rules == RULES
    assert sched.conf_seq == ours[-1].seq > first
    assert sched.conf.rules == RULES

    again = Scheduler(event_log)  # restarted on the same texts and generation: nothing appended
    await again.recover()
    assert again.conf_seq == sched.conf_seq
    assert await event_log.last_sequence() == sched.conf_seq
