"""A librdkafka delivery report of a record acknowledged implicitly (by a later batch's
success) has no offset: confluent-kafka's Message hands librdkafka's OFFSET_INVALID over
as None. The workload records it as acknowledged without an offset (the checker then
requires it to be read); it used to raise in the delivery callback, which left the record
without an outcome."""

from __future__ import annotations

import pytest

from seglog.chaos.kafka_workload import delivered_offset

ck = pytest.importorskip("confluent_kafka")


@pytest.mark.parametrize(("raw", "expected"), [(-1001, None), (0, 0), (4117, 4117)])
def test_a_delivery_reports_offset_as_confluent_kafka_hands_it_over(raw, expected):
    message = ck.Message(topic="t", partition=0, offset=raw, value=b"v")
    assert delivered_offset(message.offset()) == expected
