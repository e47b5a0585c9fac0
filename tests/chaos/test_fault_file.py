"""The fault file both chaos targets write (chaos/targets.py WritesFaultFile): whole by
rename, readable by a container's node user, and on compose mounted where the nodes'
SEGLOG_FAULT_INJECTION_FILE points (compose/docker-compose.faults.yml)."""

from __future__ import annotations

import json
import shutil
import stat

import yaml

from seglog.chaos.compose_target import FAULT_DIR_ENV, FAULTS_FILE, ComposeTarget
from seglog.storage.disk_and_clock import ENV, parse_faults


def test_compose_nodes_read_the_file_the_target_writes() -> None:
    target = ComposeTarget(project="seglog-chaos-faultfile-test")
    try:
        assert FAULTS_FILE in target.files
        folder = target.env[FAULT_DIR_ENV]
        assert target.fault_file.parent.as_posix() == folder
        services = yaml.safe_load(FAULTS_FILE.read_text())["services"]
        assert sorted(services) == ["node1", "node2", "node3"]
        for service in services.values():
            inside = service["environment"][ENV]
            (mount,) = service["volumes"]
            host, container, mode = mount.rsplit(":", 2)
            assert host.startswith("${" + FAULT_DIR_ENV)
            assert mode == "ro"
            assert inside == f"{container}/{target.fault_file.name}"

        target.inject({"node_ids": [2], "write_block": True})
        mode_bits = stat.S_IMODE(target.fault_file.stat().st_mode)
        assert mode_bits & 0o044 == 0o044  # others read it: the containers' node user
        assert stat.S_IMODE(target.fault_file.parent.stat().st_mode) & 0o005 == 0o005
        text = target.fault_file.read_text()
        assert parse_faults(text, 2).write_block
        assert not parse_faults(text, 1).write_block
        assert not list(target.fault_file.parent.glob("*.tmp"))

        assert target.clear_faults() == ["cleared disk and clock faults"]
        assert json.loads(target.fault_file.read_text()) == {}
        assert target.clear_faults() == []
    finally:
        shutil.rmtree(target.fault_file.parent, ignore_errors=True)
