"""Java .properties parsing (java.util.Properties.load rules) for server.properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import LogConfig
from seglog.storage.properties_file import parse_properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a b", {"a": "b"}),
        ("a\tb", {"a": "b"}),
        ("a = b", {"a": "b"}),
        ("a   :   b", {"a": "b"}),
        ("  \t a=b", {"a": "b"}),
        ("a==b", {"a": "=b"}),  # only the first separator is one
        ("a b=c", {"a": "b=c"}),  # whitespace ended the key; '=' is part of the value
        ("a = =b", {"a": "=b"}),
        ("url=http://host:9092/x=y", {"url": "http://host:9092/x=y"}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("key   ", {"key": ""}),
        ("=value", {"": "value"}),
        ("a=b   \t", {"a": "b"}),  # unescaped trailing whitespace dropped
        ("a=b\\ ", {"a": "b "}),  # an escaped space survives
        ("a=  b  c  ", {"a": "b  c"}),
    ],
)
def test_separators_and_whitespace(text, expected):
    assert parse_properties(text) == expected


def test_comments_and_blank_lines():
    text = "# comment\n! also a comment\n   # indented comment\n\n   \n\t\na=1\n#b=2\n"
    assert parse_properties(text) == {"a": "1"}


def test_hash_inside_a_value_is_not_a_comment():
    assert parse_properties("a=b # not a comment") == {"a": "b # not a comment"}


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline):
    text = newline.join(["a=1", "# c", "b=2", "c=3\\", "   4"]) + newline
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "34"}


def test_continuation_strips_leading_whitespace_of_next_line():
    text = "log.dirs=/a,\\\n         /b,\\\n         /c\nx=y"
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "x": "y"}


def test_continuation_line_starting_with_hash_is_not_a_comment():
    assert parse_properties("a=b\\\n#c") == {"a": "b#c"}


def test_comment_line_ending_in_backslash_does_not_continue():
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_even_number_of_backslashes_does_not_continue():
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    assert parse_properties("a=x\\\\\\\n y") == {"a": "x\\y"}


def test_empty_continuation_line_ends_the_logical_line():
    assert parse_properties("a=b\\\n\nc=d") == {"a": "b", "c": "d"}
    assert parse_properties("a=b\\\n   \nc=d") == {"a": "b", "c": "d"}


def test_backslash_at_end_of_input():
    assert parse_properties("a=b\\") == {"a": "b"}


def test_continuation_of_key():
    assert parse_properties("lo\\\n  ng.key=v") == {"long.key": "v"}


def test_escapes():
    text = "tab=a\\tb\nnl=a\\nb\ncr=a\\rb\nff=a\\fb\nuni=\\u00e9t\\u00E9\nother=\\q\\\\\\#"
    assert parse_properties(text) == {
        "tab": "a\tb",
        "nl": "a\nb",
        "cr": "a\rb",
        "ff": "a\fb",
        "uni": "été",
        "other": "q\\#",
    }


def test_escaped_separators_in_keys():
    assert parse_properties("a\\=b=c") == {"a=b": "c"}
    assert parse_properties("a\\:b:c") == {"a:b": "c"}
    assert parse_properties("a\\ b c") == {"a b": "c"}


def test_escaped_leading_space_in_value_is_kept():
    assert parse_properties("a=\\  b") == {"a": "  b"}


@pytest.mark.parametrize("text", ["a=\\u12", "a=\\uzzzz", "a\\u00g0=b"])
def test_malformed_unicode_escape_raises(text):
    with pytest.raises(InvalidConfigError, match="Malformed"):
        parse_properties(text)


def test_repeated_key_keeps_last_value():
    assert parse_properties("a=1\na=2") == {"a": "2"}


def test_empty_input():
    assert parse_properties("") == {}
    assert parse_properties("\n\n# only comments\n") == {}


def test_server_properties_feed_log_config():
    text = """
# Kafka-style server.properties
node.id=1
log.dirs=/tmp/a,\\
    /tmp/b
log.segment.bytes = 1048576
log.retention.hours: 24
log.retention.ms   60000
log.cleanup.policy=compact, delete
"""
    props = parse_properties(text)
    assert props["log.dirs"] == "/tmp/a,/tmp/b"
    config = LogConfig.from_broker(props)
    assert config.segment_bytes == 1048576
    assert config.retention_ms == 60000
    assert config.cleanup_policy == ("compact", "delete")


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch in "\\=:#!" or (ch == " " and (is_key or i == 0 or i == len(s) - 1)):
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        else:
            out.append(ch)
    return "".join(out)


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_TEXT.filter(bool), _TEXT, max_size=6))
def test_escaped_round_trip(mapping):
    text = "\n".join(f"{_escape(k, True)}={_escape(v, False)}" for k, v in mapping.items())
    assert parse_properties(text) == mapping
