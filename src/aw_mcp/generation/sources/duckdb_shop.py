"""Source ``duckdb``: the MotherDuck/DuckDB MCP server on a local file, HELD OUT ENTIRELY.

``mcp-server-motherduck`` (PyPI; FastMCP 4 and mcp 2.x, in its own virtualenv
``/opt/aw-mcp-motherduck``, see .ci/run) on ``/home/mcp/stock.duckdb``, opened read-write
(``--read-write``), with no MotherDuck token and no network: DuckDB alone answers. The
database is a small products/inventory/sales shop, a schema of its own (sqlite's is
customers/orders), so that the two held-out SQL servers are not the same task. Like
``sqlite``, it has no training split: its episodes measure how a simulator does on a whole
server it never saw (``--tools-from`` its captured tools/list), whose answers are JSON tables
and DuckDB's error texts.

The seed: aw-mcp's own environment has no ``duckdb`` module, so each episode's database file
is written by the server's own virtualenv (its python and the DuckDB it answers with) running
:data:`SEED_SQL`, before the sandbox starts; the sandbox then hands the home to the user.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from aw_mcp.generation.mcp_servers import (
    MCP_USER,
    Call,
    Template,
    mcp_user_world,
    python_server,
    seed_with_server_python,
)

PACKAGE = "mcp-server-motherduck"
VERSION = "1.1.0"
DUCKDB_VERSION = "1.5.6"
FASTMCP_VERSION = "4.2.3"
VENV = "motherduck"  # /opt/aw-mcp-motherduck, whose bin/ holds mcp-server-motherduck
DATABASE = f"/home/{MCP_USER}/stock.duckdb"
PRODUCTS = [
    (1, "Desk Lamp", "lighting", "24.90"),
    (2, "Oak Shelf", "furniture", "89.00"),
    (3, "Wool Rug", "textiles", "120.00"),
    (4, "Floor Lamp", "lighting", "64.50"),
    (5, "Linen Throw", "textiles", "39.00"),
]
INVENTORY = [
    (1, "north", 14),
    (1, "south", 3),
    (2, "north", 6),
    (3, "south", 0),
    (4, "north", 9),
    (5, "south", 22),
]
SALES = [
    (1001, 1, "2026-10-03", 2, "24.90"),
    (1002, 3, "2026-10-05", 1, "120.00"),
    (1003, 5, "2026-10-11", 4, "35.00"),
    (1004, 2, "2026-10-18", 1, "89.00"),
    (1005, 1, "2026-10-24", 1, "22.00"),
    (1006, 4, "2026-10-29", 2, "64.50"),
]


def _values(rows: Sequence[tuple[object, ...]]) -> str:
    return ", ".join(
        "(" + ", ".join(str(v) if isinstance(v, int) else f"'{v}'" for v in row) + ")"
        for row in rows
    )


SEED_SQL = (
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, category VARCHAR, "
    "price DECIMAL(8,2));"
    "CREATE TABLE inventory (product_id INTEGER, warehouse VARCHAR, quantity INTEGER, "
    "PRIMARY KEY (product_id, warehouse));"
    "CREATE TABLE sales (id INTEGER PRIMARY KEY, product_id INTEGER, sold_on DATE, "
    "quantity INTEGER, unit_price DECIMAL(8,2));"
    f"INSERT INTO products VALUES {_values(PRODUCTS)};"
    f"INSERT INTO inventory VALUES {_values(INVENTORY)};"
    f"INSERT INTO sales VALUES {_values(SALES)};"
)
_WRITE_DATABASE = (
    "import sys, duckdb; db = duckdb.connect(sys.argv[1]); db.execute(sys.argv[2]); db.close()"
)


def _seed(root: Path) -> None:
    (root / MCP_USER).mkdir(parents=True)
    database = root / MCP_USER / Path(DATABASE).name
    seed_with_server_python(VENV, PACKAGE, _WRITE_DATABASE, str(database), SEED_SQL)


TABLES = ["products", "inventory", "sales"]


def _query(sql: str) -> Call:
    return ("execute_query", {"sql": sql})


def _explore(rng: random.Random) -> list[Call]:
    category = rng.choice(["lighting", "furniture", "textiles", "garden"])
    warehouse = rng.choice(["north", "south"])
    calls: list[Call] = [("list_tables", {}), ("list_columns", {"table": rng.choice(TABLES)})]
    if rng.random() < 0.3:
        calls.insert(0, ("list_databases", {}))
    calls += rng.sample(
        [
            _query(
                f"SELECT name, price FROM products WHERE category = '{category}' ORDER BY price"
            ),
            _query(
                "SELECT category, count(*) AS products, avg(price) AS avg_price FROM products "
                "GROUP BY category ORDER BY category"
            ),
            _query(
                "SELECT p.name, sum(s.quantity * s.unit_price) AS revenue FROM sales s "
                "JOIN products p ON p.id = s.product_id GROUP BY p.name ORDER BY revenue DESC "
                "LIMIT 3"
            ),
            _query(
                f"SELECT p.name, i.quantity FROM inventory i JOIN products p ON p.id = "
                f"i.product_id WHERE i.warehouse = '{warehouse}' AND i.quantity < "
                f"{rng.choice([5, 10])} ORDER BY i.quantity"
            ),
            _query(
                "SELECT strftime(sold_on, '%Y-%m-%d') AS day, quantity FROM sales "
                f"WHERE sold_on >= DATE '2026-10-{rng.choice([10, 20])}' ORDER BY sold_on"
            ),
            _query("DESCRIBE sales"),
        ],
        2,
    )
    return calls


def _write(rng: random.Random) -> list[Call]:
    product = rng.randint(1, 5)
    quantity = rng.randint(1, 5)
    day = rng.randint(1, 30)
    warehouse = rng.choice(["north", "south"])
    return [
        _query(
            f"INSERT INTO sales VALUES ({1007 + rng.randint(0, 2)}, {product}, "
            f"DATE '2026-11-{day:02d}', {quantity}, "
            f"(SELECT price FROM products WHERE id = {product}))"
        ),
        _query(
            f"UPDATE inventory SET quantity = quantity + {rng.randint(5, 20)} "
            f"WHERE warehouse = '{warehouse}'"
        ),
        rng.choice(
            [
                _query(
                    f"UPDATE products SET price = price * 0.9 WHERE price > {rng.choice([50, 100])}"
                ),
                _query(f"DELETE FROM sales WHERE sold_on < DATE '2026-10-{rng.choice([10, 20])}'"),
            ]
        ),
        rng.choice(
            [
                _query(
                    "SELECT id, product_id, sold_on, quantity, unit_price FROM sales ORDER BY id"
                ),
                _query(
                    "SELECT product_id, warehouse, quantity FROM inventory ORDER BY product_id, "
                    "warehouse"
                ),
                _query("SELECT id, name, price FROM products ORDER BY id"),
            ]
        ),
    ]


def _schema(rng: random.Random) -> list[Call]:
    table = rng.choice(["suppliers", "promotions"])
    return [
        _query(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, code VARCHAR, rate DOUBLE)"),
        _query(f"INSERT INTO {table} VALUES (1, 'A1', 0.05), (2, 'B2', 0.125)"),
        rng.choice(
            [
                _query(
                    "CREATE VIEW stock_value AS SELECT p.name, sum(i.quantity) * p.price AS value "
                    "FROM inventory i JOIN products p ON p.id = i.product_id GROUP BY p.name, "
                    "p.price"
                ),
                _query(f"ALTER TABLE {table} ADD COLUMN active BOOLEAN DEFAULT true"),
            ]
        ),
        ("list_tables", {}),
        ("list_columns", {"table": table}),
        _query(f"SELECT * FROM {table} ORDER BY id"),
    ]


def _errors(rng: random.Random) -> list[Call]:
    bad: list[Call] = [
        _query("SELECT * FROM customers"),
        _query("SELEC name FROM products"),
        _query("INSERT INTO products VALUES (1, 'Duplicate', 'lighting', 1.00)"),
        _query("SELECT 'many'::INTEGER"),
        _query("SELECT nme FROM products"),
        _query("INSERT INTO sales (id, product_id) VALUES (2001)"),
        ("list_columns", {"table": "orders"}),
        ("list_tables", {"database": "warehouse"}),
    ]
    return [*rng.sample(bad, 3), _query("SELECT count(*) AS n FROM products")]


SOURCE = mcp_user_world(
    name="duckdb",
    summary=f"the MotherDuck/DuckDB MCP server on a local DuckDB file, held out entirely "
    f"(needs root and {PACKAGE} in /opt/aw-mcp-{VENV})",
    versions={PACKAGE: VERSION, "duckdb": DUCKDB_VERSION, "fastmcp": FASTMCP_VERSION},
    seed=_seed,
    servers={
        "duckdb": [python_server(VENV, PACKAGE), "--db-path", DATABASE, "--read-write"],
    },
    # No banner on stderr, and so no update check against PyPI when the server starts.
    env={"FASTMCP_SHOW_SERVER_BANNER": "false", "FASTMCP_CHECK_FOR_UPDATES": "off"},
    templates=[
        Template("explore", _explore, heldout=True),
        Template("write", _write, heldout=True),
        Template("schema", _schema, heldout=True),
        Template("errors", _errors, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} with DuckDB {DUCKDB_VERSION} (server name "
            f"duckdb) on {DATABASE}, read-write, no MotherDuck connection",
            "database": "stock (schema main): tables products (id, name, category, price "
            "DECIMAL(8,2)) with 5 rows, inventory (product_id, warehouse north/south, "
            "quantity; key product_id+warehouse) with 6 rows, sales (id, product_id, sold_on "
            "DATE, quantity, unit_price) with 6 rows (ids 1001-1006, October 2026)",
        },
        "notes": [
            "execute_query answers JSON: success, columns, columnTypes, rows (lists; DECIMAL "
            "and DATE values as strings), rowCount; INSERT/UPDATE/DELETE answer one column "
            "Count with the rows changed.",
            "SQL errors are isError answers: \"Error calling tool 'execute_query': \" then JSON "
            "with success false, DuckDB's message (e.g. 'Catalog Error: ...') and errorType.",
            "list_tables and list_columns answer JSON too; a missing table or database is "
            "not isError there but JSON with success false, error and errorType NotFoundError.",
        ],
    },
)
