"""The waiting words of rules generation 2 (`config.ADVICE_WORDS`: what would free a job under
the configured share plugin, why preempt and reclaim take nothing for it, a gang's whole count)
are recorded in JobUnschedulable: logs of generation 1 (a platform lead's review's scenarios,
tests/fixtures/replay/rules1/advice-*.jsonl) keep their own words on `replay --verify`."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from contracts.events import JobUnschedulable, PlacementProposed, SchedulerConfigured
from services.core.scheduling.config import ADVICE_WORDS, MIG_KEPT_OFF, PLAIN_EXTENDED
from services.core.scheduling.verify import Stored, decoded, verify
from services.core.simulate.jsonl import read_jsonl

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay" / "rules1"
#: scenario → a phrase only the newer words say
LOGS = {
    "s7": "the guarantee",  # capacity: another queue's guarantee is the limit
    "s4-onetier-ds": "reclaim",  # the rule that keeps reclaim from the queues over their share
    "s5-nonreclaim": "for the gang",  # the gang's whole count
    "s9": "preemptable: false",  # the queue's own pods preempt cannot take
}


def _log(name: str, rules: int | None = None) -> list[Stored]:
    stored, poisoned = decoded(read_jsonl(FIXTURES / f"advice-{name}.jsonl"))
    assert not poisoned
    if rules is None:
        return stored
    return [(s, h, msgspec.structs.replace(e, rules=rules) if isinstance(e, SchedulerConfigured) else e)
            for s, h, e in stored]  # fmt: skip


@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_log_of_the_older_advice_verifies(name: str) -> None:
    log = _log(name)
    assert {e.rules for _, _, e in log if isinstance(e, SchedulerConfigured)} == {ADVICE_WORDS - 1}
    verdict = verify(log)
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    assert verdict.decisions > 0


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_current_rules_say_the_newer_advice(name: str) -> None:
    d = verify(_log(name, ADVICE_WORDS)).divergence
    assert d is not None and isinstance(d.rederived, JobUnschedulable) and isinstance(d.recorded, JobUnschedulable)
    assert LOGS[name] not in d.recorded.unblock
    assert LOGS[name] in d.rederived.unblock


def test_a_log_that_booked_a_mig_card_as_a_soft_card_verifies() -> None:
    """Rules generation 2 keeps a MIG card without geometries off (`config.MIG_KEPT_OFF`); a log
    of generation 1 (an operator's review: 12000 MB pods on an A100-80GB in MIG mode, six booked
    as soft slices) re-runs as it ran, and the current rules place none of them there."""
    stored, poisoned = decoded(read_jsonl(FIXTURES / "mig-soft.jsonl"))
    assert not poisoned
    verdict = verify(stored)
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    assert any(isinstance(e, PlacementProposed) for _, _, e in stored)  # as it ran
    now = [(s, h, msgspec.structs.replace(e, rules=MIG_KEPT_OFF) if isinstance(e, SchedulerConfigured) else e)
           for s, h, e in stored]  # fmt: skip
    d = verify(now).divergence
    assert d is not None and isinstance(d.recorded, PlacementProposed)
    assert not isinstance(d.rederived, PlacementProposed)  # kept off: CardInMigMode


def test_a_minresources_naming_a_mig_name_keeps_its_older_words() -> None:
    """A PodGroup's minResources may name NVIDIA's MIG `mixed` names (admission did not refuse
    them there under generation 1); those were devices then, so the overcommit words named cpu,
    the first dimension over the limit, and they are plain extended resources from generation
    2 (`config.PLAIN_EXTENDED`), named first. The fixture: `tessera simulate` at cc2428b, a
    PodGroup of minResources {cpu: 100, nvidia.com/mig-1g.10gb: 1} on 48 cpus with overcommit."""
    stored, poisoned = decoded(read_jsonl(FIXTURES / "plain-extended-minres.jsonl"))
    assert not poisoned
    assert {e.rules for _, _, e in stored if isinstance(e, SchedulerConfigured)} == {PLAIN_EXTENDED - 1}
    verdict = verify(stored)
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    now = [(s, h, msgspec.structs.replace(e, rules=PLAIN_EXTENDED) if isinstance(e, SchedulerConfigured) else e)
           for s, h, e in stored]  # fmt: skip
    d = verify(now).divergence
    assert d is not None and isinstance(d.recorded, JobUnschedulable) and isinstance(d.rederived, JobUnschedulable)
    assert d.recorded.why.startswith("cluster: cpu minResources 100")
    assert d.rederived.why.startswith("cluster: nvidia.com/mig-1g.10gb minResources 1")
