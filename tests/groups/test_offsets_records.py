"""The `__consumer_offsets` records byte for byte as Kafka lays them out, the group's
partition by Java's String.hashCode, and `seglog dump-log --offsets-decoder`."""

import json
import struct
import subprocess
import sys

import pytest

from seglog.node.groups import offsets_records as rec
from seglog.storage.record_batch import NewRecord, build_batch


def kstr(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_offset_commit_key_and_value_layout():
    key = rec.encode_key(rec.OffsetCommitKey("g", "t", 3))
    assert key == struct.pack(">h", 1) + kstr("g") + kstr("t") + struct.pack(">i", 3)
    value = rec.encode_value(rec.OffsetCommitValue(42, 7, "meta", 1000))
    assert value == struct.pack(">hqi", 3, 42, 7) + kstr("meta") + struct.pack(">q", 1000)
    assert rec.decode_offset_commit(value) == rec.OffsetCommitValue(42, 7, "meta", 1000)
    # Version 1 (with an expire timestamp) has no leader epoch.
    v1 = rec.encode_value(rec.OffsetCommitValue(42, -1, "", 1000, 2000))
    assert v1 == struct.pack(">hq", 1, 42) + kstr("") + struct.pack(">qq", 1000, 2000)
    assert rec.decode_offset_commit(v1).expire_timestamp == 2000


def test_group_metadata_layout_and_roundtrip():
    key = rec.encode_key(rec.GroupMetadataKey("grp"))
    assert key == struct.pack(">h", 2) + kstr("grp")
    member = rec.MemberMetadata("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"sub", b"as")
    value = rec.GroupMetadataValue("consumer", 5, "range", "m-1", 123, (member,))
    data = rec.encode_value(value)
    expected = (
        struct.pack(">h", 3)
        + kstr("consumer")
        + struct.pack(">i", 5)
        + kstr("range")
        + kstr("m-1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + kstr("m-1")
        + struct.pack(">h", -1)  # null group.instance.id
        + kstr("client")
        + kstr("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 2)
        + b"as"
    )
    assert data == expected
    assert rec.decode_group_metadata(data) == value


def test_bad_records_are_named():
    with pytest.raises(rec.OffsetsRecordError, match="unknown key version 9"):
        rec.decode_key(struct.pack(">h", 9) + kstr("g"))
    with pytest.raises(rec.OffsetsRecordError, match="trailing"):
        rec.decode_key(rec.encode_key(rec.GroupMetadataKey("g")) + b"x")
    with pytest.raises(rec.OffsetsRecordError, match="version 4 is not served"):
        rec.decode_offset_commit(struct.pack(">h", 4) + b"\x00" * 20)


def test_partition_for_uses_java_hash_and_kafka_abs():
    assert rec.java_string_hash("hello") == 99162322  # "hello".hashCode()
    assert rec.java_string_hash("") == 0
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Kafka's Utils.abs gives 0.
    assert rec.java_string_hash("polygenelubricants") == -(2**31)
    assert rec.partition_for("polygenelubricants", 50) == 0
    # UTF-16 code units: a character beyond the BMP counts as its two surrogates.
    assert rec.java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    negative = next(g for g in (str(i) * 9 for i in range(1, 100)) if rec.java_string_hash(g) < 0)
    assert rec.partition_for(negative, 50) == abs(rec.java_string_hash(negative)) % 50


def test_dump_log_offsets_decoder(tmp_path):
    records = [
        NewRecord(
            rec.encode_value(rec.OffsetCommitValue(10, 2, "m", 1000)),
            rec.encode_key(rec.OffsetCommitKey("g", "t", 0)),
        ),
        NewRecord(None, rec.encode_key(rec.OffsetCommitKey("g", "t", 1))),
        NewRecord(
            rec.encode_value(rec.GroupMetadataValue("consumer", 1, "range", "m", 5, ())),
            rec.encode_key(rec.GroupMetadataKey("g")),
        ),
    ]
    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    seg = d / "00000000000000000000.log"
    seg.write_bytes(build_batch(records, now_ms=1))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "seglog.cli",
            "dump-log",
            "--files",
            str(seg),
            "--offsets-decoder",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line for line in out.splitlines() if "key: " in line]
    assert len(lines) == 3, out
    key, payload = lines[0].split(" key: ")[1].split(" payload: ")
    assert json.loads(key) == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 0}}
    assert json.loads(payload) == {
        "version": "3",
        "data": {"offset": 10, "leaderEpoch": 2, "metadata": "m", "commitTimestamp": 1000},
    }
    assert lines[1].endswith("payload: <DELETE>")
    group = json.loads(lines[2].split(" payload: ")[1])
    assert group["data"]["protocol"] == "range" and group["data"]["generation"] == 1
