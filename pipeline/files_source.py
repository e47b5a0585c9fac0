"""The `seglog-files` Spark data source: partitions read straight from their
directories, offline, with the `seglog` schema.

    spark.read.format("seglog-files").load("/data/logs-a,/data/logs-b")
    spark.read.format("seglog-files").option("topics", "events").load("/data/logs-a")

`path` is one or more log directories (each holding `<topic>-<n>/` directories;
a partition directory itself works too), comma-separated. Options: `topics`
(comma-separated; default every topic except `__cluster_metadata`),
`includeHeaders`, `maxBytesPerPartition` (default 128 MiB: a partition directory
larger than that is split along segment boundaries into several input partitions).

Nothing is opened for writing: `.log` files are read in chunks (`rb`) and framed
with `record_batch.iter_batches` (CRC-checked) and decoded a chunk at a time by
`arrow_decode` (no Python object per record); the index
files are not needed. Rows are the committed records: offsets from the log
start offset (log-start-offset-checkpoint) up to the high watermark
(replication-offset-checkpoint), both optional; a partial batch at the end of a
segment (a torn write) is ignored. Control batches carry no rows. Read a stopped
node's directories, or a copy: a live node may roll, delete or truncate
segments while they are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from seglog.storage.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from seglog.storage.errors import StorageError
from seglog.storage.log import parse_partition_dir
from seglog.storage.record_batch import LOG_OVERHEAD, BatchHeader, iter_batches

from .arrow_decode import Columns, decode_batches
from .schema import record_batch, spark_schema

DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
READ_CHUNK_BYTES = 8 * 1024 * 1024
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
# Renamed partitions (deletion, moves between dirs) and the metadata log are not data.
_SPECIAL_DIR = re.compile(r"^\S+-\S+\.\S+-(delete|future|stray)$")
_SKIPPED_TOPICS = frozenset({"__cluster_metadata"})


@dataclass(frozen=True)
class SegmentFiles(InputPartition):
    """Some consecutive segments of one partition, and the offsets to return from them."""

    topic: str
    partition: int
    files: tuple[str, ...]
    start: int  # rows with offsets in [start, end); end None: to the end of the files
    end: int | None


class SeglogFilesDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "seglog-files"

    def schema(self) -> StructType:
        return spark_schema(_flag(self.options, "includeHeaders"))

    def reader(self, schema: StructType) -> DataSourceReader:
        if schema.fieldNames() != self.schema().fieldNames():
            raise ValueError("the seglog-files source has a fixed schema (Spark's Kafka schema)")
        return SeglogFilesReader(dict(self.options))


def _flag(options: dict, name: str) -> bool:
    lowered = {k.lower(): v for k, v in options.items()}
    return str(lowered.get(name.lower(), "false")).strip().lower() == "true"


def _paths(options: dict[str, str]) -> list[Path]:
    lowered = {k.lower(): v for k, v in options.items()}
    raw: list[str] = []
    if lowered.get("paths"):  # DataFrameReader.load([...]) passes a JSON list
        raw += json.loads(lowered["paths"])
    if lowered.get("path"):
        raw += lowered["path"].split(",")
    paths = [Path(p.strip()) for p in raw if p.strip()]
    if not paths:
        raise ValueError("seglog-files needs a path: one or more log directories, comma-separated")
    for p in paths:
        if not p.is_dir():
            raise ValueError(f"seglog-files: {p} is not a directory")
    return paths


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """`<topic> <partition> <offset>` lines of a Kafka checkpoint file; {} when missing.

    Parsed here because storage's OffsetCheckpointFile creates the file it is
    given when it does not exist, and this reader must not write."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return {}
    out = {}
    for line in lines[2:]:
        fields = line.split()
        if len(fields) == 3 and fields[1].isdigit() and fields[2].lstrip("-").isdigit():
            out[(fields[0], int(fields[1]))] = int(fields[2])
    return out


class SeglogFilesReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.paths = _paths(options)
        lowered = {k.lower(): v for k, v in options.items()}
        topics = lowered.get("topics")
        self.topics = {t.strip() for t in topics.split(",") if t.strip()} if topics else None
        self.include_headers = _flag(options, "includeHeaders")
        self.max_bytes = int(lowered.get("maxbytesperpartition", DEFAULT_MAX_BYTES_PER_PARTITION))

    def partitions(self) -> Sequence[InputPartition]:
        out: list[InputPartition] = []
        for path in self.paths:
            if _SEGMENT_FILE.match(next((f.name for f in path.glob("*.log")), "")):
                out += self._plan_partition(path, path.parent)  # a partition directory
                continue
            for entry in sorted(path.iterdir()):
                if entry.is_dir() and not _SPECIAL_DIR.match(entry.name):
                    out += self._plan_partition(entry, path)
        return out

    def _plan_partition(self, directory: Path, log_dir: Path) -> list[SegmentFiles]:
        try:
            topic, partition = parse_partition_dir(directory.name)
        except StorageError:
            return []  # not a partition directory
        if topic in _SKIPPED_TOPICS or (self.topics is not None and topic not in self.topics):
            return []
        tp = (topic, partition)
        log_start = read_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT).get(tp, 0)
        hw = read_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT).get(tp)
        segments = sorted(
            (int(m.group(1)), f) for f in directory.iterdir() if (m := _SEGMENT_FILE.match(f.name))
        )
        # A segment wholly below the log start holds nothing to return.
        segments = [
            (base, f)
            for i, (base, f) in enumerate(segments)
            if i + 1 == len(segments) or segments[i + 1][0] > log_start
        ]
        groups: list[list[tuple[int, Path]]] = []
        size = 0
        for base, f in segments:
            length = f.stat().st_size
            if not groups or size + length > self.max_bytes:
                groups.append([])
                size = 0
            groups[-1].append((base, f))
            size += length
        out = []
        for i, group in enumerate(groups):
            start = max(log_start, group[0][0]) if i else log_start
            until = groups[i + 1][0][0] if i + 1 < len(groups) else None
            end = hw if until is None else (until if hw is None else min(until, hw))
            if end is not None and end <= start:
                continue
            out.append(SegmentFiles(topic, partition, tuple(str(f) for _, f in group), start, end))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentFiles):
            return  # Spark's placeholder when there is nothing to read
        for cols in _columns(partition, self.include_headers):
            yield record_batch(partition.topic, partition.partition, cols)


def _columns(part: SegmentFiles, include_headers: bool) -> Iterator[Columns]:
    """The records of `part` a file chunk at a time, in offset order, decoded
    batch-wise into Arrow columns; control batches left out."""
    for path in part.files:
        pending: list[tuple[int, BatchHeader]] = []
        chunk = b""
        done = False
        for buf, pos, header in _file_batches(Path(path)):
            if buf is not chunk:  # a new chunk: decode what the last one held
                yield from _decode(path, chunk, pending, part, include_headers)
                chunk, pending = buf, []
            if header.is_control or header.next_offset <= part.start:
                continue
            if part.end is not None and header.base_offset >= part.end:
                done = True
                break
            pending.append((pos, header))
        yield from _decode(path, chunk, pending, part, include_headers)
        if done:
            return


def _decode(
    path: str,
    buf: bytes,
    batches: list[tuple[int, BatchHeader]],
    part: SegmentFiles,
    include_headers: bool,
) -> Iterator[Columns]:
    if not batches:
        return
    try:
        cols = decode_batches(buf, batches, part.start, part.end, include_headers)
    except StorageError as e:
        raise StorageError(f"{path}: batches at bytes {batches[0][0]}..: {e}") from e
    if len(cols):
        yield cols


def _file_batches(path: Path) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position, header) of each whole, CRC-valid batch of a `.log` file,
    read in chunks; stops at a partial tail or at zero padding."""
    with open(path, "rb") as f:
        buf = b""
        while chunk := f.read(READ_CHUNK_BYTES):
            buf = buf + chunk if buf else chunk
            pos = 0
            try:
                for pos, header in iter_batches(buf):
                    yield buf, pos, header
                    pos += header.size
            except StorageError as e:
                if not any(buf[pos : pos + LOG_OVERHEAD]):
                    return  # a preallocated file's zero tail: end of the data
                raise StorageError(f"{path}: {e}") from e
            buf = buf[pos:]
