#!/usr/bin/env python3
"""Container health check: ask the node's standard gRPC health service.

Exit 0 when the service reports SERVING, 1 otherwise (Docker's HEALTHCHECK
contract). The image runs it as

    /opt/seglog/bin/python /usr/local/lib/seglog/healthcheck.py

Defaults: 127.0.0.1:9192 (the listener inside the container), service
"seglog.v1.SegLog". Override with --address/--service or the environment
variables SEGLOG_HEALTH_ADDRESS / SEGLOG_HEALTH_SERVICE. A listener mapped to SSL
(the secure profile) is asked over TLS: SEGLOG_HEALTH_CAFILE (the CA) and
SEGLOG_HEALTH_CERTFILE (a PEM with key and certificate, for mTLS).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

DEFAULT_ADDRESS = "127.0.0.1:9192"
DEFAULT_SERVICE = "seglog.v1.SegLog"


def _channel(address: str, cafile: str | None, certfile: str | None) -> grpc.Channel:
    if not cafile:
        return grpc.insecure_channel(address)
    key = chain = None
    if certfile:
        with open(certfile, "rb") as f:
            pem = f.read()
        cut = pem.index(b"-----BEGIN CERTIFICATE-----")
        key, chain = pem[:cut], pem[cut:]
    with open(cafile, "rb") as f:
        root = f.read()
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root, key, chain))


def check(
    address: str,
    service: str,
    timeout_s: float,
    cafile: str | None = None,
    certfile: str | None = None,
) -> tuple[bool, str]:
    """(healthy, one line describing the answer)."""
    with _channel(address, cafile, certfile) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            name = code.name if code is not None else type(e).__name__
            return False, f"{address} {service or '(server)'}: {name}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return response.status == health_pb2.HealthCheckResponse.SERVING, (
        f"{address} {service or '(server)'}: {status}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gRPC health check of a seglog node")
    parser.add_argument(
        "--address", default=os.environ.get("SEGLOG_HEALTH_ADDRESS", DEFAULT_ADDRESS)
    )
    parser.add_argument(
        "--service", default=os.environ.get("SEGLOG_HEALTH_SERVICE", DEFAULT_SERVICE)
    )
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    args = parser.parse_args(argv)
    healthy, line = check(
        args.address,
        args.service,
        args.timeout,
        os.environ.get("SEGLOG_HEALTH_CAFILE"),
        os.environ.get("SEGLOG_HEALTH_CERTFILE"),
    )
    print(line)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
