"""Seeded simulators (as etcd's rafttest/): they drive the production replica, controller,
Raft core and group coordinator over in-memory logs and networks, and check invariants."""
