"""`seglog console`'s own input errors, before it asks any cluster anything."""

from __future__ import annotations

import contextlib
import io
import socket

from seglog.cli.main import main
from seglog.harness.ports import free_port


def run(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["console", "--bootstrap-server", "127.0.0.1:1", *args])
    return code, err.getvalue()


def test_a_taken_port_and_bad_values_are_clear_errors() -> None:
    with socket.socket() as squatter:
        port = free_port()
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        code, err = run("--port", str(port))
    assert code == 1
    assert f"seglog console: the console cannot listen on 127.0.0.1:{port}" in err
    assert run("--refresh-interval-ms", "0") == (
        1,
        "seglog console: --refresh-interval-ms must be positive, got 0\n",
    )
    assert run("--port", "70000") == (1, "seglog console: --port 70000 is out of range\n")
