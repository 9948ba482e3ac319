"""A Volcano Job's `spec.plugins` (volcano.md §1.3): which job-controller plugins Tessera runs,
their flags, and the words for what it does not run.

Distributed training jobs rely on these: `svc` gives each pod a stable DNS name under a headless
Service and every pod the task host lists (`VC_<TASK>_HOSTS`), `env` the task index, `pytorch`
the rendezvous variables (`MASTER_ADDR`, `WORLD_SIZE`, `RANK`), `tensorflow` `TF_CONFIG`, `mpi`
the workers' addresses (`MPI_HOST`) and the ssh port, `ssh` a key pair every pod of the job
trusts (mpirun and DeepSpeed's launcher log into the workers with it), `hcclrank` Ascend's HCCL
rank annotation, `ringsconfigmap` the ConfigMap `rings-config-<job>` Ascend's MindCluster
writes the job's HCCL rank table into (`hccl.json`), mounted in every container where the
training scripts wait for it. Tessera's job controller runs these (`services.kube.jobplugins`); `ray` is
accepted, as Volcano accepts it, with a warning that its pods get nothing from it.

Volcano's job webhook adds the plugins these depend on to the Job (`svc` for `mpi`,
`tensorflow` and `pytorch`, whose addresses are svc's names; `ssh` for `mpi`); Tessera has no
webhook writing the Job, so its controller runs them as if named (`implied`), with their
defaults. Flags are read as Go's `flag` package reads them (`--name=value`, `--name value`, a
bare `--name` for a boolean; the first argument that is not a flag ends them), and an unknown
flag or a bad value is refused here, where Volcano would log it and go on with the defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.core.workload import names

#: plugin → flag → default (its type is the default's)
FLAGS: dict[str, dict[str, str | int | bool]] = {
    "env": {},
    "svc": {"publish-not-ready-addresses": False, "disable-network-policy": False},
    "pytorch": {"master": "master", "worker": "worker", "port": 23456},
    "hcclrank": {"master": "master", "worker": "worker"},
    "mpi": {"master": "master", "worker": "worker", "port": 22},
    "ssh": {"ssh-key-file-path": "/root/.ssh", "ssh-private-key": "", "ssh-public-key": ""},
    "tensorflow": {"ps": "ps", "worker": "worker", "chief": "chief", "evaluator": "evaluator", "port": 2222},
    "ringsconfigmap": {"configmap-name-template": "rings-config-{{.Name}}", "volume-name": "ascend-910-config",
                       "mount-path": "/user/serverid/devindex/config", "configmap-labels": "",
                       "configmap-data": "", "configmap-annotations": ""},
}
#: ringsconfigmap's ConfigMap when its flags say nothing (Volcano's defaults, to the byte)
RINGS_LABELS = {"ring-controller.atlas": "ascend-910b"}
RINGS_DATA = {"hccl.json": '{\n        "status":"initializing"\n    }'}
#: the Job's fields a ConfigMap name template may use (Go's `{{.Name}}` on the Job object)
TEMPLATE_FIELD = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")
TEMPLATE_FIELDS = ("Name", "Namespace", "UID")
#: plugin → the plugins Volcano's webhook adds to a Job naming it (what it builds on)
IMPLIED: dict[str, tuple[str, ...]] = {"mpi": ("ssh", "svc"), "pytorch": ("svc",), "tensorflow": ("svc",)}
#: what Volcano's job webhook knows but Tessera's job controller does not run, and what the
#: pods then lack
NOT_RUN = {
    "ray": "the Ray head's address and ports",
}


@dataclass(frozen=True, slots=True)
class PluginProblem:
    path: str
    value: str
    rule: str


def parse_flags(plugin: str, args: Sequence[object]) -> tuple[dict[str, str | int | bool], list[PluginProblem]]:
    """The plugin's flags from its argument list, defaults filled in; problems name the argument."""
    known = FLAGS[plugin]
    out = dict(known)
    problems: list[PluginProblem] = []
    i = 0
    items = [str(a) for a in args]
    while i < len(items):
        arg = items[i]
        where = f"spec.plugins.{plugin}[{i}]"
        if not arg.startswith("-") or arg in ("-", "--"):
            break  # Go's flag package: the first non-flag argument ends the flags
        name, eq, value = arg.lstrip("-").partition("=")
        if name not in known:
            shown = ", ".join(f"--{f}" for f in known) or "none"
            problems.append(PluginProblem(where, arg, f"unknown flag --{name} ({plugin}'s flags: {shown})"))
            break
        default = known[name]
        if isinstance(default, bool):
            if eq and value.lower() not in ("true", "false", "1", "0", "t", "f"):
                problems.append(PluginProblem(where, arg, f"--{name} is a boolean: true or false"))
                break
            out[name] = not eq or value.lower() in ("true", "1", "t")
        else:
            if not eq:
                if i + 1 >= len(items):
                    problems.append(PluginProblem(where, arg, f"--{name} needs a value"))
                    break
                i += 1
                value = items[i]
            if isinstance(default, int):
                try:
                    out[name] = int(value)
                except ValueError:
                    problems.append(PluginProblem(where, arg, f"--{name} is a number"))
                    break
            else:
                out[name] = value
        i += 1
    return out, problems


def check_plugins(raw: object, task_names: Sequence[str],
                  off: frozenset[str] = frozenset()) -> tuple[list[PluginProblem], list[PluginProblem]]:  # fmt: skip
    """(refusals, warnings) for a Job's `spec.plugins`; `off`: plugins this installation does
    not run (refused, also where another plugin implies them)."""
    refusals: list[PluginProblem] = []
    warnings: list[PluginProblem] = []
    if raw is None:
        return refusals, warnings
    if not isinstance(raw, Mapping):
        return [PluginProblem("spec.plugins", str(raw), "must be a map of plugin name to its arguments")], []
    for name, args in raw.items():
        name = str(name)
        where = f"spec.plugins.{name}"
        if name in NOT_RUN:
            warnings.append(PluginProblem(where, name, f"Tessera's job controller does not run the {name} "
                                          f"plugin: its pods will lack {NOT_RUN[name]}"))  # fmt: skip
            continue
        if name not in FLAGS:
            refusals.append(PluginProblem(where, name, "unable to find job plugin"))
            continue
        if turned_off := [p for p in implied([name]) if p in off]:
            via = "" if turned_off == [name] else f" (it runs with {', '.join(turned_off)})"
            refusals.append(PluginProblem(where, name, f"the {turned_off[0]} plugin is off in this cluster{via}: "
                                          "Tessera's queue service may not make its Secret (the chart's "
                                          "jobPlugins.ssh: false)"))  # fmt: skip
            continue
        if args is not None and not isinstance(args, list):
            refusals.append(PluginProblem(where, str(args), "must be a list of arguments"))
            continue
        flags, problems = parse_flags(name, args or [])
        refusals.extend(problems)
        if not problems:
            told, refused = _flag_problems(name, flags, task_names, where)
            warnings.extend(told)
            refusals.extend(refused)
    return refusals, warnings


def render_name(template: str, name: str, namespace: str, uid: str) -> str:
    """A ConfigMap name template with the Job's fields put in (`{{.Name}}`, `{{.Namespace}}`,
    `{{.UID}}`; admission refused any other), trimmed as Volcano trims it."""
    values = {"Name": name, "Namespace": namespace, "UID": uid}
    return TEMPLATE_FIELD.sub(lambda m: values.get(m.group(1), ""), template).strip()


def json_map(text: str | int | bool) -> dict[str, str] | None:
    """A flag's JSON object of strings ("" = not given: {}); None if it is not one."""
    if not text:
        return {}
    try:
        got = json.loads(str(text))
    except ValueError:
        return None
    if not isinstance(got, dict) or not all(isinstance(v, str) for v in got.values()):
        return None
    return got


#: what a private key given in the ssh plugin's flags is replaced with in the log's copy
REDACTED = "(redacted: read from the Job object)"


def redacted(plugins: object) -> object:
    """A Job's `spec.plugins` without the private key `--ssh-private-key` may carry: the log
    keeps a copy of every admitted manifest, readable by more than may read the Job (the
    controller makes the Secret from the Job object itself). Anything else as it is."""
    if not isinstance(plugins, Mapping) or not isinstance(plugins.get("ssh"), list):
        return plugins
    args = [str(a) for a in plugins["ssh"]]
    out: list[str] = []
    hide = False
    for arg in args:
        name, eq, _ = arg.lstrip("-").partition("=")
        if hide:
            out.append(REDACTED)
            hide = False
        elif arg.startswith("-") and name == "ssh-private-key":
            out.append(f"{arg.partition('=')[0]}={REDACTED}" if eq else arg)
            hide = not eq
        else:
            out.append(arg)
    return {**plugins, "ssh": out}


def implied(names: Sequence[str]) -> list[str]:
    """The plugins a Job naming `names` runs, in name order: those and what they build on."""
    return sorted({*names, *(dep for n in names for dep in IMPLIED.get(n, ()))})


def _flag_problems(name: str, flags: Mapping[str, str | int | bool], task_names: Sequence[str],
           where: str) -> tuple[list[PluginProblem], list[PluginProblem]]:  # fmt: skip
    """(warnings, refusals) of one plugin's flags against the job's tasks."""
    told: list[PluginProblem] = []
    refused: list[PluginProblem] = []

    def missing(flag: str, lacks: str) -> None:
        task = str(flags[flag])
        if task not in task_names:
            told.append(PluginProblem(where, task, f"the job has no task {task}: its pods will lack {lacks}"))

    if name == "pytorch":
        missing("master", "MASTER_ADDR, WORLD_SIZE and RANK")
    elif name == "mpi":
        missing("master", "MPI_HOST")
        if str(flags["master"]) in task_names:
            missing("worker", "MPI_HOST's workers (it will be empty)")
    elif name == "ssh":
        path = str(flags["ssh-key-file-path"])
        if not path.startswith("/"):
            refused.append(PluginProblem(where, path, "--ssh-key-file-path must be an absolute path: "
                                         "every container mounts the keys there"))  # fmt: skip
        if flags["ssh-private-key"] and not flags["ssh-public-key"]:
            refused.append(PluginProblem(where, "--ssh-private-key", "--ssh-private-key needs --ssh-public-key "
                                         "too: authorized_keys is made from it, and would be empty"))  # fmt: skip
        elif flags["ssh-public-key"] and not flags["ssh-private-key"]:
            told.append(PluginProblem(where, "--ssh-public-key", "--ssh-public-key is ignored without "
                                      "--ssh-private-key: a new key pair is made for the job"))  # fmt: skip
    elif name == "ringsconfigmap":
        refused.extend(_rings_problems(flags, where))
    return told, refused


def _rings_problems(flags: Mapping[str, str | int | bool], where: str) -> list[PluginProblem]:
    problems: list[PluginProblem] = []
    template = str(flags["configmap-name-template"])
    unknown = [f for f in TEMPLATE_FIELD.findall(template) if f not in TEMPLATE_FIELDS]
    rest = TEMPLATE_FIELD.sub("", template)
    if unknown or "{{" in rest or "}}" in rest:
        problems.append(PluginProblem(where, template, "-configmap-name-template may use only "
                                      + ", ".join(f"{{{{.{f}}}}}" for f in TEMPLATE_FIELDS)))  # fmt: skip
    else:
        # as the longest Job (name and namespace 63 characters, a uid 36) would have it
        errs = names.dns1123_subdomain(render_name(template, "a" * 63, "a" * 63, "0" * 36))
        if errs:
            problems.append(PluginProblem(where, template, "-configmap-name-template must make a ConfigMap "
                                          f"name: {'; '.join(errs)}"))  # fmt: skip
    if not flags["mount-path"]:
        problems.append(PluginProblem(where, "-mount-path", "-mount-path cannot be empty"))
    if errs := names.dns1123_label(str(flags["volume-name"])):
        problems.append(PluginProblem(where, str(flags["volume-name"]), f"-volume-name: {'; '.join(errs)}"))
    for flag in ("configmap-labels", "configmap-data", "configmap-annotations"):
        got = json_map(flags[flag])
        if got is None:
            problems.append(PluginProblem(where, str(flags[flag]), f"-{flag} must be a JSON object of strings"))
            continue
        for key, value in got.items():  # what the API server would refuse the ConfigMap for
            errs = (names.qualified_name(key) + (names.label_value(value) if flag == "configmap-labels" else [])
                    if flag != "configmap-data" else names.config_key(key))  # fmt: skip
            if errs:
                problems.append(PluginProblem(where, key, f"-{flag} {key!r}: {'; '.join(errs)}"))
    return problems


#: Volcano's job webhook, in its words, for a `dependsOn` that names no task or forms a cycle
NOT_A_DAG = "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG)"


def dependency_problems(raw_tasks: Sequence[object], names: Sequence[str]) -> list[tuple[str, object, str]]:
    """(path, value, rule) for the tasks' `dependsOn` (Volcano's webhook: the tasks they name
    must sort topologically; an unknown name or a cycle does not)."""
    problems: list[tuple[str, object, str]] = []
    edges: dict[str, list[str]] = {}
    for i, raw in enumerate(raw_tasks):
        depends = raw.get("dependsOn") if isinstance(raw, Mapping) else None
        if depends is None or i >= len(names):
            continue
        listed = depends.get("name") if isinstance(depends, Mapping) else None
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            problems.append((f"spec.tasks[{i}].dependsOn.name", listed, "must be a list of task names"))
            continue
        edges[names[i]] = list(listed)
    if not edges:
        return problems
    # Kahn's sort over the named tasks; what never reaches in-degree 0 is on a cycle or waits
    # for a task that does not exist
    indegree = {n: 0 for n in names}
    for task, deps in edges.items():
        indegree[task] += len(deps)
    ready = [n for n in names if indegree[n] == 0]
    done = 0
    while ready:
        n = ready.pop()
        done += 1
        for task, deps in edges.items():
            for d in deps:
                if d == n:
                    indegree[task] -= 1
                    if indegree[task] == 0:
                        ready.append(task)
    if done != len(names):
        problems.append(("spec.tasks", None, NOT_A_DAG))
    return problems
