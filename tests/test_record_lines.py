"""parse_record_line: what a line may hold, and where the report says a bad one went wrong.

The strings of a line are searched for a NUL or an unpaired surrogate only when its JSON
text holds a \\u escape that could make one; these pin the reasons either way."""

import json

import pytest

from k12vista.text import BadLine, parse_record_line, unstorable_reason


@pytest.fixture(autouse=True)
def _english(english):
    """The reasons are read in English here."""


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (r'{"a": [{"b": "x\u0000"}]}', "a[0].b: a NUL character (\\u0000) at character 2, which cannot be stored"),
        (r'{"a": {"k\u0000": 1}}', "the name 'a.k': a NUL character (\\u0000) at character 2, which cannot be stored"),
        (r'{"t": "\uD835x"}', "t: an unpaired surrogate at character 1, which cannot be stored"),
        (r'["ok", "\udc65"]', "[1]: an unpaired surrogate at character 1, which cannot be stored"),
        (r'"\u0000"', "the record: a NUL character (\\u0000) at character 1, which cannot be stored"),
    ],
)
def test_a_nul_or_an_unpaired_surrogate_is_refused_with_where_it_is(line, reason):
    with pytest.raises(BadLine) as refused:
        parse_record_line(line.encode())
    assert str(refused.value) == reason


@pytest.mark.parametrize(
    "line",
    [
        r'{"t": "\\u0000 is how JSON writes a NUL; \\ud835 half a pair"}',  # escaped backslashes: plain text
        r'{"t": "\ud835\udc65"}',  # a whole pair: 𝑥
        json.dumps({"t": "电阻为___欧", "img": "QUJD" * 5000}, ensure_ascii=False),  # no escape at all
    ],
)
def test_text_that_only_looks_unstorable_is_kept(line):
    assert isinstance(parse_record_line(line.encode()), dict)


def test_nesting_is_checked_even_where_no_string_needs_searching():
    line = json.dumps({"t": "plain", "deep": json.loads("[" * 70 + "]" * 70)})
    with pytest.raises(BadLine, match="nested deeper than 64 levels"):
        parse_record_line(line.encode())
    assert unstorable_reason({"t": "\x00"}, strings=False) is None
    assert unstorable_reason([[[[["\x00"]]]]], strings=True) == (
        "[0][0][0][0][0]: a NUL character (\\u0000) at character 1, which cannot be stored"
    )
