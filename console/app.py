"""The console's web app (Starlette, Jinja2 templates rendered on the server): pages
read the shared Snapshot or ask the cluster through ClusterIO; live parts are
server-sent events carrying rendered HTML that console.js swaps in."""

from __future__ import annotations

import asyncio
import datetime
import html
import json
import math
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from seglog.client.cluster import TopicPartition
from seglog.client.errors import KafkaError

from . import view
from .cluster_io import MAX_RECORDS_PER_PAGE, UNKNOWN_TOPIC, ClusterIO
from .decode import show
from .refresher import Refresher
from .security_view import Acl, SecurityClient, User

HERE = Path(__file__).parent
PARTITIONS_PER_PAGE = 100
DEFAULT_RECORDS = 50
# Live record streams open at once (each holds a consumer); more are refused.
MAX_FOLLOWERS = 16
SSE_POLL_S = 0.5
SSE_KEEPALIVE_S = 15.0
FOLLOW_POLL_MS = 500
MAX_FOLLOW_BATCH = 200


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _rate(n: float | None, unit: str = "B") -> str:
    if n is None:
        return "-"
    return (_bytes(n) if unit == "B" else f"{n:.1f}") + ("/s" if unit == "B" else f" {unit}/s")


def _duration_ms(value: str | None) -> str:
    """A retention.ms value as people read it: -1 is forever."""
    if value is None or not value.lstrip("-").isdigit():
        return value or "-"
    ms = int(value)
    if ms < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def _time_ms(ms: int | float | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S.%f"
    )[:-3]


def _chart(
    points: Sequence[tuple[float, ...]],
    labels: str = "bytes in/s,bytes out/s",
    unit: str = "B",
    width: int = 600,
    height: int = 80,
) -> str:
    """An inline SVG of time series (each point: time, then one value per label):
    drawn here, so there is no chart library to load and nothing to fail offline."""
    if len(points) < 2:
        return '<p class="muted chart-empty">The chart appears after two refreshes.</p>'
    names = labels.split(",")
    top = max(max(p[1:]) for p in points) or 1.0
    t0, t1 = points[0][0], points[-1][0]
    span = (t1 - t0) or 1.0

    def path(i: int) -> str:
        return " ".join(
            f"{(p[0] - t0) / span * width:.1f},{height - p[i] / top * (height - 14) - 2:.1f}"
            for p in points
        )

    lines = "".join(
        f'<polyline class="s{i}" fill="none" points="{path(i + 1)}"/>' for i in range(len(names))
    )
    legend = " ".join(f'<span class="s{i}">■</span> {html.escape(n)}' for i, n in enumerate(names))
    last = ",".join(f"{v:g}" for v in points[-1][1:])
    top_text = _rate(top) if unit == "B" else f"{top:,.0f}{(' ' + unit) if unit else ''}"
    return (
        f'<figure class="chart" data-points="{len(points)}" data-last="{last}">'
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">'
        f'{lines}<text x="4" y="11">max {html.escape(top_text)}</text></svg>'
        f"<figcaption>{legend}, over {(t1 - t0):.0f} s</figcaption></figure>"
    )


def _sse(event: str, html: str) -> str:
    return f"event: {event}\n" + "".join(f"data: {line}\n" for line in html.splitlines()) + "\n"


def _int(value: str | None, name: str, default: int | None = None) -> int | None:
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None


class Console:
    """The app's state: the shared refresher and the per-request cluster calls."""

    def __init__(self, refresher: Refresher, io: ClusterIO, security: SecurityClient) -> None:
        self.refresher = refresher
        self.io = io
        self.security = security
        self.followers = anyio.Semaphore(MAX_FOLLOWERS)
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            bytes=_bytes,
            rate=_rate,
            time_ms=_time_ms,
            duration_ms=_duration_ms,
            chart=_chart,
            show=show,
        )
        self.env.globals.update(bootstrap=io.bootstrap)

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status)

    def snapshot(self) -> view.Snapshot:
        snap = self.refresher.snapshot
        if snap is None:
            snap = self.refresher.wait_first(10.0)
        if snap is None:
            raise KafkaError("the console has not heard from the cluster yet")
        return snap

    # --- pages -------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        snap = self.snapshot()
        return self.render(
            "overview.html", page="overview", snap=snap, summary=view.summarize(snap)
        )

    def topics(self, request: Request, status: int = 200, **extra: Any) -> Response:
        snap = self.snapshot()
        q = request.query_params.get("q", "")
        internal = request.query_params.get("internal") == "1"
        page = _int(request.query_params.get("page"), "page", 1) or 1
        listing = view.filter_topics(view.topic_rows(snap), q, page, internal)
        try:
            configs = self.io.list_configs([r.name for r in listing.rows])
        except KafkaError:
            configs = {}  # the columns say '-'; the list itself is the snapshot's
        return self.render(
            "topics.html",
            status,
            page="topics",
            snap=snap,
            listing=listing,
            q=q,
            internal=internal,
            configs=configs,
            **extra,
        )

    async def create_topic(self, request: Request) -> Response:
        form = await _form(request)
        name = str(form.get("name", "")).strip()
        try:
            if not name:
                raise ValueError("the topic needs a name")
            partitions = _int(str(form.get("partitions", "")), "partitions", -1)
            rf = _int(str(form.get("replication_factor", "")), "replication factor", -1)
            configs = dict(_pairs(form.get("configs", ""), "config"))
            assert partitions is not None and rf is not None
            await anyio.to_thread.run_sync(self.io.create_topic, name, partitions, rf, configs)
        except (KafkaError, ValueError) as e:
            failed = f"Topic {name!r} was not created: {e}"
            return await anyio.to_thread.run_sync(
                lambda: self.topics(request, 400, error=failed, form=form)
            )
        return RedirectResponse(f"/topics/{name}?created=1", status_code=303)

    def topic(
        self, request: Request, notice: str = "", error: str = "", status: int = 200
    ) -> Response:
        snap = self.snapshot()
        name = request.path_params["name"]
        # One created a moment ago is not in the snapshot yet: asked for.
        described = snap.topic(name) or self.io.describe_topic(name)
        page = _int(request.query_params.get("page"), "page", 1) or 1
        pages = max(1, math.ceil(len(described.partitions) / PARTITIONS_PER_PAGE))
        page = min(max(page, 1), pages)
        shown = described.partitions[(page - 1) * PARTITIONS_PER_PAGE : page * PARTITIONS_PER_PAGE]
        offsets = self.io.offsets([TopicPartition(name, p.partition) for p in shown])
        try:
            configs = self.io.configs(name)
            config_error = ""
        except KafkaError as e:
            configs, config_error = [], str(e)
        return self.render(
            "topic.html",
            status,
            page="topics",
            notice=notice,
            error=error,
            snap=snap,
            topic=described,
            partitions=shown,
            offsets={tp.partition: o for tp, o in offsets.items()},
            part_page=page,
            part_pages=pages,
            configs=configs,
            config_error=config_error,
            rates=snap.topic_rates.get(name),
            created=request.query_params.get("created") == "1",
        )

    async def alter_configs(self, request: Request) -> Response:
        """Set (or, with an empty value, remove) one topic config override; the node
        validates it (Kafka's incrementalAlterConfigs) and its refusal is shown."""
        form = await _form(request)
        name = request.path_params["name"]
        key = form.get("name", "").strip()
        value = form.get("value", "").strip()
        try:
            if not key:
                raise ValueError("which config? the form has no name")
            await anyio.to_thread.run_sync(
                lambda: self.io.admin.alter_configs(
                    name, set={key: value} if value else None, delete=() if value else [key]
                )
            )
        except (KafkaError, ValueError) as e:
            failed = f"{key} was not changed: {e}"
            return await anyio.to_thread.run_sync(
                lambda: self.topic(request, error=failed, status=400)
            )
        done = f"{key} set to {value}." if value else f"{key} override removed."
        return await anyio.to_thread.run_sync(lambda: self.topic(request, notice=done))

    def messages(self, request: Request, notice: str = "", error: str = "") -> Response:
        snap = self.snapshot()
        name = request.path_params["name"]
        params = request.query_params
        # One created a moment ago is not in the snapshot yet: asked for.
        described = snap.topic(name) or self.io.describe_topic(name)
        partition = _int(params.get("partition"), "partition", 0)
        assert partition is not None
        if partition not in {p.partition for p in described.partitions}:
            raise ValueError(f"topic {name!r} has no partition {partition}")
        limit = _int(params.get("limit"), "limit", DEFAULT_RECORDS) or DEFAULT_RECORDS
        if not 1 <= limit <= MAX_RECORDS_PER_PAGE:
            raise ValueError(f"limit must be 1..{MAX_RECORDS_PER_PAGE}, got {limit}")
        tp = TopicPartition(name, partition)
        (bounds,) = self.io.offsets([tp]).values() or (None,)
        if bounds is None:
            raise KafkaError(f"partition {name}-{partition} has no leader to read from")
        offset = _int(params.get("offset"), "offset")
        when = params.get("timestamp", "").strip()
        if when:
            stamp = _parse_time(when)
            offset = self.io.offset_for_time(tp, stamp)
        if offset is None:
            offset = max(bounds.high_watermark - limit, bounds.log_start)
        records = self.io.browse(tp, offset, limit)
        produced = params.get("produced")
        if produced is not None and not notice:
            notice = f"Record produced to partition {partition} at offset {produced}."
        return self.render(
            "messages.html",
            page="topics",
            snap=snap,
            topic=described,
            partition=partition,
            offset=offset,
            limit=limit,
            timestamp=when,
            bounds=bounds,
            records=records,
            follow_from=(records[-1].offset + 1) if records else max(offset, bounds.log_start),
            notice=notice,
            error=error,
        )

    async def produce(self, request: Request) -> Response:
        form = await _form(request)
        name = request.path_params["name"]
        try:
            partition = _int(str(form.get("partition", "")), "partition")
            key_text = str(form.get("key", ""))
            headers = [(k, v.encode()) for k, v in _pairs(form.get("headers", ""), "header")]
            written = await anyio.to_thread.run_sync(
                self.io.produce,
                name,
                partition,
                key_text.encode() if key_text else None,
                str(form.get("value", "")).encode(),
                headers,
            )
        except (KafkaError, ValueError) as e:
            failed = f"The record was not produced: {e}"
            return await anyio.to_thread.run_sync(lambda: self.messages(request, error=failed))
        return RedirectResponse(
            f"/topics/{name}/messages?partition={written[0]}&offset={written[1]}"
            f"&produced={written[1]}",
            status_code=303,
        )

    def groups(self, request: Request) -> Response:
        snap = self.snapshot()
        return self.render("groups.html", page="groups", snap=snap, groups=self.io.list_groups())

    def group(
        self, request: Request, notice: str = "", error: str = "", status: int = 200
    ) -> Response:
        snap = self.snapshot()
        detail = self.io.group(request.path_params["group"])
        topics = sorted({r.topic for r in detail.rows})
        return self.render(
            "group.html",
            status,
            page="groups",
            snap=snap,
            detail=detail,
            topics=topics,
            total_lag=sum(r.lag for r in detail.rows if r.lag is not None),
            notice=notice,
            error=error,
        )

    async def reset_group(self, request: Request) -> Response:
        form = await _form(request)
        group = request.path_params["group"]
        topic = str(form.get("topic", "")) or None
        target = str(form.get("target", ""))
        try:
            offset = _int(str(form.get("offset", "")), "offset")
            new = await anyio.to_thread.run_sync(self.io.reset_group, group, topic, target, offset)
        except (KafkaError, ValueError) as e:
            refused = f"Offsets not reset: {e}"
            return await anyio.to_thread.run_sync(
                lambda: self.group(request, error=refused, status=409)
            )
        done = ", ".join(
            f"{tp.topic}-{tp.partition}: {o}"
            for tp, o in sorted(new.items(), key=lambda x: (x[0].topic, x[0].partition))
        )
        return await anyio.to_thread.run_sync(
            lambda: self.group(request, notice=f"Offsets reset ({done}).")
        )

    def security_page(self, request: Request) -> Response:
        snap = self.snapshot()
        acls: list[Acl] = []
        users: list[User] = []
        acl_error = user_error = ""
        try:
            acls = self.security.acls()
        except KafkaError as e:
            acl_error = str(e)
        try:
            users = self.security.users()
        except KafkaError as e:
            user_error = str(e)
        principal = request.query_params.get("principal", "").strip()
        if principal:
            acls = [a for a in acls if principal.lower() in a.principal.lower()]
        return self.render(
            "security.html",
            page="security",
            snap=snap,
            acls=acls,
            users=users,
            acl_error=acl_error,
            user_error=user_error,
            principal=principal,
        )

    # --- live updates --------------------------------------------------------------------

    def _snapshot_events(self, event: str, render: Callable[[view.Snapshot], str]) -> Response:
        """`render(snapshot)` pushed to the viewer each time the shared snapshot
        changes: the page's live part, at no cost to the cluster."""

        async def stream() -> AsyncIterator[str]:
            last = -1
            idle = 0.0
            while True:
                snap = self.refresher.snapshot
                if snap is not None and snap.version != last:
                    last = snap.version
                    idle = 0.0
                    yield _sse(event, render(snap))
                elif idle >= SSE_KEEPALIVE_S:
                    idle = 0.0
                    yield ": keep-alive\n\n"
                await asyncio.sleep(SSE_POLL_S)
                idle += SSE_POLL_S

        return StreamingResponse(stream(), media_type="text/event-stream", headers=_NO_CACHE)

    async def overview_events(self, request: Request) -> Response:
        template = self.env.get_template("_overview.html")
        return self._snapshot_events(
            "overview", lambda snap: template.render(snap=snap, summary=view.summarize(snap))
        )

    async def topic_chart_events(self, request: Request) -> Response:
        name = request.path_params["name"]
        return self._snapshot_events(
            "chart", lambda snap: _chart(snap.topic_history.get(name, ()), "messages in/s", "msg/s")
        )

    async def group_chart_events(self, request: Request) -> Response:
        group = request.path_params["group"]
        return self._snapshot_events(
            "chart", lambda snap: _chart(snap.group_history.get(group, ()), "lag", "")
        )

    async def follow(self, request: Request) -> Response:
        """New records of one partition from `offset`, as table rows, as they come."""
        name = request.path_params["name"]
        partition = _int(request.query_params.get("partition"), "partition", 0)
        offset = _int(request.query_params.get("offset"), "offset", 0)
        assert partition is not None and offset is not None
        tp = TopicPartition(name, partition)
        if self.followers.value == 0:
            return Response(
                f"{MAX_FOLLOWERS} live streams are open already; try again later",
                status_code=503,
            )
        template = self.env.get_template("_records.html")

        async def stream() -> AsyncIterator[str]:
            async with self.followers:
                consumer = await anyio.to_thread.run_sync(self.io.consumer)
                try:
                    consumer.assign([tp])
                    consumer.seek(tp, offset)
                    yield _sse("status", "live")
                    idle = 0.0
                    while True:
                        batch = await anyio.to_thread.run_sync(
                            lambda: consumer.poll(
                                timeout_ms=FOLLOW_POLL_MS, max_records=MAX_FOLLOW_BATCH
                            )
                        )
                        records = batch.get(tp, [])
                        if records:
                            idle = 0.0
                            yield _sse("records", template.render(records=records))
                        else:
                            idle += FOLLOW_POLL_MS / 1000
                            if idle >= SSE_KEEPALIVE_S:
                                idle = 0.0
                                yield ": keep-alive\n\n"
                finally:
                    await anyio.to_thread.run_sync(lambda: consumer.close(autocommit=False))

        return StreamingResponse(stream(), media_type="text/event-stream", headers=_NO_CACHE)

    def api_snapshot(self, request: Request) -> Response:
        """The overview's figures as JSON (the benchmark and scripts read them)."""
        snap = self.snapshot()
        summary = view.summarize(snap)
        return Response(
            json.dumps(
                {
                    "version": snap.version,
                    "cluster_id": snap.cluster_id,
                    "controller_id": snap.controller_id,
                    "summary": _fields(summary),
                    "nodes": [_fields(n) for n in snap.nodes],
                    "errors": list(snap.errors),
                    "refresh_s": self.refresher.last_duration_s,
                }
            ),
            media_type="application/json",
        )


_NO_CACHE = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _fields(obj: object) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}  # type: ignore[attr-defined]


async def _form(request: Request) -> dict[str, str]:
    """The posted form (the pages' forms are urlencoded; anything else is refused
    rather than read as empty)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ValueError(f"expected a form (application/x-www-form-urlencoded), got {kind!r}")
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[-1] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


def _pairs(text: str, what: str) -> list[tuple[str, str]]:
    """A textarea's `key=value` lines (blank lines skipped); a line without `=` or a
    key is an error naming it."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what} line {line!r} is not key=value")
        out.append((key.strip(), value.strip()))
    return out


def _parse_time(text: str) -> int:
    """An ISO date-time (UTC when it names no zone) in ms."""
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS (e.g. 2024-01-31T12:00:00)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def same_origin(request: Request) -> bool:
    """A form posted from the console's own pages. Browsers name the page a POST came
    from (Origin); one from another site must not create topics or reset offsets
    through a console that trusts whoever can reach it."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        # No Origin: not a browser's cross-site form (they all send it), or a
        # privacy-stripped one; Sec-Fetch-Site tells those apart.
        return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")
    return urllib.parse.urlsplit(origin).netloc == request.headers.get("host", "")


def build_app(console: Console, host: str = "127.0.0.1") -> Starlette:
    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Any]:
        """A cluster error or bad input is a page saying so, never a stack trace."""

        async def endpoint(request: Request) -> Response:
            if request.method == "POST" and not same_origin(request):
                return Response(
                    "a form from another site is refused (Origin "
                    f"{request.headers.get('origin')!r}, this console is "
                    f"{request.headers.get('host')!r})",
                    status_code=403,
                )
            try:
                return await handler(request)
            except (KafkaError, ValueError) as e:
                status = 404 if isinstance(e, UNKNOWN_TOPIC) else 400
                return console.render(
                    "error.html", status, page="", snap=console.refresher.snapshot, error=str(e)
                )

        return endpoint

    def sync(handler: Callable[[Request], Response]) -> Callable[[Request], Any]:
        """A page that asks the cluster, run in a worker thread."""

        async def in_thread(request: Request) -> Response:
            return await anyio.to_thread.run_sync(handler, request)

        return guarded(in_thread)

    routes = [
        Route("/", sync(console.overview)),
        Route("/topics", sync(console.topics)),
        Route("/topics", guarded(console.create_topic), methods=["POST"]),
        Route("/topics/{name}", sync(console.topic)),
        Route("/topics/{name}/configs", guarded(console.alter_configs), methods=["POST"]),
        Route("/topics/{name}/messages", sync(console.messages)),
        Route("/topics/{name}/messages", guarded(console.produce), methods=["POST"]),
        Route("/topics/{name}/follow", guarded(console.follow)),
        Route("/groups", sync(console.groups)),
        Route("/groups/{group}", sync(console.group)),
        Route("/security", sync(console.security_page)),
        Route("/groups/{group}/reset", guarded(console.reset_group), methods=["POST"]),
        Route("/events/overview", console.overview_events),
        Route("/events/topics/{name}/chart", console.topic_chart_events),
        Route("/events/groups/{group}/chart", console.group_chart_events),
        Route("/api/snapshot", sync(console.api_snapshot)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    # Served on loopback, pages answer only to loopback names: a web page whose own
    # name resolves to 127.0.0.1 (DNS rebinding) must not read them.
    middleware = (
        [Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_NAMES))]
        if host in LOOPBACK_NAMES
        else []
    )
    return Starlette(routes=routes, middleware=middleware)
