"""The transaction coordinator's broker settings, by Kafka's names and with Kafka's
defaults (a module of its own: node/config.py reads them without importing the
coordinator)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's names and defaults."""

    transaction_state_log_num_partitions: int = 50  # transaction.state.log.num.partitions
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions (AddOffsetsToTxn)
    # add.partitions.to.txn.retry.backoff.max.ms: how long an AddPartitionsToTxn (or
    # AddOffsetsToTxn) that meets its previous transaction completing is held for it
    # before CONCURRENT_TRANSACTIONS (0: answered at once).
    add_partitions_to_txn_retry_backoff_max_ms: int = 100
