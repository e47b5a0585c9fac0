"""Regenerate the Python modules for the .proto files beside this script.

    python3 proto/generate.py            # rewrite the generated modules in place
    python3 proto/generate.py --check    # exit 1 if they differ from the .proto files

grpcio-tools writes `import errors_pb2 as errors__pb2`, an absolute import of a
sibling that only works with proto/ on sys.path; the generated modules are
rewritten to import relatively so they live inside `seglog.proto`.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_SIBLING_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def generate(out_dir: Path) -> list[Path]:
    from grpc_tools import protoc  # build-time tool: imported only here

    protos = sorted(p.name for p in HERE.glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{HERE}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit(f"protoc failed for {protos}")
    written = []
    for path in sorted(out_dir.glob("*_pb2*.py*")):
        text = _SIBLING_IMPORT.sub(r"from . import \1 as \2", path.read_text())
        path.write_text(text)
        written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        stale = []
        for path in fresh:
            target = HERE / path.name
            if not target.exists() or target.read_text() != path.read_text():
                stale.append(target.name)
                if not args.check:
                    target.write_text(path.read_text())
    if args.check and stale:
        print(f"generated modules out of date: {', '.join(stale)}; run proto/generate.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
