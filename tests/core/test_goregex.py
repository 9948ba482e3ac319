"""HyperNode regexMatch patterns read as Go's regexp (RE2) reads them (services/core/goregex.py):
what Python's `re` lacks is rewritten, what Go refuses is refused in Go's words."""

from __future__ import annotations

import pytest

from services.core.goregex import GoRegexError, compile_go


@pytest.mark.parametrize(("pattern", "matches", "misses"), [
    (r"^rack1-n-[[:digit:]]+$", ["rack1-n-0", "rack1-n-12"], ["rack1-n-x", "rack1-n-0\n"]),
    (r"^rack1-n-\d+\z", ["rack1-n-7"], ["rack1-n-7\n"]),
    (r"^n[[:^digit:]]$", ["nx"], ["n1"]),
    (r"\Aa\Q.b\E$", ["a.b"], ["axb"]),
    (r"^a(?i)B|c$", ["ab", "aB", "C"], ["Ab"]),  # Go: flags to the end of the group, both sides
    (r"^x{,3}$", ["x{,3}"], ["xx"]),  # not a repeat in Go: literal
    (r"^(?<rack>r[0-9])-", ["r1-n"], ["rx-n"]),
    (r"^\x{41}\101$", ["AA"], ["A"]),
    (r"^\d$", ["7"], ["٣"]),  # Go's \d is ASCII
    (r"(?m)^b$", ["a\nb"], ["ab"]),
])  # fmt: skip
def test_go_syntax_python_lacks_is_rewritten(pattern: str, matches: list[str], misses: list[str]) -> None:
    r = compile_go(pattern)
    assert [bool(r.search(s)) for s in matches] == [True] * len(matches)
    assert [bool(r.search(s)) for s in misses] == [False] * len(misses)


@pytest.mark.parametrize(("pattern", "words"), [
    (r"(a)\1", "invalid escape sequence: `\\1`"),  # backreference
    (r"a(?=b)", "invalid or unsupported Perl syntax: `(?=`"),
    (r"a(?!b)", "invalid or unsupported Perl syntax: `(?!`"),
    (r"(?<=a)b", "invalid named capture: `(?<=a)b`"),
    (r"(?>a)", "invalid or unsupported Perl syntax: `(?>`"),
    (r"(?x)a b", "invalid or unsupported Perl syntax: `(?x`"),
    (r"(?#note)a", "invalid or unsupported Perl syntax: `(?#`"),
    (r"a\Z", "invalid escape sequence: `\\Z`"),
    (r"a*+", "invalid nested repetition operator: `*+`"),
    (r"a{1001}", "invalid repeat count: `{1001}`"),
    (r"[z-a]", "invalid character class range: `z-a`"),
    (r"[[:foo:]]", "invalid character class range: `[:foo:]`"),
    (r"(a", "missing closing ): `(a`"),
    (r"[ab", "missing closing ]: `[ab`"),
])  # fmt: skip
def test_what_go_refuses_is_refused_in_its_words(pattern: str, words: str) -> None:
    with pytest.raises(GoRegexError) as got:
        compile_go(pattern)
    assert str(got.value) == f"error parsing regexp: {words}" and not got.value.unsupported


@pytest.mark.parametrize("pattern", [r"\pL", r"\p{Greek}", r"(?U)a+"])
def test_valid_re2_python_cannot_express_is_said_to_be_so(pattern: str) -> None:
    with pytest.raises(GoRegexError) as got:
        compile_go(pattern)
    assert got.value.unsupported and "is valid RE2 but has no equivalent" in str(got.value)
