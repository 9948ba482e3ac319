"""The Kubernetes API server's name rules, with its own error texts.

Every name Tessera accepts ends up in a log subject, a slice owner key and a pod name, so it
must be exactly as constrained as on a real cluster: a name the API server refuses must not
reach the log here either (issue 12: `a/b` was accepted and its owner key `<ns>/a/b/<task>`
collided with pod `a`'s prefix). The texts are apimachinery's `IsDNS1123Subdomain`,
`IsDNS1123Label` and `IsQualifiedName` (`k8s.io/apimachinery/pkg/util/validation`), so a user
sees the message `kubectl apply` would print.

Which rule applies where (as the API server and Volcano's webhook use them):
- Pod, PodGroup, Queue, PriorityClass, Volcano Job `metadata.name`: DNS-1123 subdomain (≤ 253);
- `metadata.namespace`: DNS-1123 label (≤ 63);
- Volcano task names: DNS-1123 label (the job webhook, `admit_job.go`);
- Volcano job names and the pods a job creates (`<job>-<task>-<index>`): also a qualified name,
  whose name part is at most 63 characters (`validateJobName`, `validateK8sPodNameLength`).
"""

from __future__ import annotations

import re

LABEL_MAX = 63
SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL = re.compile(_LABEL_FMT)
_SUBDOMAIN = re.compile(_SUBDOMAIN_FMT)
_QUALIFIED = re.compile(_QUALIFIED_FMT)

_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_QUALIFIED_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's `RegexError`: the rule, examples, then the regex (its spacing kept)."""
    shown = "".join((" or " if i else "") + f"'{e}', " for i, e in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def dns1123_label(value: str) -> list[str]:
    """Why `value` is not a DNS-1123 label ([] when it is)."""
    errs: list[str] = []
    if len(value) > LABEL_MAX:
        errs.append(max_len_error(LABEL_MAX))
    if not _LABEL.fullmatch(value):
        if _SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, _LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """Why `value` is not a DNS-1123 subdomain ([] when it is)."""
    errs: list[str] = []
    if len(value) > SUBDOMAIN_MAX:
        errs.append(max_len_error(SUBDOMAIN_MAX))
    if not _SUBDOMAIN.fullmatch(value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errs


def qualified_name(value: str) -> list[str]:
    """Why `value` is not a qualified name (`[prefix/]name`, name part ≤ 63) ([] when it is)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_MSG, _QUALIFIED_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED.fullmatch(name):
        errs.append(
            "name part " + _regex_error(_QUALIFIED_MSG, _QUALIFIED_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value(value: str) -> list[str]:
    """Why `value` is not a label value (empty, or a name part ≤ 63) ([] when it is)."""
    errs: list[str] = []
    if len(value) > LABEL_MAX:
        errs.append(max_len_error(LABEL_MAX))
    if value and not _QUALIFIED.fullmatch(value):
        errs.append("a valid label " + _regex_error(_QUALIFIED_MSG, _QUALIFIED_FMT, "MyValue", "my_value", "12345"))
    return errs


_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY = re.compile(_CONFIG_KEY_FMT)


def config_key(value: str) -> list[str]:
    """Why `value` is not a ConfigMap or Secret key ([] when it is)."""
    errs: list[str] = []
    if len(value) > SUBDOMAIN_MAX:
        errs.append(max_len_error(SUBDOMAIN_MAX))
    if not _CONFIG_KEY.fullmatch(value):
        errs.append(_regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                 _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))  # fmt: skip
    if value in (".", ".."):
        errs.append("must not be '.' or '..'")
    return errs


def go_list(errs: list[str]) -> str:
    """Go's `%v` of a `[]string`, as Volcano's webhook prints its validation messages."""
    return "[" + " ".join(errs) + "]"
