"""The broker's AlterPartitionManager: ISR changes of many partitions travel in few
requests, one at a time, a newer change of a partition replaces an unsent older one,
and a failed request is retried with its changes (unless newer ones came)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from seglog.node.alter_partition_manager import AlterPartitionManager, IsrChangeResult
from seglog.node.controller.controller_requests import IsrChange
from seglog.replication import partition_replica as pr


def change(request_id: int, isr: tuple[int, ...]) -> pr.SendAlterPartition:
    return pr.SendAlterPartition(request_id, 1, 0, 0, isr, (-1,) * len(isr))


class Controller:
    """A stand-in for the network and the active controller: records each request,
    optionally fails the first ones, and can hold a request until released."""

    def __init__(self, fail_first: int = 0) -> None:
        self.requests: list[list[IsrChange]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.fail_first = fail_first
        self.release = threading.Event()
        self.release.set()
        self.lock = threading.Lock()

    def send(self, changes: Sequence[IsrChange]) -> list[IsrChangeResult]:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests.append(list(changes))
            failing = len(self.requests) <= self.fail_first
        try:
            self.release.wait(10)
            if failing:
                raise ConnectionError("no controller")
            return [
                IsrChangeResult("NONE", "", 0, c.partition_epoch + 1, c.new_isr) for c in changes
            ]
        finally:
            with self.lock:
                self.in_flight -= 1


def run(controller: Controller) -> tuple[AlterPartitionManager, dict, threading.Event]:
    answers: dict[tuple[str, int], pr.AlterPartitionResponse] = {}
    done = threading.Event()

    def deliver(tp: tuple[str, int], response: pr.AlterPartitionResponse) -> None:
        answers[tp] = response
        done.set()

    manager = AlterPartitionManager(controller.send, deliver)
    manager.start()
    return manager, answers, done


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_many_partitions_travel_in_few_requests_one_at_a_time() -> None:
    controller = Controller()
    controller.release.clear()  # hold the first request while 1,000 more changes queue
    manager, answers, _done = run(controller)
    try:
        manager.submit(("t", 0), change(1, (1, 2)))
        wait_for(lambda: controller.in_flight == 1)
        for p in range(1, 1001):
            manager.submit(("t", p), change(p + 1, (1, 2)))
        controller.release.set()
        wait_for(lambda: len(answers) == 1001)
    finally:
        manager.shutdown()
    assert controller.max_in_flight == 1
    assert len(controller.requests) == 2, [len(r) for r in controller.requests]
    assert all(a.error == "NONE" and a.isr == (1, 2) for a in answers.values())
    # Each answer goes back to the change it answers.
    assert {tp: a.request_id for tp, a in answers.items()} == {("t", p): p + 1 for p in range(1001)}


def test_a_newer_change_replaces_an_unsent_one() -> None:
    controller = Controller()
    controller.release.clear()
    manager, answers, _done = run(controller)
    try:
        manager.submit(("t", 9), change(1, (1, 2, 3)))
        wait_for(lambda: controller.in_flight == 1)
        manager.submit(("t", 0), change(2, (1, 2, 3)))
        manager.submit(("t", 0), change(3, (1, 2)))  # replaces request 2, never sent
        controller.release.set()
        wait_for(lambda: len(answers) == 2)
    finally:
        manager.shutdown()
    sent = [(c.partition, c.new_isr) for r in controller.requests for c in r]
    assert sent == [(9, (1, 2, 3)), (0, (1, 2))]
    assert answers[("t", 0)].request_id == 3


def test_a_failed_request_is_retried_with_its_changes() -> None:
    controller = Controller(fail_first=2)
    manager, answers, _done = run(controller)
    try:
        manager.submit(("t", 0), change(7, (1, 3)))
        wait_for(lambda: ("t", 0) in answers)
    finally:
        manager.shutdown()
    assert len(controller.requests) == 3
    assert all([(c.partition, c.new_isr) for c in r] == [(0, (1, 3))] for r in controller.requests)
    assert answers[("t", 0)].request_id == 7 and answers[("t", 0)].error == "NONE"


def test_one_thread_whatever_the_load() -> None:
    controller = Controller()
    before = threading.active_count()
    manager, answers, _done = run(controller)
    try:
        for p in range(5000):
            manager.submit(("t", p), change(p, (1,)))
        wait_for(lambda: len(answers) == 5000)
        assert threading.active_count() <= before + 1
    finally:
        manager.shutdown()
