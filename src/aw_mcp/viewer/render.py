"""Render episode views to one self-contained HTML page (inline CSS, JS and SVG; no network).

The templates are package data (``aw_mcp/viewer/templates``) rendered with autoescaping on:
every recorded string (arguments, observations, fault details) is text, never markup.
"""

from __future__ import annotations

from functools import cache
from typing import get_args

import jinja2

from aw_mcp import __version__
from aw_mcp.records.calls import ObservationSource
from aw_mcp.viewer.episodes import BAR_AREA_HEIGHT, CHART_WIDTH, EpisodeView

SOURCES: tuple[str, ...] = get_args(ObservationSource)  # the filter's order


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("aw_mcp.viewer", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_page(
    episodes: list[EpisodeView],
    title: str,
    *,
    refresh_seconds: int | None = None,
) -> str:
    """The report page; ``refresh_seconds`` reloads it (the live ``/ui`` page)."""
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            episodes=episodes,
            domains=sorted({e.domain for e in episodes}),
            tools=sorted({s.tool for e in episodes for s in e.steps}),
            sources=[s for s in SOURCES if any(st.source == s for e in episodes for st in e.steps)],
            step_count=sum(len(e.steps) for e in episodes),
            chart_width=CHART_WIDTH,
            bar_height=BAR_AREA_HEIGHT,
            refresh_seconds=refresh_seconds,
            version=__version__,
        )
    )
