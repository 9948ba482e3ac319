"""Known fields of the kinds Tessera reads, for strict field validation.

Kubernetes' strict field validation (kubectl's default since 1.27) refuses an unknown field in
a known kind; we do the same so that a typo such as `resoures` is an error naming its path
instead of a silently ignored request. A schema is a dict of field → sub-schema; `FREE` accepts
anything below (maps of labels, opaque volumes, probes…); a one-element list is "list of".

The schema also says each field's shape, checked before any rule reads the object
(`wrong_types`): a sub-schema dict or `MAP` is a map, a list or `LIST` a list, `INTEGER` an
integer. A list where a map belongs (`containers:` without `- `) is refused naming the field,
as the API server's decoder refuses it ("cannot unmarshal object into Go struct field
PodSpec.spec.containers of type []v1.Container"), instead of tripping a rule that assumed the
shape. `FREE` and the shape markers accept any field below them.
"""

from __future__ import annotations

import difflib
from typing import Final

FREE: Final = "free"
#: a map of free keys (labels, annotations, limits, nodeSelector…)
MAP: Final = "map"
#: a list of free items (command, args, env, volumes…)
LIST: Final = "list"
#: an integer (the CRDs' `type: integer`, Go's int32): `replicas: "2"` is refused, as the API
#: server refuses it ("must be of type integer")
INTEGER: Final = "integer"

Schema = dict[str, "Schema | str | list[Schema | str]"]

METADATA: Schema = {k: FREE for k in (
    "name", "namespace", "uid", "generateName", "creationTimestamp", "resourceVersion",
    "generation", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")}  # fmt: skip
METADATA.update(labels=MAP, annotations=MAP, ownerReferences=LIST, finalizers=LIST, managedFields=LIST)

RESOURCES: Schema = {"limits": MAP, "requests": MAP, "claims": LIST}

CONTAINER: Schema = {k: FREE for k in (
    "name", "image", "command", "args", "workingDir", "ports", "env", "envFrom", "volumeMounts",
    "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext",
    "stdin", "stdinOnce", "tty", "restartPolicy", "resizePolicy")}  # fmt: skip
CONTAINER["resources"] = RESOURCES
CONTAINER.update({k: LIST for k in ("command", "args", "ports", "env", "envFrom", "volumeMounts",
                                    "volumeDevices", "resizePolicy")})  # fmt: skip

MATCH_EXPRESSION: Schema = {"key": FREE, "operator": FREE, "values": LIST}
NODE_SELECTOR_TERM: Schema = {"matchExpressions": [MATCH_EXPRESSION], "matchFields": LIST}
LABEL_SELECTOR: Schema = {"matchLabels": MAP, "matchExpressions": [MATCH_EXPRESSION]}
POD_AFFINITY_TERM: Schema = {
    "labelSelector": LABEL_SELECTOR, "namespaceSelector": LABEL_SELECTOR, "namespaces": LIST,
    "topologyKey": FREE, "matchLabelKeys": LIST, "mismatchLabelKeys": LIST,
}  # fmt: skip
POD_AFFINITY: Schema = {
    "requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM],
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": FREE, "podAffinityTerm": POD_AFFINITY_TERM}
    ],
}
TOPOLOGY_SPREAD_CONSTRAINT: Schema = {
    **{k: FREE for k in ("topologyKey", "whenUnsatisfiable", "nodeAffinityPolicy", "nodeTaintsPolicy")},
    "maxSkew": INTEGER, "minDomains": INTEGER, "matchLabelKeys": LIST, "labelSelector": LABEL_SELECTOR,
}  # fmt: skip
AFFINITY: Schema = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [NODE_SELECTOR_TERM]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": FREE, "preference": NODE_SELECTOR_TERM}
        ],
    },
    "podAffinity": POD_AFFINITY,
    "podAntiAffinity": POD_AFFINITY,
}
TOLERATION: Schema = {k: FREE for k in ("key", "operator", "value", "effect", "tolerationSeconds")}

POD_SPEC: Schema = {k: FREE for k in (
    "volumes", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "dnsPolicy", "nodeSelector", "serviceAccountName", "serviceAccount",
    "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID", "hostIPC",
    "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname", "subdomain",
    "schedulerName", "hostAliases", "priorityClassName", "priority", "dnsConfig",
    "readinessGates", "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
    "resourceClaims", "resources", "ephemeralContainers")}  # fmt: skip
POD_SPEC.update({k: LIST for k in ("volumes", "imagePullSecrets", "hostAliases", "readinessGates",
                                   "schedulingGates", "resourceClaims", "ephemeralContainers")})  # fmt: skip
POD_SPEC.update(nodeSelector=MAP, overhead=MAP, priority=INTEGER, terminationGracePeriodSeconds=INTEGER,
                activeDeadlineSeconds=INTEGER)  # fmt: skip
POD_SPEC["containers"] = [CONTAINER]
POD_SPEC["initContainers"] = [CONTAINER]
POD_SPEC["affinity"] = AFFINITY
POD_SPEC["tolerations"] = [TOLERATION]
POD_SPEC["topologySpreadConstraints"] = [TOPOLOGY_SPREAD_CONSTRAINT]

POD: Schema = {"apiVersion": FREE, "kind": FREE, "metadata": METADATA, "spec": POD_SPEC,
               "status": FREE}  # fmt: skip
POD_TEMPLATE: Schema = {"metadata": METADATA, "spec": POD_SPEC}

POLICY: Schema = {"event": FREE, "events": LIST, "action": FREE, "exitCode": INTEGER, "timeout": FREE}
TASK: Schema = {k: FREE for k in ("name", "topologyPolicy", "partitionPolicy")}
TASK.update(replicas=INTEGER, minAvailable=INTEGER, maxRetry=INTEGER, dependsOn=MAP)
TASK["template"] = POD_TEMPLATE
TASK["policies"] = [POLICY]

JOB: Schema = {
    "apiVersion": FREE,
    "kind": FREE,
    "metadata": METADATA,
    "spec": {
        **{k: FREE for k in ("schedulerName", "runningEstimate", "queue", "priorityClassName")},
        **{k: INTEGER for k in ("minAvailable", "maxRetry", "ttlSecondsAfterFinished", "minSuccess")},
        "volumes": LIST,
        "plugins": MAP,
        "networkTopology": MAP,
        "tasks": [TASK],
        "policies": [POLICY],
    },
    "status": FREE,
}

PODGROUP: Schema = {
    "apiVersion": FREE,
    "kind": FREE,
    "metadata": METADATA,
    "spec": {
        **{k: FREE for k in ("queue", "priorityClassName", "subGroupPolicy")},
        "minMember": INTEGER,
        "minTaskMember": MAP,
        "minResources": MAP,
        "networkTopology": MAP,
    },
    "status": FREE,
}

QUEUE: Schema = {
    "apiVersion": FREE,
    "kind": FREE,
    "metadata": METADATA,
    "spec": {
        **{k: FREE for k in ("reclaimable", "extendClusters", "type", "parent", "dequeueStrategy")},
        **{k: MAP for k in ("capability", "deserved", "affinity", "guarantee")},
        "weight": INTEGER,
        "priority": INTEGER,
    },
    "status": FREE,
}

PRIORITY_CLASS: Schema = {k: FREE for k in (
    "apiVersion", "kind", "metadata", "value", "globalDefault", "description",
    "preemptionPolicy")}  # fmt: skip
PRIORITY_CLASS["metadata"] = METADATA
PRIORITY_CLASS["value"] = INTEGER


def unknown_fields(obj: object, schema: Schema | str | list[Schema | str], path: str) -> list[str]:
    """Paths of every field in `obj` that `schema` does not know, in document order."""
    if schema == FREE or obj is None:
        return []
    if isinstance(schema, list):
        if not isinstance(obj, list):
            return []
        out: list[str] = []
        for i, item in enumerate(obj):
            out.extend(unknown_fields(item, schema[0], f"{path}[{i}]"))
        return out
    if not isinstance(schema, dict) or not isinstance(obj, dict):
        return []
    out = []
    for key, value in obj.items():
        sub = f"{path}.{key}" if path else str(key)
        if key not in schema:
            out.append(sub)
        else:
            out.extend(unknown_fields(value, schema[key], sub))
    return out


#: what each shape is called in a refusal, and how to write it in YAML
_SHAPES = {MAP: ("a map", "a map's entries are `key: value` lines, without `- `"),
           LIST: ("a list", "a list's items each start with `- `"),
           INTEGER: ("an integer", "write the number without quotes")}  # fmt: skip


def _shape(value: object) -> str:
    """What a YAML/JSON value is, in the words of a refusal."""
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string"


def _numeral(value: object) -> bool:
    """A string that is an integer once unquoted (`"2"`)."""
    return isinstance(value, str) and value.strip().lstrip("+-").isdigit()


def wrong_types(obj: object, schema: Schema | str | list[Schema | str], path: str) -> list[tuple[str, object, str]]:
    """(path, value shown or None, rule) for every field whose shape is not the schema's, in
    document order; below a wrong one nothing more is looked at (its fields are not there)."""
    if obj is None or schema == FREE:
        return []
    want = LIST if isinstance(schema, list) else MAP if isinstance(schema, dict) else schema
    if want not in _SHAPES:
        return []
    ok = (isinstance(obj, list) if want == LIST else isinstance(obj, dict) if want == MAP
          else not isinstance(obj, bool) and (isinstance(obj, int) or (isinstance(obj, float) and obj.is_integer())))  # fmt: skip
    if not ok:
        expected, how = _SHAPES[want]
        got = _shape(obj)
        shown = obj if isinstance(obj, str | int | float) else None
        hint = f" ({how})" if {got, expected} <= {"a map", "a list"} or (want == INTEGER and _numeral(obj)) else ""
        return [(path, shown, f"must be {expected}, not {got}{hint}")]
    out: list[tuple[str, object, str]] = []
    if isinstance(schema, list) and isinstance(obj, list):
        for i, item in enumerate(obj):
            out.extend(wrong_types(item, schema[0], f"{path}[{i}]"))
    elif isinstance(schema, dict) and isinstance(obj, dict):
        for key, value in obj.items():
            if key in schema:
                out.extend(wrong_types(value, schema[key], f"{path}.{key}" if path else str(key)))
    return out


#: unknown fields users paste from somewhere in particular, and what to do about each
KNOWN_STRAYS = {
    ("Queue", "spec.policy"): "Volcano's Queue has no spec.policy (the `policy: besteffort` of a "
                              "widely copied article; an API server prunes it, or with kubectl's "
                              "strict validation refuses it): remove the line",
}


def unknown_field_rule(kind: str, schema: Schema | str | list[Schema | str], path: str) -> str:
    """The rule an unknown field breaks, with what to write instead where it can be told: a
    known stray, or the field of that object it most looks like (`resoures` → `resources`)."""
    if stray := KNOWN_STRAYS.get((kind, path)):
        return f"unknown field: {stray}"
    parent, _, key = path.rpartition(".")
    key = key.split("[", 1)[0]
    level = _schema_at(schema, parent)
    if isinstance(level, dict) and (near := difflib.get_close_matches(key, list(level), n=1, cutoff=0.75)):
        return f"unknown field; did you mean {near[0]}?"
    return "unknown field"


def _schema_at(schema: Schema | str | list[Schema | str], path: str) -> Schema | str | list[Schema | str]:
    """The sub-schema at a path `unknown_fields` gave (`spec.containers[0].resources`)."""
    for part in path.split(".") if path else ():
        name = part.split("[", 1)[0]
        if not isinstance(schema, dict) or name not in schema:
            return FREE
        schema = schema[name]
        if "[" in part and isinstance(schema, list):
            schema = schema[0]
    return schema
