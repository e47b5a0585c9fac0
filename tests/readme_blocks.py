"""The README's code blocks as the tests run them: fenced blocks with the section each
sits in, commands joined across `\\` continuations, and `seglog local up`'s default
ports (9092-9094, 9192-9194, 9292-9294, 9392-9394) moved to a base port of the test's
own, since other clusters may run on this machine."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# 9XY with X the listener (0 Kafka, 1 gRPC, 2 controller, 3 metrics) and Y the node.
_LOCAL_PORT = re.compile(r"\b9([0-3])9([2-4])\b")


@dataclass(frozen=True)
class Block:
    section: str  # the nearest heading above, without the #s
    lang: str  # the fence's info string: sh, python, ...
    text: str


def blocks(path: Path = README) -> list[Block]:
    out: list[Block] = []
    section = ""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.startswith("```"):
            lang = line[3:].strip()
            end = lines.index("```", i + 1)
            out.append(Block(section, lang, "\n".join(lines[i + 1 : end]) + "\n"))
            i = end
        i += 1
    return out


def section_blocks(section: str, lang: str | None = None) -> list[Block]:
    found = [b for b in blocks() if b.section == section and (lang is None or b.lang == lang)]
    assert found, f"README.md has no {lang or ''} block under {section!r}"
    return found


def commands(block: Block) -> list[str]:
    """One shell command per line, `\\`-continued lines joined."""
    out: list[str] = []
    pending = ""
    for line in block.text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command:
            out.append(command)
    return out


def with_ports(text: str, base_port: int) -> str:
    """The README's local ports moved to `base_port`, and `seglog local up` told so."""
    moved = _LOCAL_PORT.sub(
        lambda m: str(base_port + int(m.group(1)) * 100 + int(m.group(2)) - 2), text
    )
    return moved.replace("seglog local up", f"seglog local up --base-port {base_port}")
