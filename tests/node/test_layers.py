"""The layers import downwards only (docs/architecture.md): storage knows no other
layer, replication only storage, and the node never imports the client (the command
line, above both, lives in cli/; the web console, console/, uses the clients only)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "storage": ("seglog.replication", "seglog.node", "seglog.client", "seglog.cli"),
    "replication": ("seglog.node", "seglog.client", "seglog.cli"),
    "node": ("seglog.client", "seglog.cli", "seglog.chaos", "seglog.pipeline"),
    "client": ("seglog.node", "seglog.cli", "seglog.replication"),
    # The web console speaks to the cluster through the clients only.
    "console": ("seglog.node", "seglog.cli", "seglog.replication", "seglog.storage"),
}


def imports(path: Path) -> list[str]:
    """Absolute names of what the file imports (relative imports resolved)."""
    package = ["seglog", *path.relative_to(ROOT).parent.parts]
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            out.append(".".join([*base, *([node.module] if node.module else [])]))
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_never_imports_one_above_it(layer: str) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, layer
    bad = [
        f"{f.relative_to(ROOT)} imports {name}"
        for f in files
        for name in imports(f)
        if any(name == above or name.startswith(above + ".") for above in FORBIDDEN[layer])
    ]
    assert bad == []
