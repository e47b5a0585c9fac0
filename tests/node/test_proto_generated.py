"""The committed generated modules are exactly what proto/generate.py makes from
the .proto files, and they import each other from inside the package."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_match_proto_files() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_modules_import_inside_the_package() -> None:
    from seglog.proto import client_pb2, client_pb2_grpc, errors_pb2

    assert client_pb2_grpc.SegLogStub is not None
    assert errors_pb2.ErrorCode.Value("NOT_LEADER_OR_FOLLOWER") == 6
    assert client_pb2.ProduceRequest(acks=-1).acks == -1
    for path in (ROOT / "proto").glob("*_pb2*.py"):
        for line in path.read_text().splitlines():
            assert not (line.startswith("import ") and "_pb2" in line), (path.name, line)
