"""The settings of the MCP server and its transports (a section of ``aw-mcp serve``'s)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from aw_mcp.sections import EPISODES, TRANSPORT, Section, flag

DEFAULT_MAX_ARGUMENT_BYTES = 256 * 1024
BODY_ENVELOPE_BYTES = 64 * 1024


class ServerSettings(Section):
    """How clients reach the server: the transport, and the HTTP server's guards."""

    transport: Literal["stdio", "http"] = Field(
        default="stdio", description="stdio, or Streamable HTTP", json_schema_extra=flag(TRANSPORT)
    )

    host: str = Field(
        default="127.0.0.1", description="HTTP bind address", json_schema_extra=flag(TRANSPORT)
    )

    port: int = Field(
        default=8765,
        ge=0,
        le=65535,
        description="HTTP port (0: any free port)",
        json_schema_extra=flag(TRANSPORT),
    )

    allowed_host: list[str] = Field(
        default_factory=list,
        description="HTTP: a Host header value clients may send ('name:*' for any port; "
        "'*' turns the DNS-rebinding check off); repeatable; needed off loopback (default: "
        "the loopback names and the bind address)",
        json_schema_extra=flag(TRANSPORT, "HOST[:PORT|:*]"),
    )

    allowed_origin: list[str] = Field(
        default_factory=list,
        description="HTTP: an Origin header value browsers may send; repeatable (default: "
        "http:// and https:// of each allowed host)",
        json_schema_extra=flag(TRANSPORT, "URL"),
    )

    auth_token: SecretStr | None = Field(
        default=None,
        description="HTTP: require 'Authorization: Bearer TOKEN' on every request (prefer the "
        "environment variable: a flag shows in the process list)",
        json_schema_extra=flag(TRANSPORT, "TOKEN"),
    )

    request_state_key: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="the secret (32+ characters) that seals the requestState of 2026-07-28 "
        "input_required results, for replicas that resume each other's calls (default: a "
        "key of this process; prefer the environment variable)",
        json_schema_extra=flag(TRANSPORT, "KEY"),
    )

    session_idle_timeout: float = Field(
        default=1800.0,
        gt=0,
        description="HTTP: seconds a handshake session may stay idle before it is closed",
        json_schema_extra=flag(TRANSPORT, "S"),
    )

    max_sessions: int = Field(
        default=1000,
        ge=1,
        description="HTTP: open handshake sessions at most; past this the least recently "
        "used idle session is closed for a new client",
        json_schema_extra=flag(TRANSPORT),
    )

    max_argument_bytes: int = Field(
        default=DEFAULT_MAX_ARGUMENT_BYTES,
        ge=1024,
        description="a tool call's arguments, as compact JSON, may take this many bytes at "
        "most; a larger call is refused at once with an isError (before the world model "
        "would spend seconds tokenizing it)",
        json_schema_extra=flag(TRANSPORT, "BYTES"),
    )

    ui: bool = Field(
        default=False,
        description="HTTP: a read-only page at /ui with the live episodes' timelines (same "
        "Host/Origin checks and bearer token as /mcp)",
        json_schema_extra=flag(TRANSPORT),
    )

    episode: str | None = Field(
        default=None,
        max_length=200,
        description="the episode of every request that names none (a stdio client's calls): "
        "with --record-dir, a server started again with the same name resumes it from its "
        "records, so a client that starts a server per call (langchain's default tools) "
        "still sees one world",
        json_schema_extra=flag(EPISODES, "NAME"),
    )

    @property
    def max_body_bytes(self) -> int:
        """The largest POST body worth parsing when a call's arguments may take
        ``max_argument_bytes`` as compact JSON: twice that (escapes, indentation) and room
        for the rest of the message; never above the SDK's own limit (4 MiB)."""
        from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

        return min(2 * self.max_argument_bytes + BODY_ENVELOPE_BYTES, DEFAULT_MAX_REQUEST_BODY_SIZE)
