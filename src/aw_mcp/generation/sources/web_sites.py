"""The real web sites the web and fetch sources record against, served on loopback.

- **Bookshop** (``SHOP_URL``): a small real web application (stdlib ``http.server``): home
  page with featured books and a search box, a paginated catalogue, book pages with an
  "Add to cart" form, a cart kept in a cookie (quantities, remove, total), a checkout form
  with real validation errors, a sign-in form, a search with "no results" and "empty query"
  answers, and real error pages (404, 403 behind robots.txt, a 500 on "Gift cards").
- **Documentation** (``DOCS_URL``): real HTML manuals that Debian packages install, served
  as files: ``/libffi/`` (libffi-dev's texinfo manual), ``/valgrind/`` (valgrind's, DocBook
  XSL HTML) and ``/pam/`` (libpam-doc's Linux-PAM guides, DocBook XSL HTML: the System
  Administrators', Module Writers' and Application Developers' guides, each a contents page
  and its chapters and sections, with a navigation header and footer on every page).

Both run in threads of the generating process only while a source records; nothing here is
used by ``serve``. Pages depend only on the request (and its cookies), so every episode, in a
fresh browser profile, starts from the same site.
"""

from __future__ import annotations

import contextlib
import html
import http.server
import threading
import urllib.parse
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
SHOP_PORT = 8431
DOCS_PORT = 8432
SHOP_URL = f"http://{HOST}:{SHOP_PORT}"
DOCS_URL = f"http://{HOST}:{DOCS_PORT}"
# Manuals served under DOCS_URL/<name>/ (from Debian packages: libffi-dev, valgrind,
# libpam-doc), each a flat folder of .html files.
DOC_ROOTS = {
    "libffi": Path("/usr/share/doc/libffi-dev/html"),
    "valgrind": Path("/usr/share/doc/valgrind/html"),
    "pam": Path("/usr/share/doc/libpam-doc/html"),
}
DOC_TITLES = {
    "libffi": "the libffi manual",
    "valgrind": "the Valgrind documentation",
    "pam": "the Linux-PAM guides",
}
PER_PAGE = 5
COUNTRIES = ["Germany", "France", "Portugal", "Spain", "United Kingdom"]
SIGN_IN = ("alex@example.com", "tulip-42")


@dataclass(frozen=True)
class Book:
    id: int
    title: str
    author: str
    price_cents: int
    year: int

    @property
    def price(self) -> str:
        return f"${self.price_cents // 100}.{self.price_cents % 100:02d}"


BOOKS = [
    Book(1, "The Pragmatic Programmer", "David Thomas, Andrew Hunt", 3999, 2019),
    Book(2, "Clean Code", "Robert C. Martin", 3450, 2008),
    Book(3, "Designing Data-Intensive Applications", "Martin Kleppmann", 4500, 2017),
    Book(4, "Structure and Interpretation of Computer Programs", "Harold Abelson", 5200, 1996),
    Book(5, "The C Programming Language", "Brian Kernighan, Dennis Ritchie", 4800, 1988),
    Book(6, "Fluent Python", "Luciano Ramalho", 5599, 2022),
    Book(7, "Refactoring", "Martin Fowler", 4299, 2018),
    Book(8, "Introduction to Algorithms", "Thomas H. Cormen", 8950, 2022),
    Book(9, "Code Complete", "Steve McConnell", 3800, 2004),
    Book(10, "Working Effectively with Legacy Code", "Michael Feathers", 4450, 2004),
    Book(11, "Python Crash Course", "Eric Matthes", 2999, 2023),
    Book(12, "The Rust Programming Language", "Steve Klabnik, Carol Nichols", 3995, 2023),
]
FEATURED = [1, 2, 3]
BY_ID = {b.id: b for b in BOOKS}


def _money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def parse_cart(cookie: str) -> dict[int, int]:
    """``"1:2,3:1"`` -> {1: 2, 3: 1}; unknown books and bad parts are dropped."""
    cart: dict[int, int] = {}
    for part in cookie.split(","):
        book, _, qty = part.partition(":")
        if book.isdigit() and qty.isdigit() and int(book) in BY_ID and int(qty) > 0:
            cart[int(book)] = int(qty)
    return cart


def cart_cookie(cart: dict[int, int]) -> str:
    return ",".join(f"{book}:{qty}" for book, qty in cart.items())


class ShopHandler(http.server.BaseHTTPRequestHandler):
    """One request of the bookshop."""

    server_version = "Bookshop/1.0"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    # -- plumbing ---------------------------------------------------------------------------

    def _cookies(self) -> dict[str, str]:
        jar: dict[str, str] = {}
        for part in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name:
                jar[name] = urllib.parse.unquote(value)
        return jar

    def _cart(self) -> dict[int, int]:
        return parse_cart(self._cookies().get("cart", ""))

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        return {k: v[0] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}

    def _send(self, status: int, body: str, kind: str = "html", cookie: str = "") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", f"text/{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if cookie:
            self.send_header("Set-Cookie", cookie)
        self.end_headers()
        self.wfile.write(data)

    def _redirect(self, where: str, cookies: dict[str, str] | None = None) -> None:
        self.send_response(303)
        self.send_header("Location", where)
        for name, value in (cookies or {}).items():
            self.send_header("Set-Cookie", f"{name}={urllib.parse.quote(value)}; Path=/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _page(self, title: str, body: str, status: int = 200) -> None:
        cart = self._cart()
        user = self._cookies().get("user")
        account = (
            f'<span class="user">Signed in as {html.escape(user)}</span>'
            if user
            else '<a href="/signin">Sign in</a>'
        )
        page = (
            f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)} - Bookshop</title></head><body>"
            "<header><nav><a href='/'>Home</a> <a href='/books'>Books</a> "
            "<a href='/gift-cards'>Gift cards</a> "
            f"<a href='/cart'>Cart ({sum(cart.values())})</a> {account}</nav>"
            "<form action='/search' method='get' role='search'>"
            "<input type='search' name='q' aria-label='Search books' "
            "placeholder='Search books'><button type='submit'>Search</button></form></header>"
            f"<main>{body}</main><footer><p>Bookshop demo store</p></footer></body></html>"
        )
        self._send(status, page)

    def _book_list(self, books: list[Book]) -> str:
        items = "".join(
            f"<li><a href='/books/{b.id}'>{html.escape(b.title)}</a> by "
            f"{html.escape(b.author)} <span class='price'>{b.price}</span></li>"
            for b in books
        )
        return f"<ul class='books'>{items}</ul>"

    # -- routes -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        path = url.path.rstrip("/") or "/"
        if path == "/favicon.ico":
            self.send_response(204)
            self.end_headers()
        elif path == "/robots.txt":
            self._send(200, "User-agent: *\nDisallow: /admin\n", kind="plain")
        elif path == "/":
            self._home()
        elif path == "/books":
            self._catalogue(query.get("page", "1"))
        elif path.startswith("/books/"):
            self._book(path.removeprefix("/books/"))
        elif path == "/search":
            self._search(query.get("q", ""))
        elif path == "/cart":
            self._cart_page()
        elif path == "/checkout":
            self._checkout_form({}, [])
        elif path == "/signin":
            self._signin_form("", None)
        elif path == "/admin":
            self._page("Forbidden", "<h1>403 Forbidden</h1><p>Staff only.</p>", 403)
        elif path == "/gift-cards":
            self._page(
                "Server error",
                "<h1>500 Internal Server Error</h1><p>Something went wrong on our side. "
                "Please try again later.</p>",
                500,
            )
        else:
            self._not_found()

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        form = self._form()
        if path == "/cart/add":
            self._add_to_cart(form)
        elif path == "/cart/remove":
            cart, book = self._cart(), form.get("book_id", "")
            cart.pop(int(book) if book.isdigit() else 0, None)
            self._redirect("/cart", {"cart": cart_cookie(cart)})
        elif path == "/checkout":
            self._place_order(form)
        elif path == "/signin":
            self._sign_in(form)
        else:
            self._not_found()

    def _not_found(self) -> None:
        self._page(
            "Page not found",
            "<h1>Page not found</h1><p>The page you asked for does not exist.</p>"
            "<p><a href='/'>Back to the home page</a></p>",
            404,
        )

    def _home(self) -> None:
        featured = [BY_ID[i] for i in FEATURED]
        cards = "".join(
            f"<article><h3><a href='/books/{b.id}'>{html.escape(b.title)}</a></h3>"
            f"<p>{html.escape(b.author)}</p><p class='price'>{b.price}</p>"
            "<form method='post' action='/cart/add'>"
            f"<input type='hidden' name='book_id' value='{b.id}'>"
            "<input type='hidden' name='quantity' value='1'>"
            "<button type='submit'>Add to cart</button></form></article>"
            for b in featured
        )
        self._page(
            "Home",
            "<h1>Welcome to the Bookshop</h1><p>Programming books, shipped in two days.</p>"
            f"<section><h2>Featured books</h2>{cards}</section>"
            f"<p><a href='/books'>Browse all {len(BOOKS)} books</a></p>",
        )

    def _catalogue(self, page_text: str) -> None:
        pages = (len(BOOKS) + PER_PAGE - 1) // PER_PAGE
        if not page_text.isdigit() or not 1 <= int(page_text) <= pages:
            self._page(
                "Catalogue",
                f"<h1>All books</h1><p class='error'>There is no page {html.escape(page_text)}."
                f" The catalogue has {pages} pages.</p><p><a href='/books'>First page</a></p>",
                404,
            )
            return
        page = int(page_text)
        shown = BOOKS[(page - 1) * PER_PAGE : page * PER_PAGE]
        links = []
        if page > 1:
            links.append(f"<a href='/books?page={page - 1}'>Previous</a>")
        links.append(f"<span>Page {page} of {pages}</span>")
        if page < pages:
            links.append(f"<a href='/books?page={page + 1}'>Next</a>")
        self._page(
            f"All books, page {page}",
            f"<h1>All books</h1>{self._book_list(shown)}"
            f"<nav aria-label='Pagination'>{' '.join(links)}</nav>",
        )

    def _book(self, ident: str) -> None:
        book = BY_ID.get(int(ident)) if ident.isdigit() else None
        if book is None:
            self._not_found()
            return
        self._page(
            book.title,
            f"<h1>{html.escape(book.title)}</h1><p>by {html.escape(book.author)}, "
            f"{book.year}</p><p class='price'>{book.price}</p>"
            "<form method='post' action='/cart/add'>"
            f"<input type='hidden' name='book_id' value='{book.id}'>"
            "<label>Quantity <input type='number' name='quantity' value='1' min='1' "
            "max='10'></label> <button type='submit'>Add to cart</button></form>"
            "<p><a href='/books'>Back to all books</a></p>",
        )

    def _search(self, q: str) -> None:
        words = q.strip()
        if not words:
            self._page("Search", "<h1>Search</h1><p class='error'>Please enter a search term.</p>")
            return
        hits = [b for b in BOOKS if words.lower() in f"{b.title} {b.author}".lower()]
        found = (
            f"<p>{len(hits)} result{'s' if len(hits) != 1 else ''} for "
            f"\u201c{html.escape(words)}\u201d</p>{self._book_list(hits)}"
            if hits
            else f"<p>No books found for \u201c{html.escape(words)}\u201d.</p>"
        )
        self._page(f"Search: {words}", f"<h1>Search results</h1>{found}")

    def _add_to_cart(self, form: dict[str, str]) -> None:
        book, qty = form.get("book_id", ""), form.get("quantity", "1")
        if not (book.isdigit() and int(book) in BY_ID):
            self._not_found()
            return
        if not qty.isdigit() or not 1 <= int(qty) <= 10:
            self._page(
                "Cart",
                "<h1>Your cart</h1><p class='error'>Quantity must be a whole number from 1 "
                "to 10.</p><p><a href='/cart'>Back to the cart</a></p>",
                400,
            )
            return
        cart = self._cart()
        cart[int(book)] = min(10, cart.get(int(book), 0) + int(qty))
        self._redirect("/cart", {"cart": cart_cookie(cart)})

    def _cart_page(self) -> None:
        cart = self._cart()
        if not cart:
            self._page(
                "Cart",
                "<h1>Your cart</h1><p>Your cart is empty.</p>"
                "<p><a href='/books'>Browse books</a></p>",
            )
            return
        rows = "".join(
            f"<tr><td><a href='/books/{b}'>{html.escape(BY_ID[b].title)}</a></td><td>{q}</td>"
            f"<td>{_money(BY_ID[b].price_cents * q)}</td><td><form method='post' "
            f"action='/cart/remove'><input type='hidden' name='book_id' value='{b}'>"
            "<button type='submit'>Remove</button></form></td></tr>"
            for b, q in cart.items()
        )
        total = sum(BY_ID[b].price_cents * q for b, q in cart.items())
        self._page(
            "Cart",
            "<h1>Your cart</h1><table><thead><tr><th>Book</th><th>Quantity</th>"
            f"<th>Price</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p class='total'>Total: {_money(total)}</p>"
            "<p><a href='/checkout'>Checkout</a></p>",
        )

    def _checkout_form(self, values: dict[str, str], errors: list[str], status: int = 200) -> None:
        if not self._cart():
            self._page(
                "Checkout",
                "<h1>Checkout</h1><p>Your cart is empty.</p><p><a href='/books'>Browse "
                "books</a></p>",
            )
            return
        shown = "".join(f"<li>{html.escape(e)}</li>" for e in errors)
        options = "".join(
            f"<option{' selected' if values.get('country') == c else ''}>{c}</option>"
            for c in COUNTRIES
        )

        def field(name: str, label: str, kind: str = "text") -> str:
            value = html.escape(values.get(name, ""), quote=True)
            return (
                f"<p><label>{label} <input type='{kind}' name='{name}' value='{value}'></label></p>"
            )

        self._page(
            "Checkout",
            "<h1>Checkout</h1>"
            + (
                f"<div role='alert'><p>Please fix the following:</p><ul>{shown}</ul></div>"
                if errors
                else ""
            )
            + "<form method='post' action='/checkout'>"
            + field("name", "Full name")
            + field("email", "Email", "email")
            + field("address", "Address")
            + f"<p><label>Country <select name='country'>{options}</select></label></p>"
            + "<p><button type='submit'>Place order</button></p></form>",
            status,
        )

    def _place_order(self, form: dict[str, str]) -> None:
        cart = self._cart()
        if not cart:
            self._checkout_form({}, [])
            return
        errors = []
        if not form.get("name", "").strip():
            errors.append("Full name is required.")
        email = form.get("email", "").strip()
        if not email:
            errors.append("Email is required.")
        elif "@" not in email or "." not in email.rpartition("@")[2]:
            errors.append(f"\u201c{email}\u201d is not a valid email address.")
        if not form.get("address", "").strip():
            errors.append("Address is required.")
        if form.get("country") not in COUNTRIES:
            errors.append("Please choose a country.")
        if errors:
            self._checkout_form(form, errors, 400)
            return
        total = sum(BY_ID[b].price_cents * q for b, q in cart.items())
        # The order number follows from the order itself (no server-side counter).
        number = 10000 + zlib.crc32(f"{cart_cookie(cart)}|{form['name']}|{email}".encode()) % 90000
        body = (
            f"<h1>Thank you for your order!</h1><p>Order number: {number}</p>"
            f"<p>{sum(cart.values())} book(s), total {_money(total)}, shipping to "
            f"{html.escape(form['name'])}, {html.escape(form['address'])}, "
            f"{html.escape(form['country'])}.</p><p>A confirmation was sent to "
            f"{html.escape(email)}.</p><p><a href='/'>Continue shopping</a></p>"
        )
        page = (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Order "
            f"confirmed - Bookshop</title></head><body><main>{body}</main></body></html>"
        )
        self._send(200, page, cookie="cart=; Path=/; Max-Age=0")

    def _signin_form(self, email: str, error: str | None, status: int = 200) -> None:
        alert = f"<p role='alert' class='error'>{html.escape(error)}</p>" if error else ""
        self._page(
            "Sign in",
            f"<h1>Sign in</h1>{alert}<form method='post' action='/signin'>"
            "<p><label>Email <input type='email' name='email' "
            f"value='{html.escape(email, quote=True)}'>"
            "</label></p><p><label>Password <input type='password' name='password'></label></p>"
            "<p><button type='submit'>Sign in</button></p></form>",
            status,
        )

    def _sign_in(self, form: dict[str, str]) -> None:
        email, password = form.get("email", "").strip(), form.get("password", "")
        if (email, password) == SIGN_IN:
            self._redirect("/", {"user": "Alex"})
        elif not email or not password:
            self._signin_form(email, "Enter your email and password.", 400)
        else:
            self._signin_form(email, "Invalid email or password.", 401)


class DocsHandler(http.server.SimpleHTTPRequestHandler):
    """The installed manuals as files: ``/<name>/<file>`` from :data:`DOC_ROOTS`."""

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def translate_path(self, path: str) -> str:
        parts = urllib.parse.unquote(urllib.parse.urlsplit(path).path).strip("/").split("/")
        root = DOC_ROOTS.get(parts[0]) if parts and parts[0] else None
        if root is None:
            return "/nonexistent"
        rest = [p for p in parts[1:] if p not in ("", ".", "..")]
        return str(root.joinpath(*rest))

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path == "/favicon.ico":
            self.send_response(204)
            self.end_headers()
        elif path == "/":
            links = "".join(f"<li><a href='/{name}/'>{name}</a></li>" for name in DOC_ROOTS)
            body = (
                "<!DOCTYPE html><html><head><title>Installed documentation</title></head>"
                f"<body><h1>Installed documentation</h1><ul>{links}</ul></body></html>"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()


def missing_docs() -> list[str]:
    """The manuals this machine lacks (their Debian packages are not installed)."""
    return [str(root) for root in DOC_ROOTS.values() if not root.is_dir()]


@contextlib.contextmanager
def serving(shop_port: int = SHOP_PORT, docs_port: int = DOCS_PORT) -> Iterator[tuple[str, str]]:
    """Serve the bookshop and the documentation on loopback while the block runs; yields their
    base URLs (a port of 0 takes any free one: the recorded URLs need the fixed ports)."""
    servers: list[http.server.ThreadingHTTPServer] = []
    try:
        for port, handler in ((shop_port, ShopHandler), (docs_port, DocsHandler)):
            server = http.server.ThreadingHTTPServer((HOST, port), handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
        shop, docs = (f"http://{HOST}:{s.server_address[1]}" for s in servers)
        yield shop, docs
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
