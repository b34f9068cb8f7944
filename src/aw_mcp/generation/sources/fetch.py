"""Source ``fetch``: the reference fetch server reading the loopback sites.

``mcp-server-fetch`` (PyPI) with ``--allow-private-ips`` (it refuses loopback otherwise), on
the bookshop and the installed manuals that :mod:`web_sites` serves while the source records
(the same sites the ``web`` source browses). Pages come back as markdown, raw HTML, or in
pieces (``max_length``/``start_index``); 404 and 500 pages, a path robots.txt disallows and a
port nobody listens on give the server's real errors. Held out: the whole valgrind manual (a
site never fetched in training) and the template ``paged_reading``.

The template ``manuals`` (added after the seed-1 training folder was recorded, which
``--templates shop,docs,errors`` draws again) reads the Linux-PAM guides, a DocBook manual
whose pages (this list's) the server's readability step turns into anything from a
92-character stub to 10,000 characters, at every ``max_length``: the real lengths a world
model has to learn.
"""

from __future__ import annotations

import random

from aw_mcp.generation.mcp_servers import Call, Template, mcp_user_world, python_server
from aw_mcp.generation.sources.web_sites import BOOKS, DOCS_URL, HOST, SHOP_URL, serving

PACKAGE = "mcp-server-fetch"
VERSION = "2026.10.24"
SHOP_PAGES = ["/", "/books", "/books?page=2", "/books?page=3", "/cart", "/signin", "/checkout"]
LIBFFI_PAGES = [
    "Introduction.html",
    "Using-libffi.html",
    "The-Basics.html",
    "Simple-Example.html",
    "Types.html",
    "Primitive-Types.html",
    "Structures.html",
    "Thread-Safety.html",
    "Memory-Usage.html",
    "Missing-Features.html",
]
VALGRIND_PAGES = ["index.html", "QuickStart.html", "FAQ.html", "licenses.html", "dist.html"]
# Linux-PAM pages (libpam-doc), short and long ones: index pages come back as a stub.
PAM_PAGES = [
    "index.html",
    "Linux-PAM_ADG.html",
    "Linux-PAM_SAG.html",
    "adg-introduction.html",
    "adg-overview.html",
    "adg-security.html",
    "adg-see-also.html",
    "adg-libpam_misc.html",
    "mwg-expected-by-module.html",
    "mwg-expected-of-module-auth.html",
    "mwg-introduction-synopsis.html",
    "mwg-see-programming-syslog.html",
    "sag-configuration.html",
    "sag-configuration-file.html",
    "sag-module-reference.html",
    "sag-pam_deny.html",
    "sag-pam_env.html",
    "sag-pam_limits.html",
    "sag-pam_nologin.html",
    "sag-pam_unix.html",
    "sag-pam_wheel.html",
    "sag-security-issues.html",
    "sag-text-conventions.html",
]
SEARCHES = ["python", "code", "martin", "rust", "haskell", "the", "c"]


def _shop_url(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return SHOP_URL + rng.choice(SHOP_PAGES)
    if kind < 0.7:
        return f"{SHOP_URL}/books/{rng.choice(BOOKS).id}"
    return f"{SHOP_URL}/search?q={rng.choice(SEARCHES)}"


def _shop(rng: random.Random) -> list[Call]:
    calls: list[Call] = [("fetch", {"url": _shop_url(rng)}) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        calls.append(("fetch", {"url": _shop_url(rng), "raw": True}))
    return calls


def _docs(rng: random.Random) -> list[Call]:
    pages = rng.sample(LIBFFI_PAGES, rng.randint(1, 2))
    calls: list[Call] = [
        ("fetch", {"url": f"{DOCS_URL}/libffi/{p}", "max_length": rng.choice([1500, 3000])})
        for p in pages
    ]
    if rng.random() < 0.3:
        calls.append(("fetch", {"url": f"{DOCS_URL}/libffi/"}))  # a directory listing
    return calls


def _errors(rng: random.Random) -> list[Call]:
    bad = [
        f"{SHOP_URL}/books/{rng.randint(13, 99)}",
        f"{SHOP_URL}/{rng.choice(['about', 'shipping', 'books/new'])}",
        f"{SHOP_URL}/gift-cards",
        f"{SHOP_URL}/admin",
        f"http://{HOST}:{rng.choice([8439, 8440])}/",
        f"{DOCS_URL}/libffi/{rng.choice(['Closures.html', 'index.htm'])}",
    ]
    calls: list[Call] = [("fetch", {"url": url}) for url in rng.sample(bad, 2)]
    if rng.random() < 0.4:
        calls.append(("fetch", {"url": "not a url"}))
    return [*calls, ("fetch", {"url": _shop_url(rng), "max_length": 600})]


def _manuals(rng: random.Random) -> list[Call]:
    calls: list[Call] = []
    for page in rng.sample(PAM_PAGES, rng.randint(1, 3)):
        arguments: dict[str, object] = {"url": f"{DOCS_URL}/pam/{page}"}
        if (size := rng.choice([None, 500, 1000, 2000, 3000])) is not None:
            arguments["max_length"] = size
        calls.append(("fetch", arguments))
    return calls


def _valgrind(rng: random.Random) -> list[Call]:  # held out: a site never seen in training
    return [
        ("fetch", {"url": f"{DOCS_URL}/valgrind/{p}", "max_length": 2000})
        for p in rng.sample(VALGRIND_PAGES, rng.randint(1, 3))
    ]


def _paged_reading(rng: random.Random) -> list[Call]:  # held out
    url = f"{DOCS_URL}/libffi/{rng.choice(LIBFFI_PAGES)}"
    size = rng.choice([400, 700, 1000])
    return [
        ("fetch", {"url": url, "max_length": size, "start_index": n * size})
        for n in range(rng.randint(2, 3))
    ]


SOURCE = mcp_user_world(
    name="fetch",
    summary=f"the fetch MCP server on the loopback bookshop and manuals (needs root and "
    f"{PACKAGE} in /opt/aw-mcp-fetch)",
    versions={PACKAGE: VERSION},
    servers={"fetch": [python_server("fetch", "mcp-server-fetch"), "--allow-private-ips"]},
    templates=[
        Template("shop", _shop),
        Template("docs", _docs),
        Template("errors", _errors),
        Template("manuals", _manuals),
        Template("valgrind", _valgrind, heldout=True),
        Template("paged_reading", _paged_reading, heldout=True),
    ],
    around=serving,
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} (server name mcp-fetch), started with "
            "--allow-private-ips",
            "sites": f"{SHOP_URL} (a bookshop web application) and {DOCS_URL} (HTML manuals "
            "installed by Debian packages: /libffi/, /pam/ and /valgrind/)",
        },
        "notes": [
            "Answers start 'Contents of <url>:' and give the page as markdown; raw=true gives "
            "'Content type text/html cannot be simplified to markdown, but here is the raw "
            "content:' and the HTML.",
            "A page cut at max_length ends with '<error>Content truncated. Call the fetch tool "
            "with a start_index of <n> to get more content.</error>'.",
            "HTTP errors are isError texts: 'Error executing tool fetch: Failed to fetch <url> "
            "- status code 404'.",
        ],
    },
)
