"""Kafka's transaction coordinator (docs/transactions.md)."""
