"""Requests of the transaction APIs for tests/kafka/test_protocol.py's cross-check with
kio: each is answered without changing the test topic (a transactional id with no
coordinator state, an empty WriteTxnMarkers)."""

from __future__ import annotations

from kafka.protocol import admin as a
from kafka.protocol import producer as p

TXN_ID = "proto-tx"


def txn_request(api_key: int, v: int, topic: str) -> object | None:
    if api_key == 24:
        R = p.AddPartitionsToTxnRequest
        if v >= 4:  # a partition leader's KIP-890 question: nothing is added
            return R[v](
                transactions=[
                    R.AddPartitionsToTxnTransaction(
                        transactional_id=TXN_ID,
                        producer_id=0,
                        producer_epoch=0,
                        verify_only=True,
                        topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
                    )
                ]
            )
        return R[v](
            v3_and_below_transactional_id=TXN_ID,
            v3_and_below_producer_id=0,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
        )
    if api_key == 25:
        return p.AddOffsetsToTxnRequest[v](
            transactional_id=TXN_ID, producer_id=0, producer_epoch=0, group_id="proto-g"
        )
    if api_key == 26:
        return p.EndTxnRequest[v](
            transactional_id=TXN_ID, producer_id=0, producer_epoch=0, committed=True
        )
    if api_key == 27:
        return p.WriteTxnMarkersRequest[v](markers=[])
    if api_key == 28:  # no partitions: nothing is written
        return p.TxnOffsetCommitRequest[v](
            transactional_id=TXN_ID,
            group_id="proto-g",
            producer_id=0,
            producer_epoch=0,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[],
        )
    if api_key == 61:
        R = a.DescribeProducersRequest
        return R[v](topics=[R.TopicRequest(name=topic, partition_indexes=[0])])
    if api_key == 65:
        return a.DescribeTransactionsRequest[v](transactional_ids=[TXN_ID])
    if api_key == 66:
        return a.ListTransactionsRequest[v](
            state_filters=[], producer_id_filters=[], duration_filter=-1
        )
    return None
