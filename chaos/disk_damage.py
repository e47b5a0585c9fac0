"""Disk damage for chaos runs: one closed segment of a stopped replica is flipped,
truncated or its index corrupted, so that start-up recovery must find and repair it
(`corrupt-follower-disk`)."""

from __future__ import annotations

# --- corrupting a partition directory -------------------------------------------------
#
# Plain stdlib, no seglog imports: the compose target ships this function's source to
# a container of the node image (which runs it on the node's volume) so the files keep
# their owner; the local target calls it directly.


def corrupt_replica(log_dir: str, topic: str, partitions: list, mode: str, seed: int) -> dict:
    """Damage one closed segment of a stopped replica so that Kafka's start-up must
    notice it; return what was done. `partitions`: candidates in order of
    preference (ones this node follows); the first with a closed segment is used.

    bitflip-log   flip one byte inside the last batch of a closed segment at or above
                  the checkpointed recovery point (start-up re-validates those CRCs);
                  without such a segment, falls back to truncate-log
    truncate-log  cut a closed segment's .log below its last index entry (the
                  start-up sanity check sees the index pointing past the end, recovers
                  the segment and drops everything after the cut)
    corrupt-index truncate a closed segment's .index mid-entry (not a multiple of 8:
                  the sanity check rejects it and the index is rebuilt)

    A bit-flip below the recovery point is deliberately not used: Kafka does not
    re-read such segments at start-up either (no scrubbing), so it would stay.
    """
    import os as _os
    import random as _random
    import struct as _struct

    rnd = _random.Random(seed)
    recovery: dict = {}
    try:
        with open(_os.path.join(log_dir, "recovery-point-offset-checkpoint")) as f:
            for line in f.read().splitlines()[2:]:
                fields = line.split()
                if len(fields) == 3 and fields[0] == topic:
                    recovery[int(fields[1])] = int(fields[2])
    except OSError:
        pass

    def closed_segments(partition: int) -> list:
        directory = _os.path.join(log_dir, f"{topic}-{partition}")
        try:
            logs = sorted(f for f in _os.listdir(directory) if f.endswith(".log"))
        except OSError:
            return []
        return [(directory, f) for f in logs[:-1]]

    def batches(path: str) -> list:
        out = []
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = _struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):
                break
            out.append((pos, 12 + length))
            pos += 12 + length
        return out

    if mode == "bitflip-log":
        for partition in partitions:
            rp = recovery.get(partition, 0)
            above = [c for c in closed_segments(partition) if int(c[1][:20]) >= rp]
            if not above:
                continue
            directory, name = above[-1]
            path = _os.path.join(directory, name)
            pos, size = batches(path)[-1]
            # Past the 61-byte header: the records, covered by the CRC.
            at = pos + 61 + rnd.randrange(max(1, size - 61))
            with open(path, "r+b") as f:
                f.seek(at)
                byte = f.read(1)[0]
                f.seek(at)
                f.write(bytes([byte ^ (1 << rnd.randrange(8))]))
            return {
                "mode": mode,
                "partition": partition,
                "file": name,
                "position": at,
                "recovery_point": rp,
            }
        mode = "truncate-log"
    candidates = [(p, closed_segments(p)) for p in partitions]
    candidates = [(p, c) for p, c in candidates if c]
    if not candidates:
        return {"mode": "none", "reason": "no closed segment", "partitions": partitions}
    partition, closed = candidates[0]
    directory, name = closed[-1]
    base = name[:20]
    if mode == "truncate-log":
        path = _os.path.join(directory, name)
        index = _os.path.join(directory, base + ".index")
        last_position = 0
        if _os.path.exists(index) and _os.path.getsize(index) >= 8:
            with open(index, "rb") as f:
                data = f.read()
            entries = [
                _struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)
            ]
            positions = [pos for rel, pos in entries if pos > 0 or rel > 0]
            last_position = max(positions) if positions else 0
        size = _os.path.getsize(path)
        cut = rnd.randrange(1, max(2, last_position if last_position > 0 else size))
        with open(path, "r+b") as f:
            f.truncate(cut)
        return {
            "mode": mode,
            "partition": partition,
            "file": name,
            "size": size,
            "cut_to": cut,
            "last_index_position": last_position,
            "recovery_point": recovery.get(partition, 0),
        }
    if mode == "corrupt-index":
        index_name = base + ".index"
        path = _os.path.join(directory, index_name)
        size = _os.path.getsize(path)
        cut = max(1, size - 1 - rnd.randrange(7))
        if cut % 8 == 0:
            cut -= 3
        with open(path, "r+b") as f:
            f.truncate(max(1, cut))
        return {
            "mode": mode,
            "partition": partition,
            "file": index_name,
            "size": size,
            "cut_to": max(1, cut),
        }
    raise ValueError(f"unknown corruption mode {mode!r}")


CORRUPTION_MODES = ("bitflip-log", "truncate-log", "corrupt-index")
