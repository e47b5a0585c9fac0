"""The web console in Debian's headless Chromium (Selenium with chromium-driver)
against a real 3-node `seglog local up` that started it: every page loads without
console errors; a topic created in the UI exists for kcat; a record kcat produces
appears live in the message view; a group's lag is what `seglog consumer-groups
--describe` says and a reset is refused while the group has members; a node killed
shows offline, live, soon after the session timeout.

With SEGLOG_CONSOLE_SCREENSHOTS=DIR each page is also saved as DIR/<page>.png (how
docs/console/ was made). tests/run.sh installs chromium, chromium-driver and kcat."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.producer import Producer
from seglog.harness.browser import (
    attributes,
    available,
    console_errors,
    full_page_screenshot,
    text_when,
)
from seglog.harness.ports import consecutive_free_ports
from seglog.harness.processes import pid_alive as alive

pytestmark = pytest.mark.skipif(
    not available() or shutil.which("kcat") is None,
    reason="chromium, chromium-driver or kcat is not installed (tests/run.sh installs them)",
)

START_S = 90
WAIT_S = 20.0
T = TypeVar("T")
SCREENSHOTS = os.environ.get("SEGLOG_CONSOLE_SCREENSHOTS")


@dataclass
class Cluster:
    data_dir: Path
    bootstrap: str
    kafka_bootstrap: str
    url: str

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.data_dir / "cluster.json").read_text()))


def seglog(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data_dir = tmp_path_factory.mktemp("console") / "local"
    base = consecutive_free_ports(3, random.Random())
    up = seglog(
        "local",
        "up",
        "--detach",
        "--data-dir",
        str(data_dir),
        "--base-port",
        str(base),
        timeout=START_S,
    )
    pids: list[int] = []
    try:
        assert up.returncode == 0, up.stderr
        # "name: value" lines (bootstrap servers, console); the port layout follows.
        lines = dict(line.split(": ", 1) for line in up.stdout.splitlines() if ": " in line)
        state = json.loads((data_dir / "cluster.json").read_text())
        pids = [*state["pids"], state["console_pid"]]
        yield Cluster(
            data_dir,
            lines["bootstrap servers"],
            lines["kafka bootstrap servers"],
            lines["console"].rstrip("/"),
        )
    finally:
        down = seglog("local", "down", "--data-dir", str(data_dir), timeout=90)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.2)
        left = [p for p in pids if alive(p)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert down.returncode == 0, down.stderr
        assert left == [], f"still running after local down (the console is the last): {left}"


def wait_for(what: str, probe: Callable[[], T], timeout_s: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        time.sleep(0.2)


def visit(chrome: Any, url: str, name: str | None = None) -> str:
    """Load the page; its text. Any console error fails the test."""
    chrome.get(url)
    wait_for(
        "the page loaded", lambda: chrome.execute_script("return document.readyState") == "complete"
    )
    time.sleep(0.5)  # let its scripts open their event streams
    if SCREENSHOTS and name:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        full_page_screenshot(chrome, str(Path(SCREENSHOTS) / f"{name}.png"))
    errors = console_errors(chrome)
    assert errors == [], (url, errors)
    text: str = chrome.find_element("tag name", "body").text
    return text


def wait_until_the_console_knows(cluster: Cluster, topic: str, page: str = "") -> None:
    """A topic another client just created reaches every node's metadata a moment
    later; until then the console says it does not exist (404). A page of its records
    (`page`, e.g. "/messages?partition=0") also needs the partition's leader elected
    and its log made: until then it says what the cluster answered (400)."""

    def known() -> bool:
        try:
            with urllib.request.urlopen(f"{cluster.url}/topics/{topic}{page}", timeout=5) as r:
                return bool(r.status == 200)
        except urllib.error.HTTPError:
            return False

    wait_for(f"the console knows topic {topic}", known)


def lag_from_cli(bootstrap: str, group: str) -> dict[tuple[str, int], str]:
    done = seglog(
        "consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = rows[0]
    assert header[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    return {(r[1], int(r[2])): r[5] for r in rows[1:]}


def lag_from_page(chrome: Any) -> dict[tuple[str, int], str]:
    out = {}
    for row in chrome.find_elements("css selector", "#lag tbody tr"):
        cells = [c.text for c in row.find_elements("tag name", "td")]
        out[(cells[0], int(cells[1]))] = cells[4]
    return out


def traffic_for_the_charts(cluster: Cluster, seconds: float = 12.0) -> None:
    """Records into partitions 1 and 2 of `orders` for a while, so that the
    screenshots' charts have a few refreshes of rates to draw."""
    with Producer(cluster.bootstrap, acks="all") as producer:
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            for _ in range(20 + n % 40):
                producer.send("orders", value=b"x" * 300, partition=1 + n % 2)
            producer.flush(timeout=30)
            n += 1
            time.sleep(0.2)


def test_every_page_loads_without_console_errors(cluster: Cluster, chrome: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("orders", 3, 3, {"retention.ms": "86400000"})])
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(20):
            producer.send(
                "orders",
                value=json.dumps({"order": i, "item": "tea", "qty": i % 4 + 1}).encode(),
                key=f"customer-{i % 5}".encode(),
                headers=[("source", b"web"), ("trace", bytes([0, 1, 2, i]))],
                partition=0,
            )
        producer.send("orders", value=b"\x00\x01\xfe binary", partition=0)
        producer.send("orders", value=b"plain text order", partition=0)
        producer.flush(timeout=30)
    with Admin(cluster.bootstrap) as admin:
        admin.alter_consumer_group_offsets("billing", {TopicPartition("orders", 0): 7})
    if SCREENSHOTS:
        traffic_for_the_charts(cluster)

    text = visit(chrome, cluster.url + "/", "overview")
    assert "3/3" in text and "Raft quorum" in text
    assert attributes(chrome, "#nodes tbody tr", "data-node-status") == ["online"] * 3
    text = visit(chrome, cluster.url + "/topics", "topics")
    orders = '#topics tr[data-topic="orders"]'
    text_when(chrome, orders, lambda _text: True, reload_url=cluster.url + "/topics")
    row = chrome.find_element("css selector", orders)
    assert row.find_element("class name", "cleanup").text == "delete"
    assert row.find_element("class name", "retention").text == "1 d"  # retention.ms=86400000
    text = visit(chrome, cluster.url + "/topics?q=ord")
    assert attributes(chrome, "#topics tbody tr", "data-topic") == ["orders"]
    text = visit(chrome, cluster.url + "/topics?q=no-such-topic")
    assert chrome.find_elements("css selector", "#topics tbody tr") == []
    text = visit(chrome, cluster.url + "/topics/orders", "topic")
    assert "retention.ms" in text and "86400000" in text
    hw = chrome.find_element("css selector", '#partitions tr[data-partition="0"] td:nth-child(9)')
    assert hw.text == "22"
    visit(chrome, cluster.url + "/topics/orders/messages?partition=0&offset=14&limit=8", "messages")
    assert len(chrome.find_elements("css selector", "#records tbody tr")) == 8
    text = visit(chrome, cluster.url + "/topics/orders/messages?partition=0&offset=0")
    rows = chrome.find_elements("css selector", "#records tbody tr")
    assert len(rows) == 22
    kinds = [r.find_elements("tag name", "td")[5].text for r in rows]
    assert kinds == ["json"] * 20 + ["hex", "text"]
    assert '"item": "tea"' in rows[0].text  # pretty-printed
    # From a time: far back is the log start, far ahead the high watermark (nothing yet).
    visit(chrome, cluster.url + "/topics/orders/messages?partition=0&timestamp=2000-01-01T00:00:00")
    assert len(chrome.find_elements("css selector", "#records tbody tr")) == 22
    visit(chrome, cluster.url + "/topics/orders/messages?partition=0&timestamp=2999-01-01T00:00:00")
    assert chrome.find_elements("css selector", "#records tbody tr") == []
    assert "showing 0 from offset 22" in chrome.find_element("tag name", "body").text
    text = visit(chrome, cluster.url + "/groups", "groups")
    assert "billing" in text
    text = visit(chrome, cluster.url + "/groups/billing", "group")
    assert lag_from_page(chrome)[("orders", 0)] == "15"
    text = visit(chrome, cluster.url + "/security")  # no authorizer on this cluster
    assert "SECURITY_DISABLED" in chrome.find_element("id", "acl-error").text, text
    # A clear page, not a crash; its 404 status is the one thing Chromium reports.
    chrome.get(cluster.url + "/topics/no-such-topic")
    assert "does not exist" in chrome.find_element("tag name", "body").text
    assert [e for e in console_errors(chrome) if "404 (Not Found)" not in e] == []


def test_a_topic_created_in_the_ui_exists_for_kcat(cluster: Cluster, chrome: Any) -> None:
    visit(chrome, cluster.url + "/topics")
    form = chrome.find_element("id", "create-topic")
    form.find_element("name", "name").send_keys("made-in-ui")
    form.find_element("name", "partitions").send_keys("4")
    form.find_element("name", "replication_factor").send_keys("3")
    form.find_element("name", "configs").send_keys("cleanup.policy=compact")
    form.submit()
    wait_for(
        "the topic's page", lambda: chrome.current_url.endswith("/topics/made-in-ui?created=1")
    )
    assert console_errors(chrome) == []
    assert "cleanup.policy" in chrome.find_element("id", "configs").text
    listed = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap, "-L", "-t", "made-in-ui", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert listed.returncode == 0, listed.stderr
    (topic,) = json.loads(listed.stdout)["topics"]
    assert topic["topic"] == "made-in-ui" and len(topic["partitions"]) == 4
    assert all(len(p["replicas"]) == 3 for p in topic["partitions"])

    # A config changed on the topic's page is the topic's; a bad value is refused by
    # the node, with the key named.
    def alter(value: str) -> None:
        visit(chrome, cluster.url + "/topics/made-in-ui")
        form = chrome.find_element("id", "alter-config")
        form.find_element("css selector", 'option[value="retention.ms"]').click()
        form.find_element("name", "value").send_keys(value)
        form.submit()

    alter("3600000")
    notice = wait_for("the change", lambda: chrome.find_elements("id", "notice"))
    assert notice[0].text == "retention.ms set to 3600000."
    with Admin(cluster.bootstrap) as admin:
        entry = admin.describe_configs("made-in-ui")["retention.ms"]
    assert (entry.value, entry.is_default) == ("3600000", False)
    alter("soon")
    error = wait_for("the refusal", lambda: chrome.find_elements("id", "error"))[0].text
    assert error.startswith("retention.ms was not changed:") and "soon" in error, error
    assert [e for e in console_errors(chrome) if "400 (Bad Request)" not in e] == []

    # A bad form is refused with the reason, and nothing is created.
    visit(chrome, cluster.url + "/topics")
    form = chrome.find_element("id", "create-topic")
    form.find_element("name", "name").send_keys("made-in-ui")
    form.submit()
    error = wait_for("the error", lambda: chrome.find_elements("id", "error"))
    assert "TOPIC_ALREADY_EXISTS" in error[0].text or "already exists" in error[0].text
    assert [e for e in console_errors(chrome) if "400 (Bad Request)" not in e] == []


def test_a_record_produced_by_kcat_appears_live(cluster: Cluster, chrome: Any) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("live", 1, 3)])
    wait_until_the_console_knows(cluster, "live", "/messages?partition=0")
    visit(chrome, cluster.url + "/topics/live/messages?partition=0")
    assert chrome.find_elements("css selector", "#records tbody tr") == []
    chrome.find_element("id", "follow").click()
    wait_for(
        "the stream is live", lambda: chrome.find_element("id", "follow-status").text == "live"
    )
    value = '{"event":"kcat","n":42}'
    produced = subprocess.run(
        [
            "kcat",
            "-b",
            cluster.kafka_bootstrap,
            "-P",
            "-t",
            "live",
            "-p",
            "0",
            "-k",
            "k-1",
            "-H",
            "origin=kcat",
        ],
        input=value + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    row = wait_for(
        "kcat's record in the table",
        lambda: chrome.find_elements("css selector", '#records tbody tr[data-offset="0"]'),
    )[0]
    assert chrome.current_url.endswith("/topics/live/messages?partition=0")  # no reload
    cells = [c.text for c in row.find_elements("tag name", "td")]
    assert cells[2] == "k-1"
    assert json.loads(cells[3]) == {"event": "kcat", "n": 42} and '\n  "n": 42' in cells[3]
    assert "origin: kcat" in cells[4]
    assert console_errors(chrome) == []

    # Produced from the page: the record and where it went.
    form = chrome.find_element("id", "produce")
    form.find_element("name", "key").send_keys("from-ui")
    form.submit()
    notice = wait_for("the produced record", lambda: chrome.find_elements("id", "notice"))
    assert notice[0].text == "Record produced to partition 0 at offset 1."
    consumed = subprocess.run(
        [
            "kcat",
            "-b",
            cluster.kafka_bootstrap,
            "-C",
            "-t",
            "live",
            "-p",
            "0",
            "-o",
            "1",
            "-c",
            "1",
            "-K",
            "|",
            "-e",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.stdout.strip() == 'from-ui|{"hello": "seglog"}', consumed


def test_group_lag_equals_the_cli_and_reset_waits_for_members(
    cluster: Cluster, chrome: Any
) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("lagging", 3, 3)])
    wait_until_the_console_knows(cluster, "lagging")
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(60):
            producer.send("lagging", value=b"%d" % i, partition=i % 3)
        producer.flush(timeout=30)
    consumer = Consumer(
        "lagging",
        bootstrap_servers=cluster.bootstrap,
        group_id="reporting",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=7,
    )
    try:
        wait_for("an assignment", lambda: consumer.poll(timeout_ms=500) and consumer.assignment())
        consumer.commit()
        visit(chrome, cluster.url + "/groups/reporting")
        assert chrome.find_element("id", "group-state").text == "Stable"
        shown, cli = lag_from_page(chrome), lag_from_cli(cluster.bootstrap, "reporting")
        assert shown == cli and len(shown) == 3, (shown, cli)
        assert sum(int(v) for v in shown.values()) == 60 - 7
        # The lag chart, pushed to the open page as the coordinator's
        # kafka_consumergroup_lag changes (no reload): its last point is the total lag.
        wait_for(
            "the lag chart's last point",
            lambda: chrome.find_elements("css selector", '#lag-chart figure.chart[data-last="53"]'),
        )

        form = chrome.find_element("id", "reset")
        form.submit()
        error = wait_for("the refusal", lambda: chrome.find_elements("id", "error"))[0].text
        assert "can only be reset if the group 'reporting' is inactive" in error
        assert "Stable" in error
        assert [e for e in console_errors(chrome) if "409 (Conflict)" not in e] == []
    finally:
        consumer.close()
    visit(chrome, cluster.url + "/groups/reporting")
    wait_for("the group is empty", lambda: seglog_state(cluster, "reporting") == "Empty")
    visit(chrome, cluster.url + "/groups/reporting")
    form = chrome.find_element("id", "reset")
    form.find_element("css selector", 'select[name="target"] option[value="earliest"]').click()
    form.submit()
    wait_for("the reset", lambda: chrome.find_elements("id", "notice"))
    shown, cli = lag_from_page(chrome), lag_from_cli(cluster.bootstrap, "reporting")
    assert shown == cli == {("lagging", p): "20" for p in range(3)}


def test_another_site_can_neither_post_nor_read(cluster: Cluster) -> None:
    """A page elsewhere may make the viewer's browser post a form to the console, or
    point a name of its own at 127.0.0.1: neither creates a topic or reads a page."""

    def ask(path: str, headers: dict[str, str], data: bytes | None = None) -> int:
        request = urllib.request.Request(cluster.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    form = b"name=csrf-topic&partitions=1&replication_factor=1"
    kind = {"Content-Type": "application/x-www-form-urlencoded"}
    assert ask("/topics", {**kind, "Origin": "http://evil.example"}, form) == 403
    assert ask("/topics", {**kind, "Sec-Fetch-Site": "cross-site"}, form) == 403
    assert ask("/", {"Host": "evil.example"}) == 400
    with Admin(cluster.bootstrap) as admin:
        assert "csrf-topic" not in admin.list_topics()
    port = cluster.url.rsplit(":", 1)[1]
    same = {**kind, "Origin": cluster.url, "Sec-Fetch-Site": "same-origin"}
    assert ask("/topics", {**same, "Host": f"127.0.0.1:{port}"}, form) == 200  # followed 303


def seglog_state(cluster: Cluster, group: str) -> str:
    with Admin(cluster.bootstrap) as admin:
        (info,) = admin.describe_consumer_groups([group])
    return info.state


def test_a_killed_node_shows_offline(cluster: Cluster, chrome: Any) -> None:
    """Last: the cluster is down a node afterwards."""
    visit(chrome, cluster.url + "/")
    row = '#nodes tr[data-node="3"]'
    assert attributes(chrome, row, "data-node-status") == ["online"]
    pid = cluster.state()["pids"][2]
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(
        "node 3 offline on the page",
        lambda: attributes(chrome, row, "data-node-status") == ["offline"],
        timeout_s=15,
    )
    took = time.monotonic() - killed
    # broker.session.timeout.ms of local up (600 ms) + one refresh (2 s) + the push.
    print(f"node 3 shown offline {took:.1f}s after SIGKILL")
    assert took < 6.0
    assert re.search(r"2/3\s+nodes online", chrome.find_element("tag name", "body").text)
    assert console_errors(chrome) == []
