"""The broker's side of a combined node whose controller runs in a process of its own
(`controller_process`): it starts that process, follows the committed metadata it
streams (a snapshot, then every committed update in order) into the broker's own
image, tells the broker's listeners, and reports back what it applied. Requests for
the controller (ISR changes, producer ids, topic changes) go to the active
controller over gRPC, whichever voter that is.

It offers the same surface as `LocalController`, so the node does not care where
its controller runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import grpc

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord, decode_record, encode_record
from seglog.controller.reassignment import OngoingReassignment, list_reassignments
from seglog.controller.security_control import security_applied
from seglog.node.alter_partition_manager import IsrChangeResult
from seglog.node.broker_pulse import BrokerPulse
from seglog.node.config import NodeConfig
from seglog.node.controller.controller_client import ControllerClient
from seglog.node.controller.controller_requests import IsrChange, Listener
from seglog.node.event_log import EventLogger
from seglog.node.liveness import StallWatchdog, parse_pulse, pulse_interval_s
from seglog.node.security.grpc_tls import open_channel
from seglog.node.security.internode import controller_credentials
from seglog.proto import client_pb2 as pb
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc, errors_pb2, security_pb2_grpc
from seglog.proto import security_pb2 as spb
from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import LogConfig

_log = EventLogger("remote_controller")
START_TIMEOUT_S = 60.0
# A watched loop of the broker that has not gone round for this long (or a session,
# when longer) means it cannot serve: longer than any pause a healthy broker takes
# (a GC, an fsync after gigabytes of writes), far shorter than a produce's timeout.
STALL_BOUND_MIN_S = 5.0
STOP_TIMEOUT_S = 15.0
RPC_TIMEOUT_S = 10.0
ALTER_PARTITION_DEADLINE_S = 5.0
ACK_QUEUE_LIMIT = 1_000


class RemoteController:
    def __init__(
        self,
        config: NodeConfig,
        log_level: str = "INFO",
        on_fatal: Callable[[str], None] = lambda _why: None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.broker_defaults = config.log_config
        self.log_level = log_level
        self.on_fatal = on_fatal
        self.image = MetadataImage()
        self.metadata_offset = -1
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()  # image + listeners
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = threading.Event()
        self._watcher: threading.Thread | None = None
        self._clean = False
        listener = config.controller_listener
        assert listener is not None
        host = "127.0.0.1" if listener.host in ("0.0.0.0", "::", "") else listener.host
        self._own_address = f"{host}:{listener.port}"
        self._own_channel: grpc.Channel | None = None
        self._own_stub_made: cluster_pb2_grpc.ControllerStub | None = None
        self._credentials = controller_credentials(config)
        self.client = ControllerClient(
            config.controller_quorum_voters, self._leader_hint, self._credentials
        )
        self._leader_seen: int | None = None
        self._leader_checked = 0.0
        # The broker's loops beat the watchdog; the pulse tells the controller process,
        # which relays heartbeats only while the pulses come and say it serves.
        self.watchdog = StallWatchdog(
            max(STALL_BOUND_MIN_S, config.broker_session_timeout_ms / 1000)
        )
        self.pulse = BrokerPulse(
            self.watchdog,
            self._send_pulse,
            pulse_interval_s(config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms),
        )
        self._pulse_fd = -1
        # The controller process's pulses back (its stdout): heard last when.
        self._controller_heard = plain_monotonic_s()
        self._controller_silent = False
        # Silent for longer than a session, this broker may have been fenced and lost
        # its leaderships: heard again, it leads only once its image has applied what
        # the quorum committed meanwhile (`_catch_up`). Leading from the old image, it
        # answered a producer whose previous request it had refused with
        # OUT_OF_ORDER_SEQUENCE_NUMBER, which sets off librdkafka's epoch bump.
        self._silences = 0  # silences of more than a session, heard out
        self._caught_up_after = 0  # the last of them whose metadata this broker applied
        self._catch_up_lock = threading.Lock()
        self._catching_up = False
        self.applied_offset = -1  # metadata_offset, once the listeners have it

    # --- lifecycle ---------------------------------------------------------------------

    def load(self, clean: bool) -> None:
        """Start the controller process (it loads the quorum's state itself)."""
        self._clean = clean
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "seglog.node.controller.controller_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the node's own log
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        setup = {"properties": dict(self.config.raw), "clean": clean, "log_level": self.log_level}
        self._proc.stdin.write(json.dumps(setup).encode() + b"\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()  # bounded: the child prints it or exits
        if line.strip() != b"controller-ready":
            code = self._proc.wait(timeout=5)
            raise RuntimeError(
                f"the controller process of node {self.node_id} exited with code {code} "
                "before it was ready (its log lines are in this node's log)"
            )
        self._own_channel = open_channel(self._own_address, None, self._credentials)
        # Pulses never block the broker: a frozen controller process lets the pipe fill,
        # and a pulse that does not fit is dropped (a later one says the same).
        self._pulse_fd = self._proc.stdin.fileno()
        os.set_blocking(self._pulse_fd, False)
        self.pulse.pulse_once()
        self.pulse.start()
        self._controller_heard = plain_monotonic_s()
        threading.Thread(
            target=self._hear_controller, name="controller-pulses", daemon=True
        ).start()
        _log.info("controller_process_started", pid=self._proc.pid, address=self._own_address)

    def _send_pulse(self, line: bytes) -> None:
        try:
            os.write(self._pulse_fd, line)
        except (BlockingIOError, BrokenPipeError):
            pass  # the process is frozen (pipe full) or gone (the watch reports that)
        why = self.leadership_doubt()
        if (why is not None) != self._controller_silent:
            self._controller_silent = why is not None
            if why is not None:
                _log.warning("controller_process_silent", reason=why)
            else:
                _log.info("controller_process_heard_again")

    def _hear_controller(self) -> None:
        """The controller process's pulses, until EOF (it exited: the watch says so)."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        session_s = self.config.broker_session_timeout_ms / 1000
        for line in proc.stdout:
            if parse_pulse(line)[0]:
                now = plain_monotonic_s()
                if now - self._controller_heard > session_s:
                    # Counted before the hearing is: leadership_doubt sees the
                    # silence or the catch-up, at no moment neither.
                    self._silences += 1
                    self._start_catch_up()
                self._controller_heard = now

    def _start_catch_up(self) -> None:
        with self._catch_up_lock:
            if self._catching_up:
                return  # the running catch-up sees the new silence
            self._catching_up = True
        threading.Thread(target=self._catch_up, name="metadata-catch-up", daemon=True).start()

    def _catch_up(self) -> None:
        """Until this broker's image has applied what the quorum had committed when
        its controller process was heard again (as `wait_for_metadata` at start-up);
        without answers from a majority of the voters for two election timeouts, what
        its own controller process has."""
        while True:
            silences = self._silences
            started = plain_monotonic_s()
            grace = started + 2 * self.config.controller_quorum_election_timeout_ms / 1000
            target: int | None = None
            while not self._stopped.is_set() and self._silences == silences:
                if target is None:
                    target = self._voters_commit_index()
                    if target is None and plain_monotonic_s() >= grace:
                        target = -1
                elif self._caught_up_to(target):
                    self._caught_up_after = silences
                    _log.info(
                        "metadata_caught_up_after_silence",
                        offset=self.applied_offset,
                        target=target,
                        seconds=round(plain_monotonic_s() - started, 3),
                    )
                    break
                self._stopped.wait(0.02)
            with self._catch_up_lock:
                if self._stopped.is_set() or self._caught_up_after >= self._silences:
                    self._catching_up = False
                    return

    def leadership_doubt(self) -> str | None:
        """Why this broker must not act as a leader now, or None. Its heartbeats and
        its metadata come from its controller process: silent for longer than a
        session (frozen, wedged), the controller has fenced this broker and moved its
        leaderships, which it cannot learn. Refusing produces sends clients to the
        new leaders instead of timing out here."""
        silent = plain_monotonic_s() - self._controller_heard
        if silent <= self.config.broker_session_timeout_ms / 1000:
            if self._caught_up_after < self._silences:
                return (
                    f"node {self.node_id} has heard its controller process again after "
                    "more than a session of silence and has not yet applied the metadata "
                    "committed meanwhile: its leaderships may have moved"
                )
            return None
        return (
            f"the controller process of node {self.node_id} has not been heard from for "
            f"{silent:.1f} s: this broker is fenced by now and its leaderships have moved"
        )

    def start(self) -> None:
        self._watcher = threading.Thread(target=self._watch, name="metadata-watch", daemon=True)
        self._watcher.start()

    def wait_for_metadata(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the broker's image has caught up with the quorum, as Kafka's broker
        waits for its metadata to reach the high watermark before it serves: a
        restarted node would otherwise answer Metadata from its old snapshot (clients
        told a topic does not exist, or the wrong leaders). Without a quorum leader
        within two election timeouts (a whole cluster starting one node at a time)
        the node starts from what it has, as before."""
        deadline = plain_monotonic_s() + timeout_s
        while self.metadata_offset < 0 and plain_monotonic_s() < deadline:
            self._check_process()
            time.sleep(0.02)
        grace = plain_monotonic_s() + 2 * self.config.controller_quorum_election_timeout_ms / 1000
        target: int | None = None
        # Bounded by the deadline (and, while no leader is known, by the grace).
        while plain_monotonic_s() < deadline:
            self._check_process()
            if target is None:
                target = self._quorum_commit_index()
                if target is None and plain_monotonic_s() >= grace:
                    _log.info("metadata_catch_up_skipped", reason="no quorum leader")
                    return
            elif self._caught_up_to(target):
                _log.info("metadata_caught_up", offset=self.metadata_offset, target=target)
                return
            time.sleep(0.02)
        _log.warning(
            "metadata_catch_up_timed_out",
            offset=self.metadata_offset,
            target=target,
            timeout_s=timeout_s,
        )

    def _check_process(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"the controller process exited ({self._proc.returncode})")

    def _caught_up_to(self, target: int) -> bool:
        """This node's controller process has committed up to `target` and this broker
        has every update it was sent. (Its own commit index, not the image's offset:
        entries without records, such as a new leader's first, are never sent.)"""
        assert self._own_channel is not None
        try:
            own = self._own_stub().DescribeQuorum(cpb.DescribeQuorumRequest(), timeout=1)
        except grpc.RpcError:
            return False
        return own.commit_index >= target and self.applied_offset >= own.published_offset

    def _voters_commit_index(self) -> int | None:
        """The highest commit index a majority of the voters answering reports, or
        None without a majority's answers. Not the leader's alone: the controller
        process that was frozen may still take itself for the leader, with the commit
        index it had before the fence."""
        calls = []
        for voter in self.client.voters:
            with contextlib.suppress(grpc.RpcError, ValueError):
                stub = self.client.controller_stub(voter)
                calls.append(stub.DescribeQuorum.future(cpb.DescribeQuorumRequest(), timeout=0.5))
        answers = []
        for call in calls:
            with contextlib.suppress(grpc.RpcError, grpc.FutureTimeoutError):
                answers.append(call.result().commit_index)
        if len(answers) <= len(self.client.voters) // 2:
            return None
        return max(answers)

    def _quorum_commit_index(self) -> int | None:
        """The active controller's commit index (the metadata log's high watermark),
        or None while no leader is known or it does not answer."""
        leader = self.leader_id
        if leader is None:
            return None
        try:
            r = self.client.controller_stub(leader).DescribeQuorum(
                cpb.DescribeQuorumRequest(), timeout=1
            )
        except grpc.RpcError:
            return None
        return r.commit_index if r.leader_id == leader == r.node_id else None

    def shutdown(self) -> None:
        """Stop the controller process: it makes a controlled shutdown of this broker
        (its leaderships move away) first."""
        self._stopped.set()
        self.pulse.stop()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self._own_channel is not None:
            self._own_channel.close()
        self.client.close()

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)
            listener(self.image, [])

    def topic_config(self, name: str) -> LogConfig:
        with self._lock:
            return self.broker_defaults.with_overrides(self.image.configs.get(name, {}))

    # --- following the metadata ---------------------------------------------------------

    def _watch(self) -> None:
        """Bounded by the process's life: each pass follows one stream until it ends;
        a controller process that exited is fatal for the node."""
        while not self._stopped.is_set():
            if self._proc is not None and self._proc.poll() is not None:
                why = f"the controller process exited with code {self._proc.returncode}"
                _log.error("controller_process_exited", code=self._proc.returncode)
                self.on_fatal(why)
                return
            acks: queue.Queue[cpb.MetadataApplied | None] = queue.Queue(ACK_QUEUE_LIMIT)
            try:
                self._follow(acks)
            except grpc.RpcError as e:
                if not self._stopped.is_set():
                    _log.warning("metadata_watch_ended", code=str(e.code()))
            except Exception:  # noqa: BLE001 - an update this image cannot take
                # Never a silently dead watch (the broker would act on old metadata
                # forever): say so, and follow a new stream, which starts with a snapshot.
                _log.error("metadata_watch_failed", exc=True, offset=self.metadata_offset)
            finally:
                with contextlib.suppress(queue.Full):
                    acks.put_nowait(None)
            self._stopped.wait(0.1)

    def _follow(self, acks: queue.Queue[cpb.MetadataApplied | None]) -> None:
        assert self._own_channel is not None

        def requests() -> Iterator[cpb.MetadataApplied]:
            while True:
                item = acks.get()
                if item is None:
                    return
                yield item

        stub = self._own_stub()
        for update in stub.WatchMetadata(requests()):
            records = [decode_record(r) for r in update.records]
            with self._lock:
                if update.snapshot:
                    image = MetadataImage()
                    for r in records:
                        image.apply(r)
                    self.image = image
                else:
                    for r in records:
                        self.image.apply(r)
                self.metadata_offset = update.offset
                listeners = list(self._listeners)
                image = self.image
            published = [] if update.snapshot else records
            for listener in listeners:
                try:
                    listener(image, published)
                except Exception:  # noqa: BLE001 - a listener must not stop the watch
                    _log.error("metadata_listener_failed", exc=True, offset=update.offset)
            self.applied_offset = update.offset
            try:
                acks.put_nowait(cpb.MetadataApplied(broker_id=self.node_id, offset=update.offset))
            except queue.Full:
                pass  # a later ack carries a later offset

    # --- the quorum ---------------------------------------------------------------------

    def _own_stub(self) -> cluster_pb2_grpc.ControllerStub:
        """The stub for this node's controller process (made once: see ControllerClient)."""
        if self._own_stub_made is None:
            assert self._own_channel is not None
            self._own_stub_made = cluster_pb2_grpc.ControllerStub(self._own_channel)
        return self._own_stub_made

    def _leader_hint(self) -> int | None:
        return self._leader_seen

    @property
    def leader_id(self) -> int | None:
        """The active controller, as the local controller process knows it (asked at
        most every 100 ms)."""
        now = plain_monotonic_s()
        if now - self._leader_checked > 0.1 and self._own_channel is not None:
            self._leader_checked = now
            try:
                r = self._own_stub().DescribeQuorum(cpb.DescribeQuorumRequest(), timeout=1)
                self._leader_seen = None if r.leader_id < 0 else r.leader_id
            except grpc.RpcError:
                pass
        return self._leader_seen

    def describe_quorum(self, timeout_s: float) -> cpb.DescribeQuorumResponse:
        assert self._own_channel is not None
        return self._own_stub().DescribeQuorum(cpb.DescribeQuorumRequest(), timeout=timeout_s)

    # --- requests to the active controller ------------------------------------------------

    def _control(
        self, fn: Callable[[int], cpb.ControlResponse], deadline_s: float = 15.0
    ) -> cpb.ControlResponse:
        r = self.client.call(fn, lambda r: (r.error_code, r.error_message), deadline_s)
        if r.error_code:
            name = errors_pb2.ErrorCode.Name(r.error_code)
            if name == "INVALID_CONFIG":
                raise InvalidConfigError(r.error_message)
            raise ControlError(name, r.error_message)
        return r

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        validate_only: bool = False,
        assignments: Sequence[tuple[int, Sequence[int]]] = (),
    ) -> str:
        request = cpb.CreateTopicRequest(
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            configs=dict(configs),
            validate_only=validate_only,
            assignments=[
                cpb.ReplicaAssignment(partition=p, replicas=list(r)) for p, r in assignments
            ],
        )
        r = self._control(
            lambda n: self.client.controller_stub(n).CreateTopic(request, timeout=RPC_TIMEOUT_S)
        )
        if not validate_only:
            self._await(lambda image: name in image.topics)
        return str(r.topic_id)

    def create_partitions(
        self,
        name: str,
        total_count: int,
        validate_only: bool = False,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        request = cpb.CreatePartitionsRequest(
            name=name,
            total_count=total_count,
            validate_only=validate_only,
            manual=assignments is not None,
            assignments=[cpb.ReplicaAssignment(replicas=list(r)) for r in assignments or ()],
        )
        self._control(
            lambda n: self.client.controller_stub(n).CreatePartitions(
                request, timeout=RPC_TIMEOUT_S
            )
        )
        if not validate_only:
            self._await(
                lambda image: (
                    name in image.topics and len(image.topics[name].partitions) >= total_count
                )
            )

    def elect_leaders(
        self, election: str, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str]:
        request = cpb.ElectLeadersControlRequest(
            election_type=election,
            all_partitions=partitions is None,
            partitions=[cpb.ElectionPartition(topic=t, partition=p) for t, p in partitions or ()],
        )
        r = self.client.call(
            lambda n: self.client.controller_stub(n).ElectLeaders(request, timeout=RPC_TIMEOUT_S),
            lambda r: (r.error_code, r.error_message),
            15.0,
        )
        if r.error_code:
            raise ControlError(errors_pb2.ErrorCode.Name(r.error_code), r.error_message)
        results = {
            (x.topic, x.partition): errors_pb2.ErrorCode.Name(x.error_code) for x in r.results
        }
        elected = {k for k, v in results.items() if v == "NONE"}
        if elected:
            # Answer once this broker's metadata shows the new leaders too.
            self._await(
                lambda image: all(
                    k[0] in image.topics and image.topics[k[0]].partitions[k[1]].leader >= 0
                    for k in elected
                )
            )
        return results

    def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, tuple[int, ...] | None]]
    ) -> dict[tuple[str, int], tuple[str, str]]:
        request = pb.AlterPartitionReassignmentsRequest(
            partitions=[
                pb.PartitionReassignment(
                    topic=t, partition=p, replicas=target or (), cancel=target is None
                )
                for t, p, target in requests
            ]
        )
        r = self.client.call(
            lambda n: self.client.controller_stub(n).AlterPartitionReassignments(
                request, timeout=RPC_TIMEOUT_S
            ),
            lambda r: (r.error_code, r.error_message),
            15.0,
        )
        if r.error_code:
            raise ControlError(errors_pb2.ErrorCode.Name(r.error_code), r.error_message)
        results = {
            (x.topic, x.partition): (errors_pb2.ErrorCode.Name(x.error_code), x.error_message)
            for x in r.results
        }
        changed = {k for k, v in results.items() if v[0] == "NONE"}
        wanted = {(t, p): target for t, p, target in requests}

        def applied(image: MetadataImage) -> bool:
            # This broker's image shows each change: the target as the replicas'
            # prefix, or (a cancel) no reassignment left.
            for t, p in changed:
                state = image.partition(t, p)
                target = wanted[(t, p)]
                if state is None:
                    continue
                if target is None and state.reassigning:
                    return False
                if target is not None and state.replicas[: len(target)] != target:
                    return False
            return True

        self._await(applied)
        return results

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[OngoingReassignment]:
        """From this broker's image (the controller's committed metadata, applied)."""
        return list_reassignments(self.image, partitions)

    def delete_topic(self, name: str) -> None:
        request = cpb.DeleteTopicRequest(name=name)
        self._control(
            lambda n: self.client.controller_stub(n).DeleteTopic(request, timeout=RPC_TIMEOUT_S)
        )
        self._await(lambda image: name not in image.topics)

    def alter_configs(
        self, topic: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        self._alter_configs(topic, changes, validate_only, broker_resource=False)

    def alter_broker_configs(
        self, broker: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        self._alter_configs(broker, changes, validate_only, broker_resource=True)

    def _alter_configs(
        self,
        name: str,
        changes: Mapping[str, str | None],
        validate_only: bool,
        broker_resource: bool,
    ) -> None:
        """A topic's (or, broker_resource, a broker's) config overrides: None deletes
        one. Unless validate_only, returns once this broker's image holds them."""
        request = cpb.AlterTopicConfigsRequest(
            topic=name,
            set={k: v for k, v in changes.items() if v is not None},
            delete=[k for k, v in changes.items() if v is None],
            validate_only=validate_only,
            broker_resource=broker_resource,
        )
        self._control(
            lambda n: self.client.controller_stub(n).AlterTopicConfigs(
                request, timeout=RPC_TIMEOUT_S
            )
        )
        if not validate_only:
            wanted = dict(changes)

            def applied(image: MetadataImage) -> bool:
                configs = image.broker_configs if broker_resource else image.configs
                held = configs.get(name, {})
                return all(held.get(k) == v for k, v in wanted.items())

            self._await(applied)

    def commit_security(self, proposed: Sequence[MetadataRecord]) -> list[tuple[str, str]]:
        """SCRAM credentials and ACL entries, committed by the active controller; the
        answer comes once this broker's image holds what was taken."""
        request = spb.SecurityRecords(records=[encode_record(r) for r in proposed])
        answer = self.client.call(
            lambda n: security_pb2_grpc.SecurityControlStub(
                self.client.channel(n)
            ).CommitSecurityRecords(request, timeout=RPC_TIMEOUT_S),
            # A refusal of the whole (NOT_CONTROLLER: ask another voter) is one result.
            lambda r: (r.results[0].error_code if r.results else 0, ""),
        )
        results = [
            (errors_pb2.ErrorCode.Name(r.error_code), r.error_message) for r in answer.results
        ]
        if len(results) != len(proposed):
            # Refused whole (e.g. NOT_CONTROLLER to the end): one result for all.
            return [results[0] if results else ("UNKNOWN_SERVER_ERROR", "")] * len(proposed)
        taken = [r for r, (e, m) in zip(proposed, results, strict=True) if e == "NONE" and not m]
        self._await(lambda image: all(security_applied(image, r) for r in taken))
        return results

    def _await(self, ready: Callable[[MetadataImage], bool], timeout_s: float = 10.0) -> None:
        """Answer once this broker applied the change too, so the client's next request
        here sees it."""
        deadline = plain_monotonic_s() + timeout_s
        while not ready(self.image) and plain_monotonic_s() < deadline:
            time.sleep(0.01)

    def alter_partitions(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> list[IsrChangeResult]:
        request = cpb.AlterPartitionRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            items=[
                cpb.AlterPartitionItem(
                    topic=c.topic,
                    partition=c.partition,
                    leader_epoch=c.leader_epoch,
                    partition_epoch=c.partition_epoch,
                    new_isr=c.new_isr,
                    new_isr_broker_epochs=c.new_isr_broker_epochs,
                )
                for c in changes
            ],
        )
        r = self.client.call(
            lambda n: self.client.controller_stub(n).AlterPartition(request, timeout=RPC_TIMEOUT_S),
            lambda r: (r.error_code, r.error_message),
            deadline_s=ALTER_PARTITION_DEADLINE_S,
        )
        if r.error_code:
            raise ControlError(errors_pb2.ErrorCode.Name(r.error_code), r.error_message)
        if len(r.results) != len(changes):
            raise ControlError("UNKNOWN_SERVER_ERROR", "AlterPartition answer of another size")
        return [
            IsrChangeResult(
                errors_pb2.ErrorCode.Name(x.error_code),
                x.error_message,
                x.leader_epoch,
                x.partition_epoch,
                tuple(x.isr),
            )
            for x in r.results
        ]

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        r = self.client.call(
            lambda n: self.client.controller_stub(n).AllocateProducerIds(
                cpb.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch),
                timeout=RPC_TIMEOUT_S,
            ),
            lambda r: (r.error_code, r.error_message),
        )
        if r.error_code:
            raise ControlError(errors_pb2.ErrorCode.Name(r.error_code), r.error_message)
        return r.first_producer_id, r.end_producer_id
