"""Streamable HTTP under a hostile or careless client: session limits, Host/Origin, bearer token.

Every test runs a real `aw-mcp serve --transport http` subprocess on a loopback address.
"""

from __future__ import annotations

import os
import subprocess
import time

import httpx2

from tests.helpers import TINY_DOMAIN
from tests.http_support import JSON_AND_SSE, SERVE, http_serve, initialize_body

PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def open_session(http: httpx2.Client, url: str) -> str:
    response = http.post(url, json=initialize_body(), headers=JSON_AND_SSE)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def session_answers(http: httpx2.Client, url: str, session_id: str) -> bool:
    headers = {**JSON_AND_SSE, "mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"}
    status = http.post(url, json=PING, headers=headers).status_code
    assert status in (200, 404), status
    return status == 200


def test_a_full_server_closes_the_least_recently_used_idle_session_for_a_new_client(tmp_path):
    args = ["--simulator", str(TINY_DOMAIN), "--max-sessions", "2"]
    with http_serve(tmp_path / "server.log", *args) as url, httpx2.Client(timeout=30) as http:
        first = open_session(http, url)
        second = open_session(http, url)
        assert session_answers(http, url, first)  # now `second` is the least recently used
        third = open_session(http, url)  # the SDK alone answers 503 "Too many open sessions"
        assert not session_answers(http, url, second)
        assert session_answers(http, url, first) and session_answers(http, url, third)
        fourth = open_session(http, url)
        assert not session_answers(http, url, first)
        assert session_answers(http, url, fourth)


def test_idle_sessions_expire_after_the_idle_timeout(tmp_path):
    args = ["--simulator", str(TINY_DOMAIN), "--session-idle-timeout", "1"]
    with http_serve(tmp_path / "server.log", *args) as url, httpx2.Client(timeout=30) as http:
        session = open_session(http, url)
        assert session_answers(http, url, session)
        time.sleep(2.5)
        assert not session_answers(http, url, session)
        assert session_answers(http, url, open_session(http, url))


def post_initialize(http: httpx2.Client, url: str, **headers: str) -> int:
    return http.post(url, json=initialize_body(), headers={**JSON_AND_SSE, **headers}).status_code


def test_host_and_origin_are_checked_on_any_loopback_address(tmp_path):
    # The SDK checks them only when bound to exactly 127.0.0.1, localhost or ::1.
    args = ["--simulator", str(TINY_DOMAIN)]
    with (
        http_serve(tmp_path / "server.log", *args, host="127.0.0.2") as url,
        httpx2.Client(timeout=30) as http,
    ):
        port = url.split(":")[2].split("/")[0]
        assert post_initialize(http, url) == 200
        assert post_initialize(http, url, Origin=f"http://127.0.0.2:{port}") == 200
        assert post_initialize(http, url, Host="attacker.example") == 421
        assert post_initialize(http, url, Host=f"attacker.example:{port}") == 421
        assert post_initialize(http, url, Origin="http://attacker.example") == 403


def test_allowed_hosts_replace_the_defaults(tmp_path):
    args = ["--simulator", str(TINY_DOMAIN), "--allowed-host", "sim.internal:*"]
    with (
        http_serve(tmp_path / "server.log", *args, host="127.0.0.2") as url,
        httpx2.Client(timeout=30) as http,
    ):
        port = url.split(":")[2].split("/")[0]
        assert post_initialize(http, url, Host=f"sim.internal:{port}") == 200
        assert post_initialize(http, url, Host=f"127.0.0.2:{port}") == 421
        assert post_initialize(http, url, Host=f"sim.internal:{port}", Origin="http://x.y") == 403


def test_serving_off_loopback_without_allowed_hosts_is_refused_before_it_binds():
    result = subprocess.run(
        [*SERVE, "--simulator", str(TINY_DOMAIN), "--transport", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--host 0.0.0.0 is not a loopback address" in result.stderr
    assert "--allowed-host" in result.stderr


def test_a_bearer_token_from_the_environment_is_required(tmp_path):
    env = {**os.environ, "AW_MCP_AUTH_TOKEN": "s3cret-token"}
    args = ["--simulator", str(TINY_DOMAIN)]
    with (
        http_serve(tmp_path / "server.log", *args, host="127.0.0.2", env=env) as url,
        httpx2.Client(timeout=30) as http,
    ):
        response = http.post(url, json=initialize_body(), headers=JSON_AND_SSE)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert post_initialize(http, url, Authorization="Bearer wrong") == 401
        assert post_initialize(http, url, Authorization="s3cret-token") == 401
        assert post_initialize(http, url, Authorization="Bearer s3cret-token") == 200
        # the scheme is case-insensitive (RFC 9110); the token is not
        assert post_initialize(http, url, Authorization="bearer s3cret-token") == 200
        assert post_initialize(http, url, Authorization="BEARER  s3cret-token") == 200
        assert post_initialize(http, url, Authorization="bearer S3CRET-TOKEN") == 401
        assert post_initialize(http, url, Authorization="Basic s3cret-token") == 401
