"""The `seglog` command line: Kafka's tools (kafka-topics, console producer and
consumer, kafka-configs, kafka-dump-log, ...) as subcommands, over seglog's clients.
It sits above node/ and client/: the node never imports the client."""
