"""The web console (`seglog console`): a web UI over the cluster's own APIs — the
clients' Admin, Consumer and Producer and the nodes' /metrics — never their files."""
