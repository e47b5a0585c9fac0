"""Java `.properties` syntax, as `java.util.Properties.load` reads it (e.g. `server.properties`).

One deliberate difference: unescaped trailing whitespace of a value is dropped. Java keeps
it, but Kafka's ConfigDef trims every non-password value before use, so the effect is the
same and readers of our dict need not strip. An escaped trailing space (`\\ `) is kept.
"""

from __future__ import annotations

import re

from .errors import InvalidConfigError

# Java's Properties treats only these as whitespace; \r and \n end a line.
_WS = " \t\f"
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse `.properties` text into a dict; a repeated key keeps its last value."""
    result: dict[str, str] = {}
    for lineno, logical in _logical_lines(text):
        key, value = _split_key_value(logical, lineno)
        result[key] = value
    return result


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash-continued natural lines; drop blank and comment lines."""
    out: list[tuple[int, str]] = []
    natural = _NATURAL_LINES.split(text)
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_WS)
        start = i + 1
        i += 1
        # A comment line is never continued, even if it ends in a backslash.
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(natural):
                break
            # Continuation lines lose their leading whitespace and cannot be comments
            # (an empty one simply ends the logical line).
            line = natural[i].lstrip(_WS)
            i += 1
        out.append((start, "".join(parts)))
    return out


def _split_key_value(line: str, lineno: int) -> tuple[str, str]:
    key_end = len(line)
    value_start = len(line)
    escaped = False
    has_sep = False
    for pos, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "=:":
            key_end, value_start, has_sep = pos, pos + 1, True
            break
        elif ch in _WS:
            key_end, value_start = pos, pos + 1
            break
    # After a whitespace-terminated key, one '=' or ':' may still follow the blanks.
    while value_start < len(line) and line[value_start] in _WS:
        value_start += 1
    if not has_sep and value_start < len(line) and line[value_start] in "=:":
        value_start += 1
        while value_start < len(line) and line[value_start] in _WS:
            value_start += 1
    key = _unescape(line[:key_end], lineno)
    value = _unescape(line[value_start:], lineno)
    return key, value


def _unescape(raw: str, lineno: int) -> str:
    chars: list[str] = []
    keep = 0  # length of `chars` up to the last character that must survive trimming
    pos = 0
    while pos < len(raw):
        ch = raw[pos]
        pos += 1
        if ch != "\\":
            chars.append(ch)
            if ch not in _WS:
                keep = len(chars)
            continue
        if pos >= len(raw):
            break  # a lone trailing backslash (end of input) is dropped, as in Java
        ch = raw[pos]
        pos += 1
        if ch == "u":
            digits = raw[pos : pos + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise InvalidConfigError(f"Malformed \\uxxxx encoding on line {lineno}")
            chars.append(chr(int(digits, 16)))
            pos += 4
        else:
            chars.append(_ESCAPES.get(ch, ch))
        keep = len(chars)
    return "".join(chars[:keep])
