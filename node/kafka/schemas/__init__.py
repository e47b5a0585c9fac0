"""Kafka message schemas kafka-python's codec lacks, in its JSON form (the field
layout of Kafka's wire format); messages.py builds the classes from them."""
