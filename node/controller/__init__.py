"""The controller's process shell: the quorum controller thread, its Raft transport and
storage, the gRPC servicer and client, and a broker's local or remote view of it."""
