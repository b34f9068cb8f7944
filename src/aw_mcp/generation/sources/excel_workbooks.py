"""Source ``excel``: an Excel workbook server on real .xlsx files, a stateful store.

``excel-mcp-server`` (PyPI, haris-musa; openpyxl, in its own virtualenv ``/opt/aw-mcp-excel``,
see .ci/run) with ``--allow-dir /home/mcp`` (relative paths start there) and the tool areas
``workbooks,csv,sheets,data`` (besides its core tools). Each episode's home holds a seeded
workbook ``sales.xlsx`` (sheets Q3 and Summary, the latter with formulas) and ``orders.csv``;
the workbook is written by the server's own virtualenv (its python and openpyxl) before the
sandbox starts. Episodes look around, build a workbook, edit the seeded one, go between CSV
and sheets, and make an agent's mistakes (a missing workbook or sheet, a bad range, an
existing file, a bad sheet name). Held out: the template ``report`` (a summary sheet of
formulas over Q3, copied and searched).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from aw_mcp.generation.mcp_servers import (
    MCP_USER,
    Call,
    Template,
    mcp_user_world,
    python_server,
    seed_with_server_python,
)

PACKAGE = "excel-mcp-server"
VERSION = "2.2.2"
OPENPYXL_VERSION = "3.1.5"
MCP_VERSION = "2.3.0"
VENV = "excel"  # /opt/aw-mcp-excel, whose bin/ holds excel-mcp-server
HOME = f"/home/{MCP_USER}"
WORKBOOK = "sales.xlsx"
CSV = "orders.csv"
TOOL_AREAS = "workbooks,csv,sheets,data"
HEADER = ["Region", "Month", "Units", "Revenue"]
Q3 = [
    ["North", "Jul", 120, 3480.0],
    ["South", "Jul", 95, 2755.5],
    ["North", "Aug", 134, 3886.0],
    ["South", "Aug", 88, 2552.0],
    ["North", "Sep", 141, 4089.0],
    ["South", "Sep", 102, 2958.0],
]
SUMMARY = [
    ["Metric", "Value"],
    ["Total units", "=SUM(Q3!C2:C7)"],
    ["Total revenue", "=SUM(Q3!D2:D7)"],
    ["Average units", "=AVERAGE(Q3!C2:C7)"],
]
ORDERS_CSV = (
    "order_id,customer,item,qty,price\n"
    "1001,Acme,Widget,4,2.50\n"
    "1002,Globex,Gadget,1,19.99\n"
    "1003,Initech,Widget,10,2.50\n"
    "1004,Acme,Sprocket,3,7.25\n"
)
_WRITE_WORKBOOK = """
import json, sys
from openpyxl import Workbook
sheets = json.loads(sys.argv[2])
book = Workbook()
book.remove(book.active)
for name, rows in sheets.items():
    sheet = book.create_sheet(name)
    for row in rows:
        sheet.append(row)
book.save(sys.argv[1])
"""


def _seed(root: Path) -> None:
    home = root / MCP_USER
    home.mkdir(parents=True)
    (home / CSV).write_text(ORDERS_CSV, encoding="utf-8")
    sheets = {"Q3": [HEADER, *Q3], "Summary": SUMMARY}
    seed_with_server_python(
        VENV, PACKAGE, _WRITE_WORKBOOK, str(home / WORKBOOK), json.dumps(sheets)
    )


def _q3(**more: Any) -> dict[str, Any]:
    return {"path": WORKBOOK, "sheet": "Q3", **more}


def _explore(rng: random.Random) -> list[Call]:
    calls: list[Call] = [
        rng.choice([("list_workbooks", {}), ("describe_workbook", {"path": WORKBOOK})])
    ]
    calls += rng.sample(
        [
            ("describe_sheet", _q3()),
            ("read_range", _q3()),
            ("read_range", _q3(range=rng.choice(["A1:D4", "C2:D7", "A:A", "1:3", "B5"]))),
            ("read_range", {"path": WORKBOOK, "sheet": "Summary"}),
            ("read_range", {"path": WORKBOOK, "sheet": "Summary", "mode": "formulas"}),
            ("find_cells", {"path": WORKBOOK, "query": rng.choice(["North", "Aug", "South"])}),
            ("find_cells", {"path": WORKBOOK, "query": "SUM", "mode": "formulas"}),
            ("describe_workbook", {"path": WORKBOOK}),
        ],
        rng.randint(2, 4),
    )
    return calls


def _build(rng: random.Random) -> list[Call]:
    name, sheet, items = rng.choice(
        [
            ("budget.xlsx", "Expenses", ["Rent", "Food", "Travel", "Power", "Phone"]),
            ("inventory.xlsx", "Stock", ["Bolts", "Nuts", "Washers", "Screws", "Rivets"]),
            ("team.xlsx", "Hours", ["Ana", "Ben", "Caro", "Dev", "Eli"]),
        ]
    )
    rows: list[list[object]] = [["Name", "Amount"]]
    picked = rng.sample(items, rng.randint(2, 4))
    rows += [
        [item, rng.choice([rng.randint(5, 900), round(rng.uniform(1, 300), 2)])] for item in picked
    ]
    last = len(rows)
    rows.append(["Total", f"=SUM(B2:B{last})"])
    calls: list[Call] = [
        ("create_workbook", {"path": name, "sheets": [sheet]}),
        ("write_range", {"path": name, "sheet": sheet, "at": "A1", "rows": rows}),
        ("read_range", {"path": name, "sheet": sheet}),
    ]
    if rng.random() < 0.5:
        calls.append(("read_range", {"path": name, "sheet": sheet, "mode": "formulas"}))
    if rng.random() < 0.5:
        calls.append(
            (
                "sort_range",
                {
                    "path": name,
                    "sheet": sheet,
                    "range": f"A1:B{last}",
                    "sort_by": [
                        {"column": "Amount", "order": rng.choice(["ascending", "descending"])}
                    ],
                },
            )
        )
        calls.append(("read_range", {"path": name, "sheet": sheet, "range": f"A1:B{last + 1}"}))
    calls.append(rng.choice([("list_workbooks", {}), ("describe_workbook", {"path": name})]))
    return calls


def _edit(rng: random.Random) -> list[Call]:
    region = rng.choice(["East", "West"])
    units = rng.randint(50, 150)
    calls: list[Call] = [
        ("write_range", _q3(at="A8", rows=[[region, "Sep", units, round(units * 29.0, 2)]])),
        ("read_range", {"path": WORKBOOK, "sheet": "Summary"}),
    ]
    calls += rng.sample(
        [
            ("insert_rows_or_columns", _q3(axis="rows", start=2, count=rng.randint(1, 2))),
            ("delete_rows_or_columns", _q3(axis="rows", start=rng.randint(2, 7))),
            (
                "create_sheet",
                {"path": WORKBOOK, "new_name": rng.choice(["Q4", "Notes", "Targets"])},
            ),
            ("rename_sheet", {"path": WORKBOOK, "sheet": "Summary", "new_name": "Totals"}),
            ("clear_range", _q3(range=rng.choice(["D2:D3", "C5", "A7:D7"]))),
            ("copy_sheet", {"path": WORKBOOK, "sheet": "Q3", "new_name": "Q3 copy"}),
        ],
        rng.randint(1, 2),
    )
    calls.append(rng.choice([("describe_workbook", {"path": WORKBOOK}), ("read_range", _q3())]))
    return calls


def _csv(rng: random.Random) -> list[Call]:
    target = rng.choice(["orders.xlsx", WORKBOOK])
    sheet = rng.choice(["Orders", "Imported"])
    calls: list[Call] = []
    if target != WORKBOOK:
        calls.append(("create_workbook", {"path": target, "sheets": [sheet]}))
    calls += [
        ("import_csv", {"path": target, "csv_path": CSV, "sheet": sheet}),
        (
            "read_range",
            {"path": target, "sheet": sheet, "range": rng.choice(["A1:E3", "A1:E5", "C1:E5"])},
        ),
    ]
    if rng.random() < 0.6:
        calls.append(
            (
                "export_csv",
                {"path": WORKBOOK, "sheet": "Q3", "csv_path": "q3.csv"}
                | ({"delimiter": "semicolon"} if rng.random() < 0.4 else {}),
            )
        )
        calls.append(("list_workbooks", {}))
    return calls


def _errors(rng: random.Random) -> list[Call]:
    bad: list[Call] = [
        ("read_range", {"path": "missing.xlsx", "sheet": "Sheet1"}),
        ("read_range", _q3(sheet=rng.choice(["Q4", "Sheet1", "q3"]))),
        ("read_range", _q3(range=rng.choice(["ZZ1:A", "A0:B2", "1A:2B"]))),
        ("create_workbook", {"path": WORKBOOK}),
        ("create_sheet", {"path": WORKBOOK, "new_name": rng.choice(["Q3/Q4", "Sales: Q3", "Q3"])}),
        ("describe_workbook", {"path": "../etc/passwd.xlsx"}),
        ("import_csv", {"path": WORKBOOK, "csv_path": "missing.csv", "sheet": "Orders"}),
        ("describe_sheet", {"path": WORKBOOK, "sheet": "Totals"}),
        ("delete_sheet", {"path": WORKBOOK, "sheet": "Archive"}),
    ]
    calls = rng.sample(bad, rng.randint(2, 4))
    calls.append(
        rng.choice([("describe_workbook", {"path": WORKBOOK}), ("read_range", _q3(range="A1:D2"))])
    )
    return calls


def _report(rng: random.Random) -> list[Call]:  # held out
    month = rng.choice(["Jul", "Aug", "Sep"])
    region = rng.choice(["North", "South"])
    return [
        ("create_sheet", {"path": WORKBOOK, "new_name": "Report"}),
        (
            "write_range",
            {
                "path": WORKBOOK,
                "sheet": "Report",
                "at": "A1",
                "rows": [
                    ["Measure", "Value"],
                    [f"{region} units", f'=SUMIF(Q3!A2:A7,"{region}",Q3!C2:C7)'],
                    [f"{month} revenue", f'=SUMIF(Q3!B2:B7,"{month}",Q3!D2:D7)'],
                    ["Best month units", "=MAX(Q3!C2:C7)"],
                ],
            },
        ),
        ("read_range", {"path": WORKBOOK, "sheet": "Report"}),
        ("copy_sheet", {"path": WORKBOOK, "sheet": "Report", "new_name": "Report copy"}),
        ("find_cells", {"path": WORKBOOK, "query": region, "sheet": "Report copy"}),
        ("describe_workbook", {"path": WORKBOOK}),
    ]


SOURCE = mcp_user_world(
    name="excel",
    summary=f"the Excel workbook MCP server on real .xlsx files (needs root and {PACKAGE} in "
    f"/opt/aw-mcp-{VENV})",
    versions={PACKAGE: VERSION, "openpyxl": OPENPYXL_VERSION, "mcp": MCP_VERSION},
    seed=_seed,
    servers={
        "excel": [
            python_server(VENV, PACKAGE),
            "stdio",
            "--allow-dir",
            HOME,
            "--tools",
            TOOL_AREAS,
        ],
    },
    templates=[
        Template("explore", _explore),
        Template("build", _build),
        Template("edit", _edit),
        Template("csv", _csv),
        Template("errors", _errors),
        Template("report", _report, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} with openpyxl {OPENPYXL_VERSION}, workbooks in "
            f"{HOME} (relative paths start there), tool areas {TOOL_AREAS}",
            "files": f"{HOME}/{WORKBOOK}: sheet Q3 (A1:D7: {', '.join(HEADER)}; North and "
            "South for Jul, Aug, Sep) and sheet Summary (A1:B4: Total units, Total revenue, "
            f"Average units as formulas over Q3); {HOME}/{CSV}: 4 orders (order_id, customer, "
            "item, qty, price)",
        },
        "notes": [
            "Every episode starts from these two files.",
            'Answers are compact JSON on one line, no spaces ({"sheet":"Q3","range":'
            '"A1:B4","cells_written":8}); read_range gives range and values, rows as '
            "lists. Errors are isError texts 'Error executing tool <tool>: <message>'.",
        ],
    },
)
