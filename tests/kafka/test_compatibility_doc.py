"""docs/compatibility.md's API table is the Kafka listener's own (node/kafka/codec.py)
and Kafka 4.0's ranges (kafka-python's table of what a 4.0 broker advertises)."""

from __future__ import annotations

import re
from pathlib import Path

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from seglog.node.kafka.codec import APIS

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")


def _range(text: str) -> tuple[int, int] | None:
    text = text.strip()
    if text in ("—", "not listed"):
        return None
    low, high = text.split("-")
    return int(low), int(high)


def test_the_api_table_is_the_listeners_own():
    text = DOC.read_text()
    table = text[text.index("<!-- api-table") : text.index("<!-- end api-table")]
    rows = {int(m[1]): m for m in map(ROW.match, table.splitlines()) if m}
    kafka_40 = BROKER_API_VERSIONS[(4, 0)]
    assert set(APIS) <= set(rows), "an API the listener serves is missing from the doc"
    assert set(kafka_40) <= set(rows), "a Kafka 4.0 API is missing from the doc"
    for key, m in rows.items():
        spec = APIS.get(key)
        assert _range(m[3]) == kafka_40.get(key), f"API {key}: Kafka 4.0's range"
        if spec is None:
            assert (m[4].strip(), m[5].strip()) == ("—", "—"), f"API {key} is not served"
            continue
        assert m[2] == spec.name
        advertised = spec.advertised if spec.listed else None
        assert _range(m[4]) == advertised, f"{spec.name}: advertised"
        assert m[4].strip() != "not listed" or not spec.listed
        assert _range(m[5]) == spec.served, f"{spec.name}: served"
