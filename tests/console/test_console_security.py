"""The web console on a cluster with SASL and ACLs: it logs in like any client (the
tools' --command-config) and shows the ACLs and the SCRAM users its principal may
describe; with a wrong password every page says the login failed instead of showing
an empty cluster. Debian's headless Chromium, a real node."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.cli.main import main
from seglog.harness.browser import available, console_errors, full_page_screenshot, text_when
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

SCREENSHOTS = os.environ.get("SEGLOG_CONSOLE_SCREENSHOTS")
pytestmark = pytest.mark.skipif(
    not available(), reason="chromium or chromium-driver is not installed (tests/run.sh)"
)


def properties(path: Path, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f"sasl.username=admin\nsasl.password={password}\n"
    )
    return path


def cli(node: NodeProcess, config: Path, *args: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = [args[0], "--bootstrap-server", node.bootstrap, "--command-config", str(config)]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main([*argv, *args[1:]]) == 0, err.getvalue()


class Console:
    def __init__(self, node: NodeProcess, config: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "seglog.cli", "console", "--bootstrap-server",
                 node.bootstrap, "--command-config", str(config), "--port", str(self.port),
                 "--request-timeout-ms", "5000"],
                stdout=f, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60  # bounds, not expectations: a loaded machine
        while time.monotonic() < deadline and self.proc.poll() is None:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + "/api/snapshot", timeout=10),
            ):
                return
            time.sleep(0.3)
        raise AssertionError(f"the console did not start: {log.read_text()}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, Path]]:
    root = tmp_path_factory.mktemp("console-sasl")
    n = NodeProcess(
        root / "node",
        # The console's principal is the PLAIN super user `admin`; ACLs on, SCRAM
        # users stored (described, never logged in with here).
        overrides={
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required user_admin="admin-secret";',
            "super.users": "User:admin",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "delegation.token.secret.key": "console-test-secret",
            "connection.failed.authentication.delay.ms": "0",
        },
    ).start(timeout_s=60)
    config = properties(root / "admin.properties", "admin-secret")
    try:
        cli(n, config, "topics", "--create", "--topic", "secured")
        cli(
            n, config, "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-secret]",
        )  # fmt: skip
        cli(
            n, config, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
            "--topic", "secured", "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        cli(
            n, config, "acls", "--add", "--deny-principal", "User:alice", "--operation",
            "Write", "--topic", "secured",
        )  # fmt: skip
        yield n, root
    finally:
        n.stop()


def test_the_console_logs_in_and_shows_acls_and_users(
    node: tuple[NodeProcess, Path], chrome: Any
) -> None:
    n, root = node
    console = Console(n, root / "admin.properties", root / "console.log")
    try:
        chrome.get(console.url + "/")
        # Live: a refresh whose DescribeQuorum timed out on a loaded machine says
        # "unreachable" until the next one; each page shows the snapshot of the last
        # refresh, so every read waits for what it checks (reloading the page).
        text_when(
            chrome,
            "#single-node",
            lambda text: text.startswith("No controller quorum"),
            reload_url=console.url + "/",
        )
        chrome.get(console.url + "/topics")
        text_when(chrome, "#topics", lambda text: "secured" in text, reload_url=chrome.current_url)
        chrome.get(console.url + "/security")
        allow = ["User:alice", "Allow", "Read", "Topic", "secured", "PREFIXED", "*"]
        deny = ["User:alice", "Deny", "Write", "Topic", "secured", "LITERAL", "*"]
        acls = text_when(
            chrome,
            "#acls",
            lambda text: " ".join(allow) in text and " ".join(deny) in text,
            reload_url=console.url + "/security",
        )
        assert " ".join(allow) in acls and " ".join(deny) in acls
        if SCREENSHOTS:
            full_page_screenshot(chrome, str(Path(SCREENSHOTS) / "security.png"))
        users = text_when(chrome, "#users", lambda text: "alice" in text)
        assert "SCRAM-SHA-256 (iterations 4096)" in users
        assert console_errors(chrome) == []
    finally:
        console.stop()


def test_a_wrong_password_is_said_on_the_pages(node: tuple[NodeProcess, Path], chrome: Any) -> None:
    n, root = node
    bad = properties(root / "bad.properties", "not-the-password")
    console = Console(n, bad, root / "console-bad.log")
    try:
        chrome.get(console.url + "/")
        warning = chrome.find_element("id", "refresh-errors").text
        assert "SASL_AUTHENTICATION_FAILED" in warning, warning
        assert chrome.find_elements("css selector", "#nodes tbody tr") == []
        chrome.get(console.url + "/security")
        assert "SASL_AUTHENTICATION_FAILED" in chrome.find_element("id", "acl-error").text
    finally:
        console.stop()
