"""Source ``memory``: the reference knowledge-graph server, a stateful store.

``@modelcontextprotocol/server-memory`` (npm) keeps entities, relations and observations in
``/home/mcp/memory.jsonl`` (empty at the start of every episode). Episodes build a graph, read
it back, search it, add and delete observations, relations and entities, and make the
mistakes an agent makes (unknown entities, duplicates). Held out: the template
``project_tracker`` (projects and tasks with ``depends_on`` relations).
"""

from __future__ import annotations

import itertools
import random

from aw_mcp.generation.mcp_servers import MCP_USER, Call, Template, mcp_user_world

PACKAGE = "@modelcontextprotocol/server-memory"
VERSION = "2026.8.31"
MEMORY_FILE = f"/home/{MCP_USER}/memory.jsonl"
PEOPLE = ["Alice", "Bob", "Chen Wei", "Dana", "Emeka", "Farah", "Giulia", "Hiro"]
PLACES = ["Acme Corp", "Lisbon", "Globex", "Berlin office", "Initech"]
FACTS = [
    "likes tea",
    "speaks French",
    "joined in 2021",
    "prefers email",
    "is vegetarian",
    "runs marathons",
    "plays the cello",
    "works remotely",
]
CITIES = {"Lisbon", "Berlin office"}
LINKS = ["works_at", "lives_in", "manages", "knows", "reports_to"]


def _entity(name: str, kind: str, rng: random.Random) -> dict[str, object]:
    return {"name": name, "entityType": kind, "observations": rng.sample(FACTS, rng.randint(0, 2))}


def _graph(rng: random.Random) -> tuple[list[str], list[str], list[Call]]:
    people = rng.sample(PEOPLE, rng.randint(2, 3))
    places = rng.sample(PLACES, rng.randint(1, 2))
    entities = [_entity(p, "person", rng) for p in people]
    entities += [_entity(p, "place" if p in CITIES else "organization", rng) for p in places]
    relations = [
        {"from": p, "to": rng.choice(places), "relationType": rng.choice(LINKS[:2])} for p in people
    ]
    return (
        people,
        places,
        [
            ("create_entities", {"entities": entities}),
            ("create_relations", {"relations": relations}),
        ],
    )


def _build_and_read(rng: random.Random) -> list[Call]:
    people, _, calls = _graph(rng)
    calls.append(rng.choice([("read_graph", {}), ("open_nodes", {"names": people[:2]})]))
    return calls


def _observations(rng: random.Random) -> list[Call]:
    people, places, calls = _graph(rng)
    who = rng.choice(people)
    fact = rng.choice(FACTS)
    calls += [
        ("add_observations", {"observations": [{"entityName": who, "contents": [fact]}]}),
        ("search_nodes", {"query": rng.choice([fact.split()[-1], who, places[0], "zebra"])}),
        ("open_nodes", {"names": [who, rng.choice(PEOPLE)]}),
    ]
    return calls


def _deletions(rng: random.Random) -> list[Call]:
    people, places, calls = _graph(rng)
    calls += [
        (
            "delete_relations",
            {"relations": [{"from": people[0], "to": places[0], "relationType": "works_at"}]},
        ),
        ("delete_entities", {"entityNames": [people[-1]]}),
        (
            "delete_observations",
            {"deletions": [{"entityName": people[0], "observations": [rng.choice(FACTS)]}]},
        ),
        ("read_graph", {}),
    ]
    return calls


def _mistakes(rng: random.Random) -> list[Call]:
    people, _, calls = _graph(rng)
    stranger = rng.choice([p for p in PEOPLE if p not in people])
    calls += rng.sample(
        [
            ("add_observations", {"observations": [{"entityName": stranger, "contents": ["x"]}]}),
            ("create_entities", {"entities": [_entity(people[0], "person", rng)]}),  # exists
            ("delete_entities", {"entityNames": [stranger]}),
            (
                "create_relations",
                {"relations": [{"from": people[0], "to": stranger, "relationType": "knows"}]},
            ),
            ("open_nodes", {"names": [stranger]}),
            ("create_entities", {"entities": [{"name": stranger}]}),  # fails the schema
        ],
        3,
    )
    return [*calls, ("read_graph", {})]


def _project_tracker(rng: random.Random) -> list[Call]:  # held out
    project = rng.choice(["Website relaunch", "Mobile app", "Data migration"])
    tasks = rng.sample(["design", "backend", "testing", "launch", "docs"], 3)
    owner = rng.choice(PEOPLE)
    return [
        (
            "create_entities",
            {
                "entities": [
                    {"name": project, "entityType": "project", "observations": ["due in Q1"]},
                    *(
                        {"name": f"{project}: {t}", "entityType": "task", "observations": []}
                        for t in tasks
                    ),
                ]
            },
        ),
        (
            "create_relations",
            {
                "relations": [
                    {
                        "from": f"{project}: {b}",
                        "to": f"{project}: {a}",
                        "relationType": "depends_on",
                    }
                    for a, b in itertools.pairwise(tasks)
                ]
            },
        ),
        (
            "add_observations",
            {
                "observations": [
                    {
                        "entityName": f"{project}: {tasks[0]}",
                        "contents": [f"owned by {owner}", "done"],
                    }
                ]
            },
        ),
        ("search_nodes", {"query": rng.choice(["task", tasks[1], "done"])}),
        ("delete_entities", {"entityNames": [f"{project}: {tasks[-1]}"]}),
        ("read_graph", {}),
    ]


SOURCE = mcp_user_world(
    name="memory",
    summary=f"the knowledge-graph memory MCP server (needs root, node and {PACKAGE})",
    versions={PACKAGE: VERSION},
    env={"MEMORY_FILE_PATH": MEMORY_FILE},
    servers={"memory": ["mcp-server-memory"]},
    templates=[
        Template("build_and_read", _build_and_read),
        Template("observations", _observations),
        Template("deletions", _deletions),
        Template("mistakes", _mistakes),
        Template("project_tracker", _project_tracker, heldout=True),
    ],
    world={
        "facts": {
            "server": f"{PACKAGE} {VERSION} (server name memory-server 0.6.3)",
            "state": f"the knowledge graph is stored in {MEMORY_FILE} and starts EMPTY",
        },
        "notes": [
            "Every tool has an output schema; the text content is the same JSON, indented "
            "two spaces (create_entities answers the entities it created, duplicates left "
            "out).",
        ],
    },
)
