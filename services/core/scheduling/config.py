"""`volcano-scheduler.conf` as is: actions, tiers of plugins with `enable*` switches, arguments.

Switch names and defaults follow `pkg/scheduler/plugins/defaults.go` (ApplyPluginConfDefaults):
every switch defaults to true except `enableHierarchy`. The built-in default is Volcano's
DefaultSchedulerConf (`pkg/scheduler/util.go`) plus `deviceshare` with NVIDIA vGPU and HAMi
Ascend vNPU enabled and HAMi's default policies (node binpack, card spread), and `resourcequota`
(namespaces' ResourceQuotas held at enqueue: without it a Job admitted over its quota would
have its pods refused by the API server; it costs nothing where no quota exists).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from services.core.configtext import SCHEDULER_KEYS, PasteError, unwrap

SWITCHES = (
    "enableJobOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined", "enableTaskOrder",
    "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder",
    "enabledClusterOrder", "enablePredicate", "enableBestNode", "enableNodeOrder",
    "enableTargetJob", "enableReservedNodes", "enableJobEnqueued", "enabledVictim",
    "enableJobStarving", "enabledOverused", "enabledAllocatable", "enabledHyperNodeOrder",
    "enabledSubJobReady", "enabledSubJobPipelined", "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)  # fmt: skip
KNOWN_ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim")
#: Volcano's other actions: a conf naming them is taken (it is what the operator runs today),
#: they are not run, and the scheduler says so at start (`not_run`)
VOLCANO_ONLY_ACTIONS = {
    "shuffle": "no evictions of the victims rescheduling/tdm/pdb name",
    "gangpreempt": "preemption is done task by task by `preempt`",
    "gangreclaim": "reclaim is done task by task by `reclaim`",
}


#: deviceshare arguments naming the ConfigMap Volcano loads device-config.yaml from; Tessera
#: takes that text from `--device-config` instead, so they are reported by `not_run`
DEVICE_CONFIGMAP_ARGUMENTS = ("deviceshare.KnownGeometriesCMName", "deviceshare.KnownGeometriesCMNamespace")


#: deviceshare arguments Volcano acts on and Tessera does not, and what to do instead: listed by
#: `not_run` when set (the switches only when on), never taken silently
DEVICESHARE_NOT_ACTED_ON = {
    "deviceshare.GPUSharingEnable": ("Volcano's legacy gpushare (volcano.sh/gpu-memory) is not served: ask "
                                     "HAMi's names (nvidia.com/gpu with nvidia.com/gpumem) or Volcano's vGPU names"),
    "deviceshare.GPUNumberEnable": ("Volcano's legacy whole-GPU count (volcano.sh/gpu-number) is not served: "
                                    "ask nvidia.com/gpu"),
    "deviceshare.AscendMindClusterVNPUEnable": ("MindCluster's 310P vNPU is not served: Tessera slices Ascend "
                                                "cards by HAMi's vNPU (deviceshare.AscendHAMiVNPUEnable)"),
    "deviceshare.NodeLockEnable": ("Tessera takes HAMi's node lock by its own setting (--hami-node-lock; the "
                                   "chart's services.allocator.hamiNodeLock), whatever this says"),
    "deviceshare.GPUExclusiveRules": ("no rule gives a pod a dedicated GPU here: a pod asking nvidia.com/gpu "
                                      "with no memory or cores gets a whole card"),
    "deviceshare.GPUExclusiveVGPUResourceName": ("no rule gives a pod a dedicated GPU here: a pod asking "
                                                 "nvidia.com/gpu with no memory or cores gets a whole card"),
    "deviceshare.ASCEND310PVNPUEnable": ("the 310P vNPU of Volcano's earlier releases is not served: Tessera slices "
                                         "Ascend cards by HAMi's vNPU (deviceshare.AscendHAMiVNPUEnable)"),
}  # fmt: skip
#: every deviceshare argument Volcano's plugin reads (Tessera acts on the rest of them): a key not
#: among them is a typo Volcano would ignore in silence — `deviceshare.AscendHAMiVNPUEnabel: true`
#: left the vNPU path off with no word (the newcomer's review)
DEVICESHARE_ARGUMENTS = frozenset({
    "deviceshare.VGPUEnable", "deviceshare.AscendHAMiVNPUEnable", "deviceshare.SchedulePolicy",
    "deviceshare.NodeSchedulePolicy", "deviceshare.ScheduleWeight", "deviceshare.HamiVnpuCore",
    *DEVICE_CONFIGMAP_ARGUMENTS, *DEVICESHARE_NOT_ACTED_ON,
})  # fmt: skip
#: drf's hDRF switch: taken (a moved conf must load, and Volcano's own check that proportion is
#: not beside it still refuses), not acted on, and said so by `not_run` when on
DRF_HIERARCHY_NOT_ACTED_ON = (
    "Volcano's hDRF is not implemented: drf orders jobs and judges preemption victims by each job's "
    "flat dominant-resource share; queues are not ordered or reclaimed by a hierarchical share, and "
    "the Queue annotations volcano.sh/hierarchy and volcano.sh/hierarchy-weights are not read. For "
    "hierarchical queues use capacity with enableHierarchy: true and the Queues' spec.parent"
)
#: of those, the switches: reported only when on
_SWITCHES = ("deviceshare.GPUSharingEnable", "deviceshare.GPUNumberEnable", "deviceshare.AscendMindClusterVNPUEnable",
             "deviceshare.ASCEND310PVNPUEnable")


#: The generation of the scheduling rules this binary decides by, recorded in
#: `SchedulerConfigured.rules` so `tessera replay --verify` re-runs an older log by the rules it
#: ran with. Raise it with every change to what a session decides from the same log, and keep
#: the older rule beside the new one (read `SchedulerConf.rules`). Generation 1: device counts
#: no deviceshare books are node scalars, whole cards (`counted_vendors`; before, a family whose
#: switch was off was refused and without deviceshare counts were not fitted at all); two
#: containers' vNPUs of one template share a card (`fit.DeviceConfig.templates_share`); the
#: device config's `vnpus.hamiVnpuCore` is the global hami-core switch; a family capability's
#: enqueue words; a scalar's amount in its manifest unit in explain's words. Generation 2: an
#: untolerated taint without a value is said `{key: }`, in kube-scheduler's words (was `{key}`).
#: And an NVIDIA soft request's cores weigh in queue shares as a part of the card's registered cores
#: (100 × deviceCoreScaling), not of 100 (`shares._percent_of`); the words for cards whose cores,
#: not memory, are short (`deviceshare._cores_short`), and the proportion line of a device
#: dimension counted in cards (`shares.enqueue_words`).
#: And (`PIPELINES_END`) a simulation's pipelined reservation lasts one session
#: (`record.decision_events`' `pipelines_end`). And (`PLAIN_EXTENDED`) NVIDIA's MIG and `.shared`
#: names sort as plain resources where a waiting job's words name the first dimension over a limit.
#: And (`RING_FIT`) an Ascend 910 pod's cards come from the best-fitting HCCS ring, a 910A pod of
#: <= 4 cards from one ring only. Generation 3: (`ONLY_QUEUE_WORDS`) an overused queue that is
#: the only one with jobs is not told to raise its weight; (`RING_COUNT_FIT`) an Ascend 910A pod
#: of 3 or 5-7 cards does not fit 910A cards, and (`RING_RANK`) nodes are ranked by how well an
#: Ascend 910 pod's cards fit an HCCS ring there; (`TOPOLOGY_NODES_WORDS`) a hard network-topology
#: gang's wait says how many nodes beyond the three it names.
RULES = 3
#: the generation from which a simulation records where a pipelined reservation ends
PIPELINES_END = 2
#: the generation from which a waiting job's `unblock` says what would free it under the
#: configured share plugin (`proportion.more_share`, `capacity._limit_words`), why preempt and
#: reclaim take nothing for it, and a gang's whole count: the words are recorded in
#: JobUnschedulable, so a log of an older generation keeps its own
ADVICE_WORDS = 2
#: the generation from which a card in MIG mode is kept off, or carved by knownMigGeometries
#: (`devices/mig.py`): before, it was booked as a soft card
MIG_KEPT_OFF = 2
#: the generation from which NVIDIA's MIG `mixed` names (`nvidia.com/mig-1g.10gb`) and renamed
#: time-slicing replicas (`nvidia.com/gpu.shared`) are plain extended resources
#: (`resources.is_plain_extended`) where a waiting job's words name the first dimension over a
#: limit (`shares.first_over`): before, they sorted among the devices, after cpu and memory
PLAIN_EXTENDED = 2
#: the generation from which an Ascend 910 pod's cards are taken from one HCCS ring, the best
#: fitting one (ascend-for-volcano's module910x8 priorities), and a 910A pod of <= 4 cards never
#: spans the two rings (`ascend.AscendVendor.select`): before, the ring with the most free cards
#: was filled first and a 910A pod of 2-4 cards could be split 2 + 2 across the rings
RING_FIT = 2
#: the generation from which a job waiting in an overused queue that is the only queue with jobs
#: is told the cluster is full for it, not to raise the queue's weight: proportion shares the
#: cluster among the queues with jobs by weight, and one alone deserves all it asks already
#: (`explain._overused`); the words are recorded in JobUnschedulable
ONLY_QUEUE_WORDS = 3
#: the generation from which an Ascend 910A pod asking a count its HCCS rings cannot serve (3,
#: 5, 6, 7: ascend-for-volcano's module910x8 takes 1, 2, 4 or 8) does not fit 910A cards
#: (`ascend.RING_COUNT_NOT_FIT`): before, 3 took one ring and 5-7 were split across the two
#: (a family name, `huawei.com/Ascend910`, learns its model only at placement; admission refuses
#: `huawei.com/Ascend910A` itself)
RING_COUNT_FIT = 3
#: the generation from which deviceshare's node order ranks nodes by the HCCS ring an Ascend 910
#: pod's cards would take there (`fit.NodeFit.topology`, `deviceshare.RING_STEP`), as
#: ascend-for-volcano's ScoreBestNPUNodes does: before, a 1-card pod could break the only whole
#: ring left while another node had a ring it fitted exactly, and a later 4-card pod waited
RING_RANK = 3
#: the generation from which a hard network-topology gang's wait names every node its running
#: pods are on, or the first three and how many more (`topology.refusal_words`): before, the
#: first three were named alone, as if they were all; the words are recorded in JobUnschedulable
TOPOLOGY_NODES_WORDS = 3


def _on(value: object) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


#: The device families deviceshare books on cards, each with the argument that turns it on and
#: the name people call it by.
DEVICE_SWITCHES = {"nvidia": ("deviceshare.VGPUEnable", "NVIDIA"),
                   "huawei": ("deviceshare.AscendHAMiVNPUEnable", "Ascend")}  # fmt: skip


def flag(value: object) -> bool:
    """A deviceshare switch as the plugin reads it (Go's GetBool: a YAML true or "true")."""
    return value is True or str(value).lower() == "true"


def deviceshare_vendors(arguments: Mapping[str, Any]) -> frozenset[str]:
    """The families deviceshare books given its arguments. Tessera's own rule where no switch
    is set: every family (a conf naming deviceshare bare means cards to share); where some are
    set, only those."""
    on = frozenset(v for v, (key, _) in DEVICE_SWITCHES.items() if flag(arguments.get(key)))
    return on or frozenset(DEVICE_SWITCHES)


def counted_vendors(conf: SchedulerConf) -> frozenset[str]:
    """The device families whose count names (`huawei.com/Ascend910B3`, `nvidia.com/gpu`) a
    session fits as node scalars, whole cards by count against each node's cards: those no
    deviceshare books (the plugin absent, or that family's switch off). Volcano fits every
    extended resource a pod requests against the node's allocatable in allocate, whatever the
    plugins; only deviceshare's own devices' memory/core names are left out (its ignored list,
    `api.IgnoredDevicesList`); without this a pod asking 8 cards ran on a node of 4."""
    if conf.rules < 1:  # (before generation 1 no count was a node scalar)
        return frozenset()
    ds = conf.plugin("deviceshare")
    booked = deviceshare_vendors(ds.arguments) if ds is not None else frozenset()
    return frozenset(DEVICE_SWITCHES) - booked


class ConfigError(ValueError):
    """The configuration text is not a valid scheduler configuration."""


@dataclass(frozen=True)
class PluginConf:
    name: str
    switches: Mapping[str, bool] = field(default_factory=dict)
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def enabled(self, switch: str) -> bool:
        if switch == "enableHierarchy":
            return self.switches.get(switch, False)
        return self.switches.get(switch, True)


@dataclass(frozen=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginConf, ...], ...]
    configurations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The device catalogue's vendor registry when a HAMi device-config.yaml replaces the
    #: built-in one (`--device-config`); not part of volcano-scheduler.conf. None = built-in.
    vendors: Any = field(default=None, compare=False)
    #: the generation of the scheduling rules to decide by (`RULES`; a recorded configuration's
    #: `SchedulerConfigured.rules`, 0 for a log written before generations were counted)
    rules: int = RULES

    def plugin(self, name: str) -> PluginConf | None:
        for tier in self.tiers:
            for p in tier:
                if p.name == name:
                    return p
        return None


DEFAULT_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: resourcequota
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.AscendHAMiVNPUEnable: true
      deviceshare.SchedulePolicy: spread
      deviceshare.NodeSchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10
"""


def parse_conf(text: str, known_plugins: frozenset[str] | None = None) -> SchedulerConf:
    """The file's text, its `volcano-scheduler.conf: |` block, or the whole ConfigMap
    (`configtext`); an error names its place in what was pasted."""
    try:
        inner, where = unwrap(text, SCHEDULER_KEYS)
    except PasteError as exc:
        raise ConfigError(str(exc)) from None
    try:
        return _parse_conf(inner, known_plugins)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None


def _parse_conf(text: str, known_plugins: frozenset[str] | None) -> SchedulerConf:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None
    if not isinstance(raw, dict):
        raise ConfigError("the configuration must be a mapping with `actions` and `tiers`")
    return conf_from_mapping(raw, known_plugins)


def conf_from_mapping(
    raw: Mapping[str, Any], known_plugins: frozenset[str] | None = None
) -> SchedulerConf:
    unknown = set(raw) - {"actions", "tiers", "configurations", "metrics"}
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: unknown field")
    actions = tuple(a.strip() for a in str(raw.get("actions") or "").split(",") if a.strip())
    for a in actions:
        if a not in KNOWN_ACTIONS and a not in VOLCANO_ONLY_ACTIONS:
            raise ConfigError(f"actions: unknown action {a!r}")
    tiers: list[tuple[PluginConf, ...]] = []
    for i, tier in enumerate(raw.get("tiers") or []):
        plugins: list[PluginConf] = []
        for j, p in enumerate((tier or {}).get("plugins") or []):
            path = f"tiers[{i}].plugins[{j}]"
            if not isinstance(p, dict) or not p.get("name"):
                raise ConfigError(f"{path}.name: required")
            switches: dict[str, bool] = {}
            for key, value in p.items():
                if key in ("name", "arguments"):
                    continue
                if key not in SWITCHES:
                    raise ConfigError(f"{path}.{key}: unknown field")
                if not isinstance(value, bool):
                    raise ConfigError(f"{path}.{key}: must be a boolean")
                switches[key] = value
            name = str(p["name"])
            if known_plugins is not None and name not in known_plugins:
                raise ConfigError(f"{path}.name: unknown plugin {name!r}")
            plugins.append(PluginConf(name, switches, dict(p.get("arguments") or {})))
        names = {p.name for p in plugins}
        drf = next((p for p in plugins if p.name == "drf"), None)
        if "proportion" in names and drf is not None and drf.enabled("enableHierarchy"):
            raise ConfigError(
                f"tiers[{i}]: proportion and drf with enableHierarchy cannot be in the same tier"
            )
        tiers.append(tuple(plugins))
    configurations: dict[str, Mapping[str, Any]] = {}
    for c in raw.get("configurations") or []:
        configurations[str(c.get("name"))] = dict(c.get("arguments") or {})
    return SchedulerConf(actions, tuple(tiers), configurations)


#: plugins whose reclaimable rule is not the queues' share (gang: a job's minAvailable;
#: conformance: critical pods; pdb, cdp), and those whose rule is (deserved, guarantee)
RECLAIM_KEEPERS = ("gang", "conformance", "pdb", "cdp")
SHARE_PLUGINS = ("proportion", "capacity")


def reclaim_layout(conf: SchedulerConf) -> tuple[str, ...]:
    """A warning when reclaim's victims are decided by a tier above the queue-share plugin's:
    Volcano's `Session.Reclaimable` takes the first tier whose plugins leave victims in common,
    so gang and conformance in tier 1 (the Helm chart's layout) decide alone whenever they leave
    any — proportion's deserved and capacity's guarantee are never asked, and a queue at or
    below its share is reclaimed from — and when gang leaves none, the share plugin decides
    alone, without gang's minAvailable (volcano-sh/volcano#5896). Tessera keeps Volcano's
    behaviour; an operator relying on deserved or guarantee must hear it once."""
    if "reclaim" not in conf.actions:
        return ()
    out = []
    for j, tier in enumerate(conf.tiers):
        for k, p in enumerate(tier):
            if p.name not in SHARE_PLUGINS or not p.enabled("enableReclaimable"):
                continue
            above = [(i, q.name) for i, t in enumerate(conf.tiers[:j]) for q in t
                     if q.name in RECLAIM_KEEPERS and q.enabled("enableReclaimable")]  # fmt: skip
            if not above:
                continue
            names = " and ".join(dict.fromkeys(n for _, n in above))
            where = ", ".join(sorted({f"tiers[{i}]" for i, _ in above}))
            kept = "deserved" if p.name == "proportion" else "deserved and guarantee"
            out.append(
                f"tiers[{j}].plugins[{k}]: {p.name} is in a tier below {names} ({where}), so reclaim does not "
                f"keep to {kept}: the first tier whose plugins leave victims in common decides them — when "
                f"{names} leave any, {p.name} is not asked and a queue at or below its share is reclaimed "
                f"from; when they leave none, {p.name} decides without their rules"
                f"{' (gang keeps no job at its minAvailable then)' if 'gang' in names else ''}. Volcano's "
                f"behaviour, kept (volcano-sh/volcano#5896); to have both decide, put {p.name} in the tier "
                f"of {names}"
            )  # fmt: skip
    return tuple(out)


def not_run(conf: SchedulerConf, plugins: Iterable[str]) -> tuple[str, ...]:
    """What of `conf` Tessera leaves out, one line each: Volcano's scheduler skips a plugin it
    does not know with an error in its log, and an operator moving a conf over (a `tdm` or
    `usage` tier) must not believe it is honoured. With them, a tier layout that quietly
    switches off a rule an operator relies on (`reclaim_layout`): said wherever these are."""
    have = set(plugins)
    out = [f"actions: {a!r} is not run by Tessera ({VOLCANO_ONLY_ACTIONS[a]})"
           for a in conf.actions if a in VOLCANO_ONLY_ACTIONS]  # fmt: skip
    for i, tier in enumerate(conf.tiers):
        for j, p in enumerate(tier):
            if p.name not in have:
                out.append(f"tiers[{i}].plugins[{j}].name: plugin {p.name!r} is not run by Tessera "
                           f"(runs: {', '.join(sorted(have))})")  # fmt: skip
            elif p.name == "deviceshare" and (named := [k for k in DEVICE_CONFIGMAP_ARGUMENTS
                                                        if k in p.arguments]):  # fmt: skip
                out.append(f"tiers[{i}].plugins[{j}].arguments: {' and '.join(named)} "
                           f"{'are' if len(named) > 1 else 'is'} not read by Tessera: it fetches no "
                           "ConfigMap; its device config is --device-config (the chart's `deviceConfig` "
                           "value), HAMi's chart defaults without one")  # fmt: skip
            if p.name == "drf" and p.enabled("enableHierarchy"):
                out.append(f"tiers[{i}].plugins[{j}].enableHierarchy: not acted on by Tessera "
                           f"({DRF_HIERARCHY_NOT_ACTED_ON})")  # fmt: skip
            if p.name == "deviceshare":
                for key in p.arguments:
                    if key not in DEVICESHARE_ARGUMENTS:
                        near = difflib.get_close_matches(key, sorted(DEVICESHARE_ARGUMENTS), n=1, cutoff=0.8)
                        hint = f"; did you mean {near[0]}?" if near else ""
                        out.append(f"tiers[{i}].plugins[{j}].arguments.{key}: not an argument of deviceshare, "
                                   f"ignored (as Volcano ignores it){hint}")  # fmt: skip
                for key, why in DEVICESHARE_NOT_ACTED_ON.items():
                    if key in p.arguments and (key not in _SWITCHES or _on(p.arguments[key])):
                        out.append(f"tiers[{i}].plugins[{j}].arguments.{key}: not acted on by Tessera ({why})")
    return (*out, *reclaim_layout(conf))


def default_conf() -> SchedulerConf:
    return parse_conf(DEFAULT_CONF)
