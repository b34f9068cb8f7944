"""``subscriptions/listen`` (2026-07-28, SEP-2575): resource updates for stateless clients.

2026-07-28 removed ``resources/subscribe``; a client opens a ``subscriptions/listen`` stream
instead, naming the resource URIs it wants ``notifications/resources/updated`` for. As with
handshake subscriptions (``world_surface.notify_changed_resources``), which resources a call
changed is the world model's secret, so every successful call of a tool that is not
read-only updates each URI listened to in that call's episode. Streams are per episode (the
listen request's episode, found as a tool call's is): one episode's calls never wake another
episode's listeners, as their worlds are separate.

The tool, prompt and resource lists never change while a server runs, so ``listChanged`` is
false in every generation (``ListsNeverChange``), and a listen stream that asks for list
changes is acknowledged but never gets one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mcp import types
from mcp.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aw_mcp.server.episode_identity import episode_request


@dataclass
class _EpisodeStreams:
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    handler: ListenHandler = field(init=False)
    uris: Counter[str] = field(default_factory=Counter)  # listened-to URI -> open streams
    streams: int = 0

    def __post_init__(self) -> None:
        self.handler = ListenHandler(self.bus)


class EpisodeSubscriptions:
    """The open listen streams of each episode, and the updates a call sends them."""

    def __init__(self, unnamed: str | None = None) -> None:
        self._episodes: dict[str, _EpisodeStreams] = {}
        self._unnamed = unnamed  # the episode of a request that names none

    async def listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve one stream (the SDK's handler: ack first, frames tagged with the
        subscription id, only the kinds asked for) until the client closes it."""
        episode_id = episode_request(ctx, self._unnamed).episode_id
        streams = self._episodes.setdefault(episode_id, _EpisodeStreams())
        uris = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        streams.streams += 1
        streams.uris.update(uris)
        try:
            return await streams.handler(ctx, params)
        finally:
            streams.uris.subtract(uris)
            streams.uris = +streams.uris  # drop the URIs no stream listens to any more
            streams.streams -= 1
            if streams.streams == 0:
                self._episodes.pop(episode_id, None)

    async def resources_changed(self, episode_id: str) -> None:
        """After a state-changing call of ``episode_id``: every URI its streams listen to."""
        streams = self._episodes.get(episode_id)
        if streams is None:
            return
        for uri in sorted(streams.uris):
            await streams.bus.publish(ResourceUpdated(uri=uri))


class ListsNeverChange(Server):
    """A ``Server`` that advertises, in each protocol generation, only what it serves there.

    - ``listChanged: false`` in every generation: its tools, prompts and resources come from
      data loaded at start. (The SDK declares every list changeable on 2026-07-28 once
      ``subscriptions/listen`` is served, which this server does for resource updates.)
    - No ``logging`` on 2026-07-28: ``logging/setLevel`` is served to handshake sessions only
      (the SDK's 2026-07-28 dispatch has no route for it, SEP-2577), so advertising it there
      would send a client to "Method not found". ``resources.subscribe`` stays: on 2026-07-28
      subscribing is ``subscriptions/listen``, which is served.
    """

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        for offered in (capabilities.tools, capabilities.prompts, capabilities.resources):
            if offered is not None:
                offered.list_changed = False
        if kwargs.get("protocol_version") in MODERN_PROTOCOL_VERSIONS:
            capabilities.logging = None
        return capabilities
