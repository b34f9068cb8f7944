"""Source ``sqlite``: the reference SQLite server, HELD OUT ENTIRELY.

``mcp-server-sqlite`` (PyPI; it needs ``mcp`` 1.x, so it has its own virtualenv) on
``/home/mcp/shop.db``, seeded with a small customers/orders database. It has no training
split: its episodes measure how a simulator does on a server it never saw (``--tools-from``
its captured tools/list), beside the servers seen in training.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from aw_mcp.generation.mcp_servers import MCP_USER, Call, Template, mcp_user_world, python_server

PACKAGE = "mcp-server-sqlite"
VERSION = "2025.4.25"
DATABASE = f"/home/{MCP_USER}/shop.db"
CUSTOMERS = [
    (1, "Alice Martin", "alice@example.com", "Lisbon"),
    (2, "Bob Keller", "bob@example.com", "Berlin"),
    (3, "Chen Wei", "chen@example.com", "Paris"),
    (4, "Dana Scott", "dana@example.com", "Lisbon"),
]
ORDERS = [
    (101, 1, "2026-11-02", 39.99),
    (102, 2, "2026-11-05", 79.49),
    (103, 1, "2026-11-17", 12.50),
    (104, 3, "2026-11-20", 45.00),
    (105, 4, "2026-11-28", 101.25),
]
SCHEMA = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, "
    "city TEXT);"
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES "
    "customers(id), placed_on TEXT, total REAL);"
)


def _seed(root: Path) -> None:
    (root / MCP_USER).mkdir(parents=True)
    with sqlite3.connect(root / MCP_USER / "shop.db") as db:
        db.executescript(SCHEMA)
        db.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", CUSTOMERS)
        db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)
    db.close()


def _explore(rng: random.Random) -> list[Call]:
    city = rng.choice(["Lisbon", "Berlin", "Paris", "Madrid"])
    return [
        ("list_tables", {}),
        ("describe_table", {"table_name": rng.choice(["customers", "orders"])}),
        rng.choice(
            [
                (
                    "read_query",
                    {"query": f"SELECT name, email FROM customers WHERE city = '{city}'"},
                ),
                (
                    "read_query",
                    {"query": "SELECT COUNT(*) AS n, SUM(total) AS revenue FROM orders"},
                ),
                (
                    "read_query",
                    {
                        "query": "SELECT c.name, o.total FROM orders o JOIN customers c "
                        "ON c.id = o.customer_id ORDER BY o.total DESC LIMIT 3"
                    },
                ),
            ]
        ),
    ]


def _write(rng: random.Random) -> list[Call]:
    name = rng.choice(["Emeka Obi", "Farah Haddad", "Giulia Rossi"])
    total = round(rng.uniform(5, 120), 2)
    return [
        (
            "write_query",
            {
                "query": f"INSERT INTO customers (name, email, city) VALUES ('{name}', "
                f"'{name.split()[0].lower()}@example.com', 'Madrid')"
            },
        ),
        (
            "write_query",
            {
                "query": f"INSERT INTO orders (customer_id, placed_on, total) VALUES "
                f"(5, '2026-11-30', {total})"
            },
        ),
        (
            "write_query",
            {
                "query": "UPDATE orders SET total = total * 0.9 WHERE total > "
                f"{rng.choice([40, 80])}"
            },
        ),
        ("read_query", {"query": "SELECT id, total FROM orders ORDER BY id"}),
    ]


def _schema(rng: random.Random) -> list[Call]:
    table = rng.choice(["reviews", "coupons"])
    return [
        (
            "create_table",
            {"query": f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, code TEXT, amount REAL)"},
        ),
        (
            "write_query",
            {"query": f"INSERT INTO {table} (code, amount) VALUES ('X1', 5.0), ('Y2', 7.5)"},
        ),
        ("list_tables", {}),
        ("describe_table", {"table_name": table}),
        ("append_insight", {"insight": f"The {table} table was added with two rows."}),
    ]


def _errors(rng: random.Random) -> list[Call]:
    bad: list[Call] = [
        ("read_query", {"query": "SELECT * FROM products"}),
        ("read_query", {"query": "DELETE FROM orders"}),
        ("write_query", {"query": "SELECT * FROM customers"}),
        ("write_query", {"query": "INSERT INTO customers (id, name) VALUES (1, 'Dup')"}),
        ("create_table", {"query": "DROP TABLE orders"}),
        ("describe_table", {"table_name": "nope"}),
        ("read_query", {"query": "SELEC name FROM customers"}),
    ]
    return [*rng.sample(bad, 3), ("read_query", {"query": "SELECT COUNT(*) FROM customers"})]


SOURCE = mcp_user_world(
    name="sqlite",
    summary=f"the SQLite MCP server, held out entirely (needs root and {PACKAGE} in "
    "/opt/aw-mcp-sqlite)",
    versions={PACKAGE: VERSION, "mcp": "1.30.0"},
    seed=_seed,
    servers={"sqlite": [python_server("sqlite", "mcp-server-sqlite"), "--db-path", DATABASE]},
    templates=[
        Template("explore", _explore, heldout=True),
        Template("write", _write, heldout=True),
        Template("schema", _schema, heldout=True),
        Template("errors", _errors, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} (server name sqlite) on {DATABASE}",
            "database": "tables customers (id, name, email UNIQUE, city) with 4 rows and "
            "orders (id, customer_id, placed_on, total) with 5 rows (ids 101-105)",
        },
        "notes": [
            "Query results are Python reprs of row lists, e.g. [{'id': 1, 'name': 'a'}]; "
            "write_query answers [{'affected_rows': N}].",
            "SQL errors are plain texts (not isError): 'Database error: <sqlite message>'.",
        ],
    },
)
