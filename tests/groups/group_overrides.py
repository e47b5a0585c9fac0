"""Node settings for the group tests: rebalances without Kafka's 3 s initial delay,
and sessions short enough to see expiries in seconds. A module of its own: a test
cannot import it from `conftest`, a name every test folder's conftest shares."""

GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
}
