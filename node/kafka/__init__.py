"""Kafka's wire protocol on a node: the socket server (Kafka's network model), the
codec (kafka-python's classes generated from Kafka's JSON message schemas) and the
request handlers, which call the same node methods as the gRPC service."""
