"""Source ``web``: the REAL Playwright MCP server driving Debian's Chromium on loopback sites.

``@playwright/mcp`` (npm) runs headless with an in-memory profile (``--isolated``) and the
system Chromium (``--executable-path``; no browser download), as user ``web``, against the
sites :mod:`web_sites` serves while the source records: the bookshop application and the
libffi manual (training), the valgrind manual (a held-out site). Episodes navigate, take
snapshots, click links and buttons by the refs of the last snapshot (:class:`Ref`), type
into the search box, follow the banner's links, fill and submit the checkout form (valid and
invalid), and hit 404/500 pages, a refused connection and stale refs. Observations are
exactly what Playwright MCP returned (snapshot file names carry the real time). Held out: the
whole valgrind site and the shop template ``sign_in``.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aw_mcp.trajectories.generate_mcp import Call, McpWorld, Ref, Template
from aw_mcp.trajectories.generate_mcp import home_seed as _home_seed
from aw_mcp.trajectories.sandbox import SandboxUnavailable
from aw_mcp.trajectories.sources.web_sites import (
    BOOKS,
    COUNTRIES,
    DOCS_URL,
    FEATURED,
    HOST,
    SHOP_URL,
    SIGN_IN,
    missing_docs,
    serving,
)

PACKAGE = "@playwright/mcp"
VERSION = "0.0.83"
CHROMIUM = "/usr/lib/chromium/chromium"  # Debian's package chromium
USER = "web"
VIEWPORT = "1280x720"
# libffi manual pages: file -> (title in the page, the text of its "Next" link)
LIBFFI = {
    "Introduction.html": ("Introduction", "Using libffi"),
    "Using-libffi.html": ("Using libffi", "Memory Usage"),
    "The-Basics.html": ("The Basics", "Simple Example"),
    "Simple-Example.html": ("Simple Example", "Types"),
    "Types.html": ("Types", "Multiple ABIs"),
    "Primitive-Types.html": ("Primitive Types", "Structures"),
    "Structures.html": ("Structures", "Size and Alignment"),
    "Type-Example.html": ("Type Example", "Complex Types"),
    "Multiple-ABIs.html": ("Multiple ABIs", "The Closure API"),
    "The-Closure-API.html": ("The Closure API", "Closure Example"),
    "Memory-Usage.html": ("Memory Usage", "Missing Features"),
}
# valgrind manual pages (held out) and links on them that stay on the site
VALGRIND = {
    "index.html": ["The Valgrind Quick Start Guide", "Valgrind FAQ", "GNU Licenses"],
    "QuickStart.html": ["Home", "Up"],
    "FAQ.html": ["Home", "Up"],
    "licenses.html": ["Home", "Up"],
}
SEARCHES = ["python", "Code", "martin", "rust", "haskell", "programming", "the c", "kleppmann"]
NAMES = ["Alex Doe", "Sam Lee", "Maria Garcia", "Jonas Berg"]
ADDRESSES = ["12 Rua Augusta, Lisbon", "5 Main Street, Leeds", "Hauptstr. 7, Berlin"]


def _book(rng: random.Random) -> int:
    return rng.choice(BOOKS).id


def _nav(url: str) -> Call:
    return ("browser_navigate", {"url": url})


SNAPSHOT: Call = ("browser_snapshot", {})


def _click(element: str, ref: Ref) -> Call:
    return ("browser_click", {"element": element, "target": ref})


def _browse_catalogue(rng: random.Random) -> list[Call]:
    calls = [_nav(f"{SHOP_URL}/books"), SNAPSHOT]
    if rng.random() < 0.6:
        calls += [_click("Next page link", Ref("link", "Next")), SNAPSHOT]
        if rng.random() < 0.5:
            calls.append(("browser_navigate_back", {}))
    else:
        title = rng.choice(BOOKS[:5]).title
        calls += [_click(f"{title} link", Ref("link", title)), SNAPSHOT]
    return calls


def _search(rng: random.Random) -> list[Call]:
    calls = [_nav(rng.choice([SHOP_URL + "/", f"{SHOP_URL}/books/{_book(rng)}"])), SNAPSHOT]
    text = rng.choice(SEARCHES)
    calls.append(
        (
            "browser_type",
            {
                "element": "Search books box",
                "target": Ref("searchbox", "Search books"),
                "text": text,
                "submit": True,
            },
        )
    )
    calls.append(SNAPSHOT)
    if rng.random() < 0.3:
        calls.append(("browser_find", {"text": rng.choice(["result", "No books", "$"])}))
    return calls


def _add_to_cart(rng: random.Random) -> list[Call]:
    if rng.random() < 0.5:
        book = rng.choice(FEATURED)
        calls = [_nav(SHOP_URL + "/"), SNAPSHOT]
        calls.append(
            _click("Add to cart button", Ref("button", "Add to cart", FEATURED.index(book)))
        )
    else:
        calls = [_nav(f"{SHOP_URL}/books/{_book(rng)}"), SNAPSHOT]
        if rng.random() < 0.5:
            quantity = rng.choice(["2", "3", "12", "0"])
            calls.append(
                (
                    "browser_type",
                    {
                        "element": "Quantity",
                        "target": Ref("spinbutton", "Quantity"),
                        "text": quantity,
                    },
                )
            )
        calls.append(_click("Add to cart button", Ref("button", "Add to cart")))
    calls.append(SNAPSHOT)
    if rng.random() < 0.4:
        calls += [_click("Remove button", Ref("button", "Remove")), SNAPSHOT]
    return calls


def _checkout(rng: random.Random) -> list[Call]:
    calls = [
        _nav(f"{SHOP_URL}/books/{_book(rng)}"),
        SNAPSHOT,
        _click("Add to cart button", Ref("button", "Add to cart")),
        SNAPSHOT,
        _click("Checkout link", Ref("link", "Checkout")),
        SNAPSHOT,
    ]
    valid = rng.random() < 0.5
    name = "" if not valid and rng.random() < 0.5 else rng.choice(NAMES)
    email = (
        rng.choice(["sam@example.com", "alex.doe@example.org"])
        if valid
        else rng.choice(["sam@example", "not-an-email", ""])
    )
    fields = [
        {
            "name": "Full name",
            "type": "textbox",
            "target": Ref("textbox", "Full name"),
            "value": name,
        },
        {"name": "Email", "type": "textbox", "target": Ref("textbox", "Email"), "value": email},
        {
            "name": "Address",
            "type": "textbox",
            "target": Ref("textbox", "Address"),
            "value": rng.choice(ADDRESSES),
        },
    ]
    calls.append(("browser_fill_form", {"fields": fields}))
    calls.append(
        (
            "browser_select_option",
            {
                "element": "Country",
                "target": Ref("combobox", "Country"),
                "values": [rng.choice(COUNTRIES)],
            },
        )
    )
    calls += [_click("Place order button", Ref("button", "Place order")), SNAPSHOT]
    return calls


def _errors(rng: random.Random) -> list[Call]:
    page = rng.choice(["/nope", "/books/99", "/gift-cards", "/books?page=9", "/admin"])
    calls = [_nav(SHOP_URL + "/"), SNAPSHOT]
    calls.append(
        rng.choice(
            [
                _nav(SHOP_URL + page),
                _click("Gift cards link", Ref("link", "Gift cards")),
                _nav(f"http://{HOST}:{rng.choice([8439, 8440])}/"),
            ]
        )
    )
    calls.append(SNAPSHOT)
    # A ref of the first page, after the page changed: the real stale-ref error.
    calls.append(_click("Books link", Ref("link", "Books", first=True)))
    if rng.random() < 0.4:
        calls.append(
            ("browser_click", {"element": "Submit button", "target": f"e{rng.randint(40, 99)}"})
        )
    return calls


# The banner's links a training episode follows (Sign in opens the held-out template's page).
BANNER = ["Home", "Books", "Gift cards", "Cart (0)"]  # a fresh profile: an empty cart


def _banner(rng: random.Random) -> list[Call]:
    """Follow the banner's links by the refs of a fresh snapshot: where each one leads."""
    start = rng.choice([SHOP_URL + "/", f"{SHOP_URL}/books/{_book(rng)}", f"{SHOP_URL}/cart"])
    calls = [_nav(start), SNAPSHOT]
    for link in rng.sample(BANNER, rng.randint(1, 2)):
        calls += [_click(f"{link} link", Ref("link", link)), SNAPSHOT]
    return calls


def _docs(rng: random.Random) -> list[Call]:
    page = rng.choice(list(LIBFFI))
    title, next_title = LIBFFI[page]
    calls = [_nav(f"{DOCS_URL}/libffi/{page}"), SNAPSHOT]
    if rng.random() < 0.7:
        calls += [_click(f"Next: {next_title}", Ref("link", next_title)), SNAPSHOT]
        if rng.random() < 0.5:
            calls += [("browser_navigate_back", {}), SNAPSHOT]
    else:
        calls.append(("browser_find", {"text": rng.choice(["ffi_call", "closure", title.lower()])}))
    return calls


def _page_tools(rng: random.Random) -> list[Call]:
    calls = [
        _nav(rng.choice([SHOP_URL + "/", f"{SHOP_URL}/books", f"{DOCS_URL}/libffi/Types.html"]))
    ]
    extra: list[Call] = [
        ("browser_tabs", {"action": "list"}),
        ("browser_evaluate", {"function": "() => document.title"}),
        ("browser_press_key", {"key": rng.choice(["Tab", "End", "PageDown"])}),
        ("browser_console_messages", {"level": "info"}),
        ("browser_network_requests", {"static": False}),
        ("browser_wait_for", {"text": rng.choice(["Bookshop", "Books", "Types"])}),
        ("browser_resize", {"width": rng.choice([800, 1024]), "height": 600}),
    ]
    calls += rng.sample(extra, rng.randint(2, 3))
    if rng.random() < 0.3:
        calls += [
            ("browser_tabs", {"action": "new", "url": f"{SHOP_URL}/cart"}),
            ("browser_tabs", {"action": "list"}),
        ]
    return calls


def _sign_in(rng: random.Random) -> list[Call]:  # held out
    right = rng.random() < 0.4
    password = SIGN_IN[1] if right else rng.choice(["tulip-41", "password", ""])
    calls = [_nav(f"{SHOP_URL}/signin"), SNAPSHOT]
    calls.append(
        (
            "browser_fill_form",
            {
                "fields": [
                    {
                        "name": "Email",
                        "type": "textbox",
                        "target": Ref("textbox", "Email"),
                        "value": SIGN_IN[0],
                    },
                    {
                        "name": "Password",
                        "type": "textbox",
                        "target": Ref("textbox", "Password"),
                        "value": password,
                    },
                ]
            },
        )
    )
    calls += [_click("Sign in button", Ref("button", "Sign in")), SNAPSHOT]
    return calls


def _valgrind(rng: random.Random) -> list[Call]:  # held out: a site never seen in training
    page = rng.choice(list(VALGRIND))
    link = rng.choice(VALGRIND[page])
    calls = [
        _nav(f"{DOCS_URL}/valgrind/{page}"),
        SNAPSHOT,
        _click(f"{link} link", Ref("link", link)),
        SNAPSHOT,
    ]
    if rng.random() < 0.5:
        calls.append(("browser_navigate_back", {}))
    return calls


def _bundled_facts(_versions: dict[str, str]) -> dict[str, Any]:
    """The bundled web world's facts: they describe these sites (its notes apply as they are)."""
    from aw_mcp.domain.loader import load_domain

    return {"facts": dict(load_domain("web").world.facts)}


@contextlib.contextmanager
def _sites() -> Iterator[None]:
    if not Path(CHROMIUM).exists():
        raise SandboxUnavailable(f"Chromium is not at {CHROMIUM} (apt-get install chromium)")
    if missing := missing_docs():
        raise SandboxUnavailable(f"the manuals the docs site serves are missing: {missing}")
    with serving():
        yield


TEMPLATES = [
    Template("browse_catalogue", _browse_catalogue),
    Template("search", _search),
    Template("add_to_cart", _add_to_cart),
    Template("checkout", _checkout),
    Template("errors", _errors),
    Template("banner", _banner),
    Template("docs", _docs),
    Template("page_tools", _page_tools),
    Template("sign_in", _sign_in, heldout=True),
    Template("valgrind", _valgrind, heldout=True),
]


SOURCE = McpWorld(
    name="web",
    summary="the real Playwright MCP server with Debian's Chromium on the loopback bookshop "
    f"and manuals (needs root, node, {PACKAGE} and the chromium package)",
    versions={PACKAGE: VERSION, "chromium": "Debian package"},
    mount_at="/home",
    workdir=f"/home/{USER}",
    user=USER,
    env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
    seed=_home_seed(USER),
    servers={
        "playwright": [
            "playwright-mcp",
            "--headless",
            "--isolated",
            "--browser",
            "chromium",
            "--executable-path",
            CHROMIUM,
            "--viewport-size",
            VIEWPORT,
        ]
    },
    templates=TEMPLATES,
    around=_sites,
    measure=_bundled_facts,
)
