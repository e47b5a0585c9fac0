"""The request and response classes of the schemas in this folder (kafka-python's
codec reads each class's JSON, by its name, from the package of `load_json`)."""

import sys

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):
    pass


class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=_HERE):
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=_HERE):
    pass
