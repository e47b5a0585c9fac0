"""Consumer groups: the classic group coordinator (a state machine without I/O), the
`__consumer_offsets` records it writes and replays, its seeded simulator, and the I/O
shells that run it in a node (the offsets partitions, the gRPC servicer)."""
