"""The controller's pure core: the Raft log, metadata records and image, and the
controller's decisions (placement, ISR, reassignment, broker sessions, security records).
No sockets, threads or clocks: the shell is seglog.node.controller."""
