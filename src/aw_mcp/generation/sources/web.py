"""Source ``web``: the REAL Playwright MCP server driving Debian's Chromium on loopback sites.

``@playwright/mcp`` (npm) runs headless with an in-memory profile (``--isolated``) and the
system Chromium (``--executable-path``; no browser download), as user ``web``, against the
sites :mod:`web_sites` serves while the source records: the bookshop application, the
libffi manual (texinfo) and the Linux-PAM guides (DocBook) for training, the valgrind manual
(DocBook, a held-out site). Episodes navigate, take snapshots, click links and buttons by the
refs of the last snapshot (:class:`Ref`), type into the search box, follow the banner's
links, fill and submit the checkout form (valid and invalid), and hit 404/500 pages, a
refused connection and stale refs. Observations are exactly what Playwright MCP returned
(snapshot file names carry the real time). Held out: the whole valgrind site and the shop
template ``sign_in``.

The DocBook templates (``docbook_pages``: a guide's page, then its navigation links Prev,
Next, Up and Home; ``docbook_contents``: the guides' index or a chapter's contents list, then
a contents link) walk the PAM guides by fresh refs, with where every link leads known in
advance (:data:`PAM_GUIDES`, :func:`pam_links`). No page longer than the web world lets the
model write is snapshotted (:data:`PAM_LONG`; the guides' contents pages are opened, the
others never), nor one with a line the snapshot grammar does not take (:data:`PAM_WIDE`).
They and the shop's ``banner`` template are drawn only when named (``generate web --templates
banner``, ``--templates docbook_pages,docbook_contents``), so a plain ``generate web`` draws
what it drew before them.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from aw_mcp.generation.mcp_servers import Call, McpWorld, Ref, Template, template_scripts
from aw_mcp.generation.mcp_servers import home_seed as _home_seed
from aw_mcp.generation.sandbox import SandboxUnavailable
from aw_mcp.generation.sources.web_sites import (
    BOOKS,
    COUNTRIES,
    DOC_ROOTS,
    DOC_TITLES,
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
# The Linux-PAM guides (libpam-doc; DocBook XSL HTML under /pam/): index.html links the
# three guides; each guide is its contents page, then its pages in reading order, each with
# the text of its link in the contents ("N. <chapter>" or "N.M. <section>"). DocBook's
# navigation follows from that: a header table (Prev, Next) and a footer table (Prev, Up,
# Next, Home) on every page; Prev and Next go along the reading order, Up from a section to
# its chapter (a chapter has none: its Up would be Home), Home to the guide's contents page.
PAM_INDEX = {
    "The System Administrators' Guide": "Linux-PAM_SAG.html",
    "The Module Writers' Guide": "Linux-PAM_MWG.html",
    "The Application Developers' Guide": "Linux-PAM_ADG.html",
}
_PAM_MODULES = [
    ("access", "logdaemon style login access control"),
    ("debug", "debug the PAM stack"),
    ("deny", "locking-out PAM module"),
    ("echo", "print text messages"),
    ("env", "set/unset environment variables"),
    ("exec", "call an external command"),
    ("faildelay", "change the delay on failure per-application"),
    ("filter", "filter module"),
    ("ftp", "module for anonymous access"),
    ("group", "module to modify group access"),
    ("issue", "add issue file to user prompt"),
    ("keyinit", "display the keyinit file"),
    ("lastlog", "display date of last login"),
    ("limits", "limit resources"),
    ("listfile", "deny or allow services based on an arbitrary file"),
    ("localuser", "require users to be listed in /etc/passwd"),
    ("loginuid", "record user's login uid to the process attribute"),
    ("mail", "inform about available mail"),
    ("mkhomedir", "create users home directory"),
    ("motd", "display the motd file"),
    ("namespace", "setup a private namespace"),
    ("nologin", "prevent non-root users from login"),
    ("permit", "the promiscuous module"),
    ("pwhistory", "grant access using .pwhistory file"),
    ("rhosts", "grant access using .rhosts file"),
    ("rootok", "gain only root access"),
    ("securetty", "limit root login to special devices"),
    ("selinux", "set the default security context"),
    ("shells", "check for valid login shell"),
    ("succeed_if", "test account characteristics"),
    ("time", "time controlled access"),
    ("timestamp", "authenticate using cached successful authentication attempts"),
    ("umask", "set the file mode creation mask"),
    ("unix", "traditional password authentication"),
    ("userdb", "authenticate against a db database"),
    ("warn", "logs all PAM items"),
    ("wheel", "only permit root access to members of group wheel"),
    ("xauth", "forward xauth keys between users"),
]
PAM_GUIDES: dict[str, list[tuple[str, str]]] = {
    "Linux-PAM_SAG.html": [
        ("sag-introduction.html", "1. Introduction"),
        ("sag-text-conventions.html", "2. Some comments on the text"),
        ("sag-overview.html", "3. Overview"),
        ("sag-configuration.html", "4. The Linux-PAM configuration file"),
        ("sag-configuration-file.html", "4.1. Configuration file syntax"),
        ("sag-configuration-directory.html", "4.2. Directory based configuration"),
        ("sag-configuration-example.html", "4.3. Example configuration file entries"),
        ("sag-security-issues.html", "5. Security issues"),
        ("sag-security-issues-wrong.html", "5.1. If something goes wrong"),
        ("sag-security-issues-other.html", "5.2. Avoid having a weak `other' configuration"),
        ("sag-module-reference.html", "6. A reference guide for available modules"),
        *(
            (f"sag-pam_{module}.html", f"6.{n}. pam_{module} - {what}")
            for n, (module, what) in enumerate(_PAM_MODULES, 1)
        ),
        ("sag-see-also.html", "7. See also"),
        ("sag-author.html", "8. Author/acknowledgments"),
        ("sag-copyright.html", "9. Copyright information for this document"),
    ],
    "Linux-PAM_MWG.html": [
        ("mwg-introduction.html", "1. Introduction"),
        ("mwg-introduction-description.html", "1.1. Description"),
        ("mwg-introduction-synopsis.html", "1.2. Synopsis"),
        ("mwg-expected-by-module.html", "2. What can be expected by the module"),
        ("mwg-expected-by-module-item.html", "2.1. Getting and setting PAM_ITEMs and data"),
        ("mwg-expected-by-module-other.html", "2.2. Other functions provided by libpam"),
        ("mwg-expected-of-module.html", "3. What is expected of a module"),
        ("mwg-expected-of-module-overview.html", "3.1. Overview"),
        ("mwg-expected-of-module-auth.html", "3.2. Authentication management"),
        ("mwg-expected-of-module-acct.html", "3.3. Account management"),
        ("mwg-expected-of-module-session.html", "3.4. Session management"),
        ("mwg-expected-of-module-chauthtok.html", "3.5. Authentication token management"),
        ("mwg-see-options.html", "4. Generic optional arguments"),
        ("mwg-see-programming.html", "5. Programming notes"),
        ("mwg-see-programming-sec.html", "5.1. Security issues for module creation"),
        ("mwg-see-programming-syslog.html", "5.2. Use of syslog(3)"),
        ("mwg-see-programming-libs.html", "5.3. Modules that require system libraries"),
        ("mwg-example.html", "6. An example module"),
        ("mwg-see-also.html", "7. See also"),
        ("mwg-author.html", "8. Author/acknowledgments"),
        ("mwg-copyright.html", "9. Copyright information for this document"),
    ],
    "Linux-PAM_ADG.html": [
        ("adg-introduction.html", "1. Introduction"),
        ("adg-introduction-description.html", "1.1. Description"),
        ("adg-introduction-synopsis.html", "1.2. Synopsis"),
        ("adg-overview.html", "2. Overview"),
        ("adg-interface.html", "3. The public interface to Linux-PAM"),
        ("adg-interface-by-app-expected.html", "3.1. What can be expected by the application"),
        ("adg-interface-of-app-expected.html", "3.2. What is expected of an application"),
        ("adg-interface-programming-notes.html", "3.3. Programming notes"),
        ("adg-security.html", "4. Security issues of Linux-PAM"),
        ("adg-security-library-calls.html", "4.1. Care about standard library calls"),
        ("adg-security-service-name.html", "4.2. Choice of a service name"),
        ("adg-security-conv-function.html", "4.3. The conversation function"),
        ("adg-security-user-identity.html", "4.4. The identity of the user"),
        ("adg-security-resources.html", "4.5. Sufficient resources"),
        ("adg-libpam_misc.html", "5. A library of miscellaneous helper functions"),
        ("adg-libpam-functions.html", "5.1. Functions supplied"),
        ("adg-porting.html", "6. Porting legacy applications"),
        ("adg-glossary.html", "7. Glossary of PAM related terms"),
        ("adg-example.html", "8. An example application"),
        ("adg-files.html", "9. Files"),
        ("adg-see-also.html", "10. See also"),
        ("adg-author.html", "11. Author/acknowledgments"),
        ("adg-copyright.html", "12. Copyright information for this document"),
    ],
}
# Contents links a Ref cannot find by name: Playwright shows them with no name of their own
# (their text has markup) or on a quoted line (a backquote in the name).
PAM_UNNAMED = {
    "5.2. Avoid having a weak `other' configuration",
    "2.1. Getting and setting PAM_ITEMs and data",
    "2.2. Other functions provided by libpam",
    "3. The public interface to Linux-PAM",
    "4. Security issues of Linux-PAM",
}
# Pages whose snapshot is longer than the web world lets the model write one (browser_snapshot's
# max_tokens: 2,560 tokens of the default model): over 2,400 tokens, measured with Playwright
# MCP 0.0.83 (up to 20,022 tokens; the guides' contents pages 3,146-3,750). The guides'
# contents pages are opened (by Home, Prev of a chapter 1, the index) but never snapshotted;
# the others are never opened.
PAM_LONG = {
    *PAM_GUIDES,
    "sag-configuration-file.html",
    "sag-module-reference.html",
    *(
        f"sag-pam_{module}.html"
        for module in [
            "access",
            "debug",
            "env",
            "exec",
            "filter",
            "group",
            "lastlog",
            "limits",
            "listfile",
            "mail",
            "motd",
            "namespace",
            "pwhistory",
            "succeed_if",
            "time",
            "unix",
            "userdb",
            "xauth",
        ]
    ),
    "mwg-expected-by-module-item.html",
    "mwg-expected-by-module-other.html",
    "mwg-expected-of-module-auth.html",
    "mwg-expected-of-module-chauthtok.html",
    "mwg-see-programming-sec.html",
    "adg-interface-by-app-expected.html",
    "adg-libpam-functions.html",
}
# Pages with a line longer than the web world's snapshot grammar takes (a scalar of at most
# 800 characters, aw_mcp.engines.text_grammars.MAX_SCALAR): a program listing or a paragraph that
# Playwright writes on one line, up to 1,243 characters. The served world could not write
# their real snapshots, so no episode opens them either.
PAM_WIDE = {"adg-example.html", "adg-interface-of-app-expected.html"}
PAM_SKIPPED = (PAM_LONG | PAM_WIDE) - set(PAM_GUIDES)  # never opened
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


NAVIGATION = ("Prev", "Next", "Up", "Home")  # a DocBook page's navigation links


def _pam_url(page: str) -> str:
    return f"{DOCS_URL}/pam/{page}"


def _is_section(name: str) -> bool:  # "4.1. Configuration file syntax", not "4. The ..."
    return name.split(" ", 1)[0].count(".") > 1


def pam_links(page: str) -> dict[str, str]:
    """Where the links of the PAM guides' ``page`` lead (link text -> page): its navigation
    links (Prev, Next, Up, Home) and its contents (index.html: the guides; a guide's contents
    page: every chapter and section; a chapter: its sections), but for :data:`PAM_UNNAMED`."""
    if page == "index.html":
        return dict(PAM_INDEX)
    for home, pages in PAM_GUIDES.items():
        order = [home, *(file for file, _ in pages)]
        if page not in order:
            continue
        at = order.index(page)
        links = {}
        if at:
            links["Prev"] = order[at - 1]
        if at + 1 < len(order):
            links["Next"] = order[at + 1]
        if not at:  # the guide's contents page
            contents = pages
        elif _is_section(pages[at - 1][1]):
            chapters = (file for file, name in reversed(pages[: at - 1]) if not _is_section(name))
            links["Up"] = next(chapters)
            contents = []
        else:  # a chapter: its sections, up to the next chapter
            contents = list(itertools.takewhile(lambda p: _is_section(p[1]), pages[at:]))
        if at:
            links["Home"] = home
        return links | {name: file for file, name in contents if name not in PAM_UNNAMED}
    raise KeyError(f"{page} is not a page of the Linux-PAM guides")


def _pam_follow(rng: random.Random, page: str, names: Collection[str]) -> tuple[list[Call], str]:
    """A click on one of the links ``names`` of ``page`` (none that opens a page of
    :data:`PAM_SKIPPED`) by the ref of a fresh snapshot, the snapshot of the page it opens
    unless that is long (:data:`PAM_LONG`: a guide's contents page), and that page. Prev and
    Next are in both the header and the footer table: either one."""
    links = {n: to for n, to in pam_links(page).items() if n in names and to not in PAM_SKIPPED}
    name = rng.choice(list(links))
    nth = rng.randint(0, 1) if name in ("Prev", "Next") else 0
    click = _click(f"{name} link", Ref("link", name, nth))
    return [click] if links[name] in PAM_LONG else [click, SNAPSHOT], links[name]


def _pam_contents(page: str) -> dict[str, str]:
    return {n: to for n, to in pam_links(page).items() if n not in NAVIGATION}


def _pam_back(rng: random.Random) -> list[Call]:
    return [("browser_navigate_back", {}), *([SNAPSHOT] if rng.random() < 0.5 else [])]


# Pages a docbook_pages episode starts on: any page of a guide that is not long.
PAM_READING = [
    file for pages in PAM_GUIDES.values() for file, _ in pages if file not in PAM_SKIPPED | PAM_LONG
]
# Pages a docbook_contents episode starts on: the guides' index and the chapters whose contents
# list a section an episode may open.
PAM_CONTENTS = [
    "index.html",
    *(
        file
        for pages in PAM_GUIDES.values()
        for file, name in pages
        if file in PAM_READING
        and not _is_section(name)
        and set(_pam_contents(file).values()) - PAM_SKIPPED
    ),
]


def _docbook_pages(rng: random.Random) -> list[Call]:
    """A page of a PAM guide, then one or two of its navigation links (Prev, Next, Up, Home)
    by fresh refs, each page it opens snapshotted; back at the end now and then, and always
    soon after opening a guide's (long) contents page."""
    page = rng.choice(PAM_READING)
    calls = [_nav(_pam_url(page)), SNAPSHOT]
    for _ in range(rng.randint(1, 2)):
        follow, page = _pam_follow(rng, page, NAVIGATION)
        calls += follow
        if page in PAM_LONG:
            break
    back = rng.random() < (0.5 if page in PAM_LONG else 0.4)
    return calls + (_pam_back(rng) if back else [])


def _docbook_contents(rng: random.Random) -> list[Call]:
    """A contents page (the guides' index or a chapter's), one of its contents links by a
    fresh ref, then a link of the page it opens, or back."""
    page = rng.choice(PAM_CONTENTS)
    calls = [_nav(_pam_url(page)), SNAPSHOT]
    follow, page = _pam_follow(rng, page, _pam_contents(page))
    calls += follow
    draw = rng.random()
    if draw < 0.35 or page in PAM_LONG:  # a guide's contents page from the index: no snapshot
        calls += _pam_back(rng) if draw < 0.7 else []
    elif draw < 0.85:
        calls += _pam_follow(rng, page, pam_links(page))[0]
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
    """The bundled web world's facts: they describe these sites (its notes apply as they are).
    A manual the docs site serves that they do not name (the bundled world describes the
    sites of web/train and web/heldout) is added to their ``sites``, so a folder's world.yaml
    names every manual its episodes could open."""
    from aw_mcp.domain.loader import load_domain

    facts = dict(load_domain("web").world.facts)
    sites = str(facts["sites"])
    if more := [f"/{n}/ {DOC_TITLES[n]}" for n in DOC_ROOTS if f"/{n}/" not in sites]:
        facts["sites"] = f"{sites.removesuffix(')')}, {', '.join(more)})"
    return {"facts": facts}


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
    Template("docs", _docs),
    Template("page_tools", _page_tools),
    Template("sign_in", _sign_in, heldout=True),
    Template("valgrind", _valgrind, heldout=True),
]
# Training templates added after data/web/train was recorded, drawn only when named
# (`generate web --templates banner`, `--templates docbook_pages,docbook_contents`): not in
# the pool a plain `generate web` draws from, so its draws for a seed stay as they were and
# `generate web --seed 1 --episodes 170` draws web/train's episodes again.
NAMED_ONLY_TEMPLATES = [
    Template("banner", _banner),
    Template("docbook_pages", _docbook_pages),
    Template("docbook_contents", _docbook_contents),
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
    templates=TEMPLATES + NAMED_ONLY_TEMPLATES,
    scripts=template_scripts(TEMPLATES),
    around=_sites,
    measure=_bundled_facts,
)
