"""The real sources beyond bash, filesystem and git: their held-out rules, the loopback sites
they record against, and one real episode each from a real third-party MCP server
(mcp-server-time) and from Playwright MCP driving Chromium, replayed by `serve --replay` to a
real client with identical observations."""

from __future__ import annotations

import argparse
import html
import itertools
import json
import random
import re
import shlex
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client

from aw_mcp.capture.record_proxy import observation_of
from aw_mcp.domain.loader import load_domain
from aw_mcp.evaluation.volatile import mask_volatile
from aw_mcp.generation.mcp_servers import (
    McpWorld,
    Ref,
    generate_mcp_world,
    prepare_world,
    resolve_refs,
    write_source_file,
)
from aw_mcp.generation.sandbox import SandboxUnavailable, ensure_user
from aw_mcp.generation.sources import SOURCE_NAMES, source, web_sites
from aw_mcp.generation.sources import web as web_source
from aw_mcp.records.reader import load_record_dir
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT

MCP_SOURCES = [name for name in SOURCE_NAMES if isinstance(source(name), McpWorld)]
NEW_SOURCES = [name for name in MCP_SOURCES if name != "os"]  # os: a held-out seed, no split


def test_at_least_eight_real_sources_each_with_pinned_versions():
    assert len(SOURCE_NAMES) >= 8
    for name in NEW_SOURCES:
        world = source(name)
        assert world.versions, f"{name} pins no server version"
        assert set(world.scripts) <= {"train", "heldout"} and "heldout" in world.scripts


def test_sqlite_and_duckdb_are_held_out_entirely_and_held_out_sites_never_appear_in_training():
    for name in ("sqlite", "duckdb"):
        assert set(source(name).scripts) == {"heldout"}, f"{name} has training episodes"
    for name in ("web", "fetch"):
        train = source(name).scripts["train"]
        urls = {
            json.dumps(args, default=repr)
            for n in range(200)
            for _, args in train(random.Random(f"t{n}"))
        }
        assert not any("/valgrind/" in u for u in urls), f"{name} trains on the held-out site"
        heldout = source(name).scripts["heldout"]
        assert any(
            "/valgrind/" in json.dumps(args, default=repr)
            for n in range(50)
            for _, args in heldout(random.Random(f"h{n}"))
        )


def test_scripts_depend_only_on_the_seed():
    for name in MCP_SOURCES:
        for script in source(name).scripts.values():
            assert script(random.Random("a")) == script(random.Random("a"))


def test_generate_draws_only_the_named_templates_and_a_wrong_name_lists_them():
    web = source("web")
    assert web.drawing_only("train", []) is web
    with pytest.raises(ValueError, match=r"no train template sign_in of web .*banner"):
        web.drawing_only("train", ["sign_in"])  # a held-out template, not a training one
    only = web.drawing_only("train", ["banner"])  # what `generate web --templates banner` runs
    assert set(only.scripts) == {"train"}
    # Every episode is a banner one: it clicks the banner's links by the refs of the LATEST
    # snapshot (not a stale one, which the errors template clicks on purpose) and snapshots
    # where they lead. The full pool draws other templates too.
    for n in range(20):
        calls = only.scripts["train"](random.Random(f"b{n}"))
        clicks = [args for tool, args in calls if tool == "browser_click"]
        assert clicks and all(not args["target"].first for args in clicks)
        assert all(args["target"].name in web_source.BANNER for args in clicks)
        assert calls[-1] == web_source.SNAPSHOT
    drawn = [web.scripts["train"](random.Random(f"b{n}")) for n in range(20)]
    assert any(tool == "browser_type" for calls in drawn for tool, _ in calls)


def test_source_yaml_names_the_templates_the_episodes_were_restricted_to(tmp_path: Path):
    """source.yaml's command records the episodes again: with --templates where they were
    drawn from named templates only, without it where from the split's whole pool."""
    web = source("web")
    write_source_file(tmp_path, web.drawing_only("train", ["banner"]), "train", 11, 60)
    command = yaml.safe_load((tmp_path / "source.yaml").read_text())["command"]
    assert (
        command
        == f"aw-mcp generate web --out {tmp_path} --seed 11 --episodes 60 --templates banner"
    )
    write_source_file(tmp_path, web, "train", 11, 60)
    command = yaml.safe_load((tmp_path / "source.yaml").read_text())["command"]
    assert "--templates" not in command


RECORDED_FOLDERS = sorted(
    path.parent
    for path in (REPO_ROOT / "data").rglob("source.yaml")
    if yaml.safe_load(path.read_text())["source"] in MCP_SOURCES
)


@pytest.mark.data
@pytest.mark.parametrize("folder", RECORDED_FOLDERS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_command_in_source_yaml_draws_the_recorded_episodes_again(folder: Path):
    """Every committed folder of an MCP source can be recorded again by its source.yaml
    command: today's scripts draw each episode's calls as they were recorded, a Ref resolving
    against the recorded observations to the ref the call used (an episode may have ended
    early, where the real page lacked a ref). A folder recorded by a script that has changed
    since names the commit that draws it (generator_commit)."""
    info = yaml.safe_load((folder / "source.yaml").read_text())
    if "generator_commit" in info:
        pytest.skip(f"recorded by aw-mcp at {info['generator_commit'][:12]}")
    argv = shlex.split(info["command"])
    assert argv[:3] == ["aw-mcp", "generate", info["source"]]
    world = source(info["source"])
    parser = argparse.ArgumentParser()
    world.add_arguments(parser)
    args = parser.parse_args(argv[3:])
    drawing = world.drawing_only(args.split, getattr(args, "templates", []))
    episodes = load_record_dir(folder)
    assert len(episodes) == info["episodes"] == args.episodes
    for episode in episodes:
        number = int(episode.episode.rsplit("-", 1)[1])
        drawn = drawing.episode_calls(args.split, args.seed, number)
        recorded = episode.records
        assert len(recorded) <= len(drawn), episode.episode
        seen: list[str] = []  # the observations so far, as the generator resolves Refs
        for (tool, arguments), record in zip(drawn[: len(recorded)], recorded, strict=True):
            where = f"{episode.episode} #{record.index}"
            assert tool == record.tool, where
            assert resolve_refs(arguments, seen) == record.arguments, where
            seen.append(record.observation)


def test_docbook_templates_walk_the_pam_guides_by_fresh_refs_and_never_touch_valgrind():
    web = source("web")
    plain = {
        json.dumps(web.scripts["train"](random.Random(f"d{n}")), default=repr) for n in range(200)
    }
    assert not any("/pam/" in calls for calls in plain)  # drawn only when named
    opened: dict[str, set[str]] = {"docbook_pages": set(), "docbook_contents": set()}
    for name, clicked in opened.items():
        only = web.drawing_only("train", [name])  # what `generate web --templates NAME` runs
        for n in range(100):
            calls = only.scripts["train"](random.Random(f"{name}{n}"))
            assert "/valgrind/" not in json.dumps(calls, default=repr)
            # Follow the episode through the guides: every click is on a link of the page
            # shown by the snapshot just before it (a fresh ref, never the earliest one), and
            # opens a page of the guides an episode may open.
            tool, args = calls[0]
            assert tool == "browser_navigate" and calls[1] == web_source.SNAPSHOT
            assert args["url"].startswith(f"{web_sites.DOCS_URL}/pam/")
            pages = [args["url"].rsplit("/", 1)[1]]
            for before, (tool, args) in itertools.pairwise(calls):
                if tool == "browser_click":
                    ref = args["target"]
                    assert before == web_source.SNAPSHOT and not ref.first
                    links = web_source.pam_links(pages[-1])
                    assert ref.name in links, f"{pages[-1]} has no link {ref.name!r}"
                    assert ref.nth < (2 if ref.name in ("Prev", "Next") else 1)
                    pages.append(links[ref.name])
                    clicked.add(ref.name)
                elif tool == "browser_navigate_back":
                    pages.pop()
                else:  # never of a page longer than the world lets the model write
                    assert tool == "browser_snapshot", tool
                    assert pages[-1] not in web_source.PAM_LONG, pages[-1]
            assert not set(pages) & web_source.PAM_SKIPPED
    assert set(web_source.NAVIGATION) <= opened["docbook_pages"]
    contents = opened["docbook_contents"] - set(web_source.NAVIGATION)
    assert (
        "The Module Writers' Guide" in contents and "4.2. Directory based configuration" in contents
    )


def test_the_web_worlds_facts_name_pam_only_in_a_generated_world_file():
    bundled = json.dumps(load_domain("web").world.model_dump(), ensure_ascii=False)
    assert "pam" not in bundled.lower()
    sites = web_source._bundled_facts({})["facts"]["sites"]  # what a web folder's world.yaml says
    assert all(f"/{name}/ {web_sites.DOC_TITLES[name]}" in sites for name in web_sites.DOC_ROOTS)
    assert sites.startswith(load_domain("web").world.facts["sites"].removesuffix(")"))


def test_refs_are_taken_from_the_latest_snapshot_or_on_purpose_from_the_first():
    seen = [
        '- link "Books" [ref=e5] [cursor=pointer]:\n- button "Add to cart" [ref=e23]',
        '- link "Books" [ref=f1e5] [cursor=pointer]:\n- button "Add to cart" [ref=f1e9]\n'
        '- button "Add to cart" [ref=f1e12]',
    ]
    arguments = {
        "target": Ref("link", "Books"),
        "fields": [{"target": Ref("button", "Add to cart", nth=1)}],
        "stale": Ref("link", "Books", first=True),
    }
    assert resolve_refs(arguments, seen) == {
        "target": "f1e5",
        "fields": [{"target": "f1e12"}],
        "stale": "e5",
    }
    with pytest.raises(LookupError, match='no link "Cart"'):
        Ref("link", "Cart").resolve(seen)


def _get(url: str, data: dict[str, str] | None = None, cookie: str = "") -> tuple[int, str, str]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers={"Cookie": cookie})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("Set-Cookie", "")


def test_the_bookshop_is_a_real_app_with_a_cart_checkout_search_and_errors():
    with web_sites.serving(0, 0) as (shop, _docs):
        status, page, _ = _get(shop + "/books?page=3")
        assert status == 200 and "Page 3 of 3" in page and "Previous" in page
        assert _get(shop + "/books?page=4")[0] == 404
        assert "No books found for \u201chaskell\u201d" in _get(shop + "/search?q=haskell")[1]
        assert "2 results for \u201cpython\u201d" in _get(shop + "/search?q=python")[1]
        status, _, cookie = _get(shop + "/cart/add", {"book_id": "6", "quantity": "2"})
        assert status == 303 and cookie.startswith("cart=6%3A2")
        cart = "cart=6:2"
        assert "Total: $111.98" in _get(shop + "/cart", cookie=cart)[1]
        bad = {"name": "", "email": "x@y", "address": "A", "country": "France"}
        status, page, _ = _get(shop + "/checkout", bad, cookie=cart)
        assert status == 400 and "Full name is required." in page
        assert "\u201cx@y\u201d is not a valid email address." in page
        good = {"name": "Sam", "email": "sam@example.com", "address": "A", "country": "France"}
        status, page, cookie = _get(shop + "/checkout", good, cookie=cart)
        assert status == 200 and "Thank you for your order!" in page and "Max-Age=0" in cookie
        assert _get(shop + "/gift-cards")[0] == 500
        assert _get(shop + "/books/13")[0] == 404


def _text(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


@pytest.mark.external
@pytest.mark.skipif(
    not web_sites.DOC_ROOTS["pam"].is_dir(),
    reason="libpam-doc is not installed (apt-get install libpam-doc; see .ci/run)",
)
def test_the_docs_site_serves_the_pam_guides_where_the_templates_expect_their_links():
    pages = ["index.html", *web_source.PAM_GUIDES]
    pages += [file for guide in web_source.PAM_GUIDES.values() for file, _ in guide]
    assert sorted(pages) == sorted(p.name for p in web_sites.DOC_ROOTS["pam"].glob("*.html"))
    with web_sites.serving(0, 0) as (_shop, docs):
        assert "/pam/" in _get(docs + "/")[1]
        assert _get(docs + "/pam/nope.html")[0] == 404
        for page in pages:
            status, text, _ = _get(f"{docs}/pam/{page}")
            assert status == 200, page
            anchors = {
                (href, _text(inner))
                for href, inner in re.findall(
                    r'<a [^>]*?href="([^"#]+)"[^>]*>(.*?)</a>', text, re.S
                )
            }
            links = web_source.pam_links(page)
            for name, target in links.items():  # every link the templates may click
                assert (target, name) in anchors, f"{page}: no link {name!r} to {target}"
            for href, name in anchors:  # and DocBook's navigation links are all known
                if name in web_source.NAVIGATION:
                    assert links.get(name) == href, f"{page}: {name} leads to {href}"
            if page != "index.html":
                assert ("Navigation header" in text) and ("Navigation footer" in text), page


def test_the_bundled_web_world_describes_the_site_the_sandbox_serves():
    world = load_domain("web").world
    text = json.dumps(world.model_dump(), ensure_ascii=False)
    assert web_sites.SHOP_URL in text and web_sites.DOCS_URL in text
    for book in web_sites.BOOKS:
        assert f"{book.title} ({book.author}, {book.year}) {book.price}" in text
    for country in web_sites.COUNTRIES:
        assert country in text
    assert "example.com" not in text


# --- one real episode each, recorded in the sandbox, replayed to a real client --------------


def _cannot_record(world_name: str) -> str:
    world = source(world_name)
    assert isinstance(world, McpWorld)
    for command in world.servers.values():
        if shutil.which(command[0], path=world.environment()["PATH"]) is None:
            return f"{command[0]} is not installed (see .ci/run)"
    if world_name == "web" and not Path(web_source.CHROMIUM).exists():
        return f"Chromium is not at {web_source.CHROMIUM} (apt-get install chromium)"
    if world_name == "web" and web_sites.missing_docs():
        return f"the manuals are not installed: {web_sites.missing_docs()}"
    try:
        ensure_user(world.user)
    except SandboxUnavailable as exc:
        return str(exc)
    return ""


async def _replay(records: Path, settings: ServeSettings) -> None:
    """Every recorded episode, called again in order through `serve --replay` by a real
    client: the observations it reads are the recorded ones, and no model is asked."""
    never = FakeEngine(fail_with="the model was asked although a recording matches")
    simulator = build_simulator(settings, engine=never)
    [episode] = load_record_dir(records)
    async with Client(build_server(simulator)) as client:
        for record in episode.records:
            result = await client.call_tool(
                record.tool, record.arguments, meta={EPISODE_META_KEY: "agent"}
            )
            assert observation_of(result) == record.observation, record.tool
            assert bool(result.is_error) == record.is_error
    replayed = simulator.episodes.find("agent")[0].records
    assert [r.source for r in replayed] == ["replay"] * len(episode.records)
    assert never.requests == []


@pytest.mark.external
@pytest.mark.skipif(bool(_cannot_record("time")), reason=_cannot_record("time"))
def test_a_time_server_episode_is_recorded_in_the_sandbox_and_replays(tmp_path: Path):
    out = tmp_path / "time"
    generate_mcp_world(prepare_world("time"), out, seed=2, episodes=1, split="heldout")
    [episode] = load_record_dir(out)
    assert episode.domain == "time" and len(episode.records) >= 2
    assert {r.source for r in episode.records} == {"real"}
    assert '"timezone"' in episode.records[0].observation  # the real server's JSON answer
    info = yaml.safe_load((out / "source.yaml").read_text())
    assert info["versions"] == {"mcp-server-time": "2026.10.19"} and info["split"] == "heldout"
    assert "serve --tools-from" in (out / "world.yaml").read_text().splitlines()[1]
    anyio.run(_replay, out, ServeSettings(tools_from=[out / "tools" / "time.json"], replay=out))


@pytest.mark.external
@pytest.mark.skipif(bool(_cannot_record("duckdb")), reason=_cannot_record("duckdb"))
def test_a_duckdb_episode_is_recorded_on_a_local_file_and_replays(tmp_path: Path):
    """The MotherDuck server on the seeded DuckDB file, no token and no network: its answers
    are DuckDB's (JSON tables), and ``serve --replay`` gives them back as recorded."""
    out = tmp_path / "duckdb"
    world = prepare_world("duckdb").drawing_only("heldout", ["explore"])
    generate_mcp_world(world, out, seed=1, episodes=1, split="heldout")
    [episode] = load_record_dir(out)
    assert episode.domain == "duckdb" and len(episode.records) >= 4
    assert {r.source for r in episode.records} == {"real"}
    assert not any(r.is_error for r in episode.records)
    listed = episode.records[0 if episode.records[0].tool == "list_tables" else 1]
    assert '"name": "products"' in listed.observation  # the seeded table, as DuckDB lists it
    info = yaml.safe_load((out / "source.yaml").read_text())
    assert info["held_out_entirely"] and info["versions"]["mcp-server-motherduck"] == "1.1.0"
    tools = json.loads((out / "tools" / "duckdb.json").read_text())["tools"]
    assert {"execute_query", "list_tables", "list_columns"} <= {t["name"] for t in tools}
    anyio.run(_replay, out, ServeSettings(tools_from=[out / "tools" / "duckdb.json"], replay=out))


@pytest.mark.data
def test_the_held_out_duckdb_folder_loads_with_its_tools_and_real_answers():
    folder = REPO_ROOT / "data" / "mcp" / "duckdb" / "heldout"
    episodes = load_record_dir(folder)
    assert len(episodes) == 30 and {e.domain for e in episodes} == {"duckdb"}
    tools = json.loads((folder / "tools" / "duckdb.json").read_text())["tools"]
    assert {"execute_query", "list_databases", "list_tables", "list_columns"} == {
        t["name"] for t in tools
    }
    records = [r for e in episodes for r in e.records]
    answered = [r for r in records if '"success": true' in r.observation]
    assert len(answered) > len(records) / 2, "mostly errors: the server did not run as meant"
    assert yaml.safe_load((folder / "source.yaml").read_text())["held_out_entirely"] is True


# The training sources added for mirrored servers: (source, a training template recorded in
# the test, what each of its answers looks like, tools its committed capture must list).
TRAINING_SERVERS = {
    "calculator": ("arithmetic", r"-?(\d[\d.e+-]*|inf)", {"calculate"}),
    "excel": ("explore", r'\{".*\}', {"read_range", "write_range", "describe_workbook"}),
    "text-editor": (
        "read",
        r'\{\n  "/home/mcp/.*"file_hash": "[0-9a-f]{64}"\n  \}\n\}',
        {"get_text_file_contents", "edit_text_file_contents"},
    ),
}


@pytest.mark.external
@pytest.mark.parametrize("name", list(TRAINING_SERVERS))
def test_a_training_server_episode_is_recorded_on_its_seeded_home_and_replays(
    tmp_path: Path, name: str
):
    """calculator, excel and text-editor: one real episode of a training template in the
    sandbox, every answer the server's own (a number, a workbook's JSON, ranges with their
    hashes; no sandbox error), given back as recorded by ``serve --replay``."""
    if reason := _cannot_record(name):
        pytest.skip(reason)
    template, answer, _ = TRAINING_SERVERS[name]
    out = tmp_path / name
    generate_mcp_world(prepare_world(name).drawing_only("train", [template]), out, 1, 1)
    [episode] = load_record_dir(out)
    assert episode.domain == name and len(episode.records) >= 3
    assert {r.source for r in episode.records} == {"real"}
    for record in episode.records:
        assert not record.is_error and re.fullmatch(answer, record.observation, re.S), record
    info = yaml.safe_load((out / "source.yaml").read_text())
    assert info["split"] == "train" and not info["held_out_entirely"]
    assert info["versions"] == source(name).versions
    capture = out / "tools" / f"{name}.json"
    anyio.run(_replay, out, ServeSettings(tools_from=[capture], replay=out))


@pytest.mark.data
@pytest.mark.parametrize("name", list(TRAINING_SERVERS))
def test_the_committed_training_servers_have_both_splits_with_their_tools_and_real_answers(
    name: str,
):
    """Each folder holds the episodes its source.yaml counts, the real tools/list, world facts
    and mostly answers rather than errors; the held-out folder draws only held-out
    templates (its source has both splits)."""
    assert set(source(name).scripts) == {"train", "heldout"}
    *_, tools_called = TRAINING_SERVERS[name]
    for split in ("train", "heldout"):
        folder = REPO_ROOT / "data" / "mcp" / name / split
        info = yaml.safe_load((folder / "source.yaml").read_text())
        assert info["split"] == split and info["source"] == name
        episodes = load_record_dir(folder)
        assert len(episodes) == info["episodes"] and {e.domain for e in episodes} == {name}
        listed = {
            t["name"] for t in json.loads((folder / "tools" / f"{name}.json").read_text())["tools"]
        }
        assert tools_called <= listed
        records = [r for e in episodes for r in e.records]
        assert all(r.source == "real" for r in records)
        assert sum(r.is_error for r in records) < len(records) / 3, "mostly errors"
        assert not any("did not start" in r.observation for r in records)
        assert yaml.safe_load((folder / "world.yaml").read_text())["facts"]["server"]


@pytest.mark.external
@pytest.mark.skipif(bool(_cannot_record("web")), reason=_cannot_record("web"))
def test_a_playwright_episode_on_loopback_is_recorded_and_replays(tmp_path: Path):
    out = tmp_path / "web"
    generate_mcp_world(prepare_world("web"), out, seed=1, episodes=1)
    [episode] = load_record_dir(out)
    observations = [r.observation for r in episode.records]
    assert episode.domain == "web" and episode.records[0].tool == "browser_navigate"
    assert observations[0].startswith("### Ran Playwright code") and "### Page\n" in observations[0]
    snapshots = [r.observation for r in episode.records if r.tool == "browser_snapshot"]
    assert snapshots and all("### Snapshot\n```yaml\n" in s for s in snapshots)
    assert web_sites.SHOP_URL in observations[0] or web_sites.DOCS_URL in observations[0]
    settings = ServeSettings(simulator=["web"], replay=out, replay_miss="error")
    anyio.run(_replay, out, settings)


def test_values_no_simulator_can_know_are_masked_and_nothing_else():
    real = (
        "- [Snapshot](.playwright-mcp/page-2026-12-01T12-44-12-187Z.yml)\n"
        "- New console entries: .playwright-mcp/console-2026-12-01T12-44-12-324Z.log#L1\n"
        '"datetime": "2026-12-01T13:27:00+01:00", ref=f1e5, Order number: 56792'
    )
    assert mask_volatile(real) == (
        "- [Snapshot](.playwright-mcp/page-<time>.yml)\n"
        "- New console entries: .playwright-mcp/console-<time>.log#L1\n"
        '"datetime": "<datetime>", ref=f1e5, Order number: 56792'
    )
