"""Starting seglog's nodes on this machine, for tests, benchmarks, chaos and `seglog local
up`: one node process (`node_process`), a cluster of them (`cluster`, `kafka_cluster`),
`seglog local up|status|down` (`local_cluster`), the ports they listen on (`ports`, the
one place ports are chosen), whether a node serves (`health`) and its processes by pid
(`processes`); `browser` is the headless Chromium the console's tests drive."""
