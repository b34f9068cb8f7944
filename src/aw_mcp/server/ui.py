"""``serve --ui``: a read-only page at ``/ui`` with the live episodes and their timelines.

The page is the ``aw-mcp view`` report (same templates) of the episodes the server holds now,
most recently used first, reloading itself every few seconds. It shows what agents sent and
what the world model answered, so it sits behind the same guards as ``/mcp``: the Host/Origin
checks (loopback only unless allowed hosts are configured) and the bearer token when one is
set (``BearerTokenMiddleware`` wraps the whole application).
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from aw_mcp.episode.store import EpisodeStore
from aw_mcp.viewer.episodes import episode_view
from aw_mcp.viewer.render import render_page

UI_PATH = "/ui"
UI_EPISODES = 50  # the most recently used; a page of 10,000 episodes helps nobody
REFRESH_SECONDS = 5
# Everything the page needs is inline; nothing may load from elsewhere or frame it.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def live_page(store: EpisodeStore) -> str:
    live = list(reversed(store.all()))[:UI_EPISODES]
    taken: set[str] = set()
    views = [
        episode_view(e.episode_id, e.domain, list(e.records), f"live episode ({e.state})", taken)
        for e in live
    ]
    title = f"aw-mcp: {len(views)} live episode{'s' * (len(views) != 1)}"
    return render_page(views, title, refresh_seconds=REFRESH_SECONDS)


def ui_route(store: EpisodeStore, security: TransportSecuritySettings) -> Route:
    checks = TransportSecurityMiddleware(security)

    async def ui(request: Request) -> Response:
        refused = await checks.validate_request(request, is_post=False)
        if refused is not None:
            return refused
        return HTMLResponse(
            live_page(store),
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            },
        )

    return Route(UI_PATH, endpoint=ui, methods=["GET"])
