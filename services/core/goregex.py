"""Go's `regexp` (RE2 syntax) read for Python's `re`: a HyperNode's `regexMatch` pattern means
what Volcano's `regexp.Compile`/`MatchString` make of it (webhook
`admission/hypernodes/validate/admit_hypernode.go`, cache `api/hyper_node_info.go` GetMembers).

`translate` rewrites the pattern into an equivalent Python one, or raises `GoRegexError`:
- for what Go refuses, in Go's words (`error parsing regexp: invalid escape sequence: `\\1``) —
  Python accepts several of them: backreferences, lookahead and lookbehind, atomic groups,
  possessive repeats, `(?x)`, `(?#…)`, `\\Z`, `\\G`, a repeat count over 1000;
- for valid RE2 Python cannot express (`\\p{Greek}`, `(?U)`), saying so (`unsupported`).

What Python lacks and Go has is rewritten: POSIX classes (`[[:digit:]]`, `[[:^space:]]`), `\\z`,
`\\Q…\\E`, `\\x{…}`, octal `\\123`, `(?<name>…)`, flags in mid-pattern (`a(?i)b`, scoped to the
rest of the group as Go does), `(?)`, `{` that is no repeat (a literal in Go), and Go's
ASCII-only `\\d`, `\\s`, `\\w`. `$` without `m` is the end of the text only (`\\Z`), as in Go.
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_RUNE = 0x10FFFF
_Ranges = list[tuple[int, int]]

_DIGIT: _Ranges = [(0x30, 0x39)]
_SPACE: _Ranges = [(0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)]  # Go's \s: [\t\n\f\r ]
_WORD: _Ranges = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_PERL = {"d": _DIGIT, "s": _SPACE, "w": _WORD}
_POSIX: dict[str, _Ranges] = {  # Go regexp/syntax perl_groups.go
    "alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "ascii": [(0x00, 0x7F)],
    "blank": [(0x09, 0x09), (0x20, 0x20)],
    "cntrl": [(0x00, 0x1F), (0x7F, 0x7F)],
    "digit": [(0x30, 0x39)],
    "graph": [(0x21, 0x7E)],
    "lower": [(0x61, 0x7A)],
    "print": [(0x20, 0x7E)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
    "space": [(0x09, 0x0D), (0x20, 0x20)],
    "upper": [(0x41, 0x5A)],
    "word": _WORD,
    "xdigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


class GoRegexError(ValueError):
    """A pattern Go refuses (`unsupported` False: the message is Go's) or valid RE2 that
    Python's `re` cannot express (`unsupported` True)."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def _go(code: str, expr: str) -> GoRegexError:
    return GoRegexError(f"error parsing regexp: {code}: `{expr}`")


def _unsupported(what: str) -> GoRegexError:
    return GoRegexError(f"{what} is valid RE2 but has no equivalent in Tessera's matcher",
                        unsupported=True)  # fmt: skip


def _char(c: int) -> str:
    if c < 0x80 and chr(c).isalnum():
        return chr(c)
    if c < 0x100:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def _negate(ranges: _Ranges) -> _Ranges:
    out, lo = [], 0
    for a, b in sorted(ranges):
        if a > lo:
            out.append((lo, a - 1))
        lo = max(lo, b + 1)
    if lo <= MAX_RUNE:
        out.append((lo, MAX_RUNE))
    return out


def _class(ranges: _Ranges) -> str:
    if not ranges:
        return "(?!)"  # an empty class matches nothing
    body = "".join(_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in sorted(ranges))
    return f"[{body}]"


def _escape(p: str, i: int, in_class: bool) -> tuple[int, object]:
    """The escape at p[i] == '\\': (next index, a rune int | ranges list | python text)."""
    if i + 1 >= len(p):
        raise _go("trailing backslash at end of expression", "")
    c = p[i + 1]
    j = i + 2
    if c in "1234567" and not (j < len(p) and p[j] in "01234567"):
        raise _go("invalid escape sequence", p[i:j])  # a backreference: RE2 has none
    if c in "01234567":
        while j < len(p) and j < i + 4 and p[j] in "01234567":
            j += 1
        return j, int(p[i + 1 : j], 8)
    if c == "x":
        if j < len(p) and p[j] == "{":
            end = p.find("}", j)
            digits = p[j + 1 : end] if end > 0 else ""
            if end < 0 or not digits or not all(d in "0123456789abcdefABCDEF" for d in digits) \
                    or int(digits, 16) > MAX_RUNE:  # fmt: skip
                raise _go("invalid escape sequence", p[i : (end + 1 if end > 0 else len(p))])
            return end + 1, int(digits, 16)
        digits = p[j : j + 2]
        if len(digits) < 2 or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise _go("invalid escape sequence", p[i : j + len(digits)])
        return j + 2, int(digits, 16)
    simple = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
    if c in simple:
        return j, simple[c]
    if c.lower() in _PERL:
        ranges = _PERL[c.lower()]
        return j, (_negate(ranges) if c.isupper() else list(ranges))
    if c in "pP":
        end = p.find("}", j) + 1 if j < len(p) and p[j] == "{" else j + 1
        raise _unsupported(f"the Unicode class {p[i:end]}")
    if not in_class:
        if c in "bBA":
            return j, f"\\{c}"
        if c == "z":
            return j, r"\Z"
        if c == "Q":
            end = p.find(r"\E", j)
            text = p[j:] if end < 0 else p[j:end]
            return (len(p) if end < 0 else end + 2), "".join(_char(ord(x)) for x in text)
    if ord(c) < 0x80 and not c.isalnum():
        return j, ord(c)
    raise _go("invalid escape sequence", p[i:j])


def _parse_class(p: str, i: int) -> tuple[int, str]:
    """The class opening at p[i] == '[': (the index past it, its Python form)."""
    start = i
    i += 1
    negated = i < len(p) and p[i] == "^"
    if negated:
        i += 1
    ranges: _Ranges = []
    first = True

    def one(k: int) -> tuple[int, object]:
        if k >= len(p):
            raise _go("missing closing ]", p[start:])
        if p[k] == "\\":
            return _escape(p, k, in_class=True)
        return k + 1, ord(p[k])

    while first or (i < len(p) and p[i] != "]"):
        if i >= len(p):
            raise _go("missing closing ]", p[start:])
        first = False
        if p.startswith("[:", i):
            end = p.find(":]", i + 2)
            if end >= 0:
                name = p[i + 2 : end]
                neg = name.startswith("^")
                got = _POSIX.get(name[1:] if neg else name)
                if got is None:
                    raise _go("invalid character class range", p[i : end + 2])
                ranges += _negate(got) if neg else got
                i = end + 2
                continue
        at = i
        i, lo = one(i)
        if isinstance(lo, list):
            ranges += lo
            continue
        assert isinstance(lo, int)
        hi = lo
        if i + 1 < len(p) and p[i] == "-" and p[i + 1] != "]":
            i, hi_ = one(i + 1)
            if not isinstance(hi_, int) or hi_ < lo:
                raise _go("invalid character class range", p[at:i])
            hi = hi_
        ranges.append((lo, hi))
    if i >= len(p):
        raise _go("missing closing ]", p[start:])
    return i + 1, _class(_negate(ranges) if negated else ranges)


def translate(p: str) -> str:
    """The Python pattern matching what Go's regexp matches with `p`."""
    out: list[str] = []
    # per open group: (the scoped flag groups opened in it by `(?flags)`, multiline in force)
    levels: list[tuple[list[str], bool]] = [([], False)]
    i = 0
    quantified = False  # the last thing written was a repeat (Go refuses a repeat of one)

    def quantifier(i: int, op: str) -> int:
        nonlocal quantified
        if quantified or not out:
            code = "invalid nested repetition operator" if quantified else "missing argument to repetition operator"
            raise _go(code, (out[-1] if quantified else "") + op)
        out.append(op)
        if i < len(p) and p[i] == "?":
            out[-1] += "?"
            i += 1
        quantified = True
        return i

    while i < len(p):
        c = p[i]
        if c in "*+?":
            i = quantifier(i + 1, c)
            continue
        if c == "{" and (m := _REPEAT.match(p, i)):
            lo, hi = int(m.group(1)), m.group(3)
            if lo > 1000 or (hi and (int(hi) > 1000 or int(hi) < lo)):
                raise _go("invalid repeat count", m.group(0))
            i = quantifier(m.end(), m.group(0))
            continue
        quantified = False
        if c == "\\":
            i, got = _escape(p, i, in_class=False)
            out.append(got if isinstance(got, str) else _class(got) if isinstance(got, list) else _char(got))
        elif c == "[":
            i, got_class = _parse_class(p, i)
            out.append(got_class)
        elif c == "(":
            if not p.startswith("(?", i):
                levels.append(([], levels[-1][1]))
                out.append("(")
                i += 1
                continue
            if p.startswith("(?P<", i) or p.startswith("(?<", i):
                begin = i + (4 if p[i + 2] == "P" else 3)
                end = p.find(">", begin)
                name = p[begin:end] if end >= 0 else ""
                if end < 0 or not name or not all(x.isascii() and (x.isalnum() or x == "_") for x in name):
                    raise _go("invalid named capture", p[i : end + 1] if end >= 0 else p[i:])
                levels.append(([], levels[-1][1]))
                out.append(f"(?P<{name}>")
                i = end + 1
                continue
            j, on, off, sign, saw = i + 2, "", "", 1, False
            while True:
                if j >= len(p):
                    raise _go("missing closing )", p[i:])
                x = p[j]
                j += 1
                if x in "imsU":
                    if x == "U":
                        raise _unsupported("the flag U (ungreedy)")
                    if sign > 0:
                        on += x
                    else:
                        off += x
                    saw = True
                elif x == "-" and sign > 0:
                    sign, saw = -1, False
                elif x in ":)" and not (sign < 0 and not saw):
                    break
                else:
                    raise _go("invalid or unsupported Perl syntax", p[i:j])
            flags = on + (f"-{off}" if off else "")
            multiline = ("m" in on) or (levels[-1][1] and "m" not in off)
            if x == ":":
                levels.append(([], multiline))
                out.append(f"(?{flags}:")
            elif flags:  # flags for the rest of this group: a scoped group closed with it
                opener = f"(?{flags}:"
                scoped, _ = levels[-1]
                levels[-1] = ([*scoped, opener], multiline)
                out.append(opener)
            i = j
            continue
        elif c == ")":
            if len(levels) == 1:
                raise _go("unexpected )", p)
            scoped, _ = levels.pop()
            out.append(")" * len(scoped) + ")")
            i += 1
            quantified = False
            continue
        elif c == "|":
            scoped, _ = levels[-1]
            out.append(")" * len(scoped) + "|" + "".join(scoped))
            i += 1
            continue
        elif c == "$":
            out.append("$" if levels[-1][1] else r"\Z")
            i += 1
        else:
            out.append(re.escape(c) if c in "{}#&~ \t\n\r\f\v" else c)
            i += 1
    if len(levels) > 1:
        raise _go("missing closing )", p)
    return "".join(out) + ")" * len(levels[0][0])


@lru_cache(maxsize=512)
def compile_go(pattern: str) -> re.Pattern[str]:
    """`pattern` as Go's regexp.Compile reads it (GoRegexError if Go refuses it or Python
    cannot express it)."""
    python = translate(pattern)
    try:
        return re.compile(python)
    except re.error as exc:  # a translation gap: said, not guessed
        raise GoRegexError(f"error parsing regexp: {exc}: `{pattern}`") from exc
