"""Source ``calculator``: a stateless arithmetic server whose answers are bare numbers.

``mcp-server-calculator`` (PyPI, with mcp 1.30.0, in its own virtualenv
``/opt/aw-mcp-calculator``, see .ci/run) has one tool, ``calculate``, that evaluates an
expression with Python's operators and the ``math`` module's names (``^`` is read as ``**``,
``×`` and ``÷`` as ``*`` and ``/``). Episodes are 3-6 expressions of one template: plain
arithmetic, ``math`` functions, money sums, and the mistakes an agent makes (a division by
zero, a name ``math`` lacks, a comparison, a syntax error, a domain error). Held out: the
template ``geometry`` (areas, distances, angles and a conversion or two).
"""

from __future__ import annotations

import random

from aw_mcp.generation.mcp_servers import Call, Template, mcp_user_world, python_server

PACKAGE = "mcp-server-calculator"
VERSION = "0.2.1"
MCP_VERSION = "1.30.0"
VENV = "calculator"  # /opt/aw-mcp-calculator, whose bin/ holds mcp-server-calculator


def _calc(expression: str) -> Call:
    return ("calculate", {"expression": expression})


def _some(rng: random.Random, expressions: list[str], most: int) -> list[Call]:
    """Three to ``most`` of ``expressions``, in a random order, one call each."""
    return [_calc(e) for e in rng.sample(expressions, rng.randint(3, most))]


def _n(rng: random.Random, low: int = 2, high: int = 999) -> int:
    return rng.randint(low, high)


def _decimal(rng: random.Random) -> str:
    return f"{rng.randint(1, 500)}.{rng.randint(0, 99):02d}"


def _arithmetic(rng: random.Random) -> list[Call]:
    a, b, c = _n(rng), _n(rng), _n(rng, 2, 40)
    pool = [
        f"{a} + {b} * {c}",
        f"({a} + {b}) * {c}",
        f"{a} / {c}",
        f"{a} // {c}",
        f"{a} % {c}",
        f"{rng.randint(2, 9)} ^ {rng.randint(2, 12)}",
        f"{rng.randint(2, 9)}**{rng.randint(20, 70)}",
        f"{a} - {b} - {c}",
        f"-{a} * {c}",
        f"{_decimal(rng)} * {rng.randint(2, 12)}",
        f"{a} × {c}",
        f"{a} ÷ {c}",
        f"{_decimal(rng)} + {_decimal(rng)}",
        f"1 / {rng.choice([3, 7, 9, 11])}",
        f"{a}.5 * 2",
    ]
    return _some(rng, pool, 6)


def _functions(rng: random.Random) -> list[Call]:
    n = _n(rng, 2, 400)
    pool = [
        f"sqrt({n})",
        f"factorial({rng.randint(5, 25)})",
        f"log({n})",
        f"log10({rng.choice([10, 1000, n])})",
        f"log({n}, 2)",
        f"exp({rng.randint(1, 10)})",
        f"sin(pi / {rng.choice([2, 4, 6])})",
        f"cos({rng.choice(['pi', '0', 'pi / 3'])})",
        f"gcd({n}, {_n(rng, 2, 400)})",
        f"comb({rng.randint(5, 52)}, {rng.randint(2, 5)})",
        f"floor({_decimal(rng)})",
        f"ceil({_decimal(rng)})",
        f"fabs(-{_decimal(rng)})",
        "e ** 2",
        f"pow({rng.randint(2, 9)}, {rng.randint(2, 9)})",
        f"isqrt({n})",
    ]
    return _some(rng, pool, 6)


def _money(rng: random.Random) -> list[Call]:
    price = _decimal(rng)
    rate = rng.choice([3, 4.5, 5, 6.25, 7])
    years = rng.randint(2, 10)
    people = rng.randint(2, 8)
    pool = [
        f"{price} * {rng.choice([1.08, 1.2, 1.19])}",
        f"{price} * {rng.choice([15, 18, 20])} / 100",
        f"{rng.randint(1000, 20000)} * (1 + {rate} / 100) ^ {years}",
        f"({price} + {_decimal(rng)} + {_decimal(rng)}) / {people}",
        f"{rng.randint(20, 90)} * {rng.randint(8, 40)}.{rng.randint(0, 99):02d} * 12",
        f"{price} - {price} * {rng.choice([10, 25, 30])} / 100",
        f"round({price} * 1.1, 2)",
        f"{rng.randint(100, 900)} / {rng.randint(2, 12)} * {rng.randint(1, 5)}",
    ]
    return _some(rng, pool, 5)


def _errors(rng: random.Random) -> list[Call]:
    n = _n(rng, 2, 99)
    bad = [
        f"{n} / 0",
        f"{n} % 0",
        f"sqrt(-{n})",
        "log(0)",
        f"abs(-{n})",
        f"x * {n}",
        f"{n} > {n - 1}",
        f"{n} +",
        f"{n}(2 + 3)",
        f"{n}, {n + 1}",
        f"factorial(-{rng.randint(1, 9)})",
        f"{n} % of 200",
        "1e308 * 10",
        f"max({n}, {n + 7})",
    ]
    good = [f"{n} * {n}", f"sqrt({n})", f"{n} / {rng.randint(2, 9)}"]
    calls = [_calc(e) for e in rng.sample(bad, rng.randint(2, 4))]
    calls.insert(rng.randint(0, len(calls)), _calc(rng.choice(good)))
    return calls


def _geometry(rng: random.Random) -> list[Call]:  # held out
    r = rng.randint(1, 30)
    a, b = rng.randint(3, 40), rng.randint(3, 40)
    pool = [
        f"pi * {r} ** 2",
        f"2 * pi * {r}",
        f"hypot({a}, {b})",
        f"degrees(atan2({a}, {b}))",
        f"radians({rng.choice([30, 45, 90, 120])})",
        f"4 / 3 * pi * {r} ^ 3",
        f"dist([0, 0], [{a}, {b}])",
        f"({rng.randint(40, 110)} - 32) * 5 / 9",
        f"{rng.randint(1, 42)} * 1.609344",
        f"tan(radians({rng.choice([15, 30, 60])}))",
    ]
    return _some(rng, pool, 6)


SOURCE = mcp_user_world(
    name="calculator",
    summary=f"the calculator MCP server (needs root and {PACKAGE} in /opt/aw-mcp-{VENV})",
    versions={PACKAGE: VERSION, "mcp": MCP_VERSION},
    servers={"calculator": [python_server(VENV, PACKAGE)]},
    templates=[
        Template("arithmetic", _arithmetic),
        Template("functions", _functions),
        Template("money", _money),
        Template("errors", _errors),
        Template("geometry", _geometry, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} with mcp {MCP_VERSION} (server name calculator): "
            "one tool, calculate, evaluating an expression with Python's operators and the "
            "math module's names",
        },
        "notes": [
            "The server keeps no state: each expression is evaluated on its own.",
            "Answers are the bare value as Python prints it (65.76, 4858, True, no text "
            "around it); errors are isError texts 'Error executing tool calculate: <message>'.",
        ],
    },
)
