"""Episode scripts for the terminal generator: templates of 5-12 commands a developer types.

Each template draws names, contents and numbers from a seeded ``random.Random`` and returns
the command lines of one episode. Later commands read what earlier ones wrote (a file written
at one step is cat, grepped or committed later; ``cd`` moves where later ``ls`` and ``pwd``
look), so an observation depends on the episode's history, not on the command alone.

The training templates aim at breadth (what developers and agents type often); the first
seventeen came first, the rest were added for breadth after the first adapter was measured.

The held-out split is fixed here, by rule, never by sampling:

- every template that uses a HELD-OUT FAMILY (``tr``, ``cut``, ``find``) is held out, and no
  training template uses those commands at all;
- the HELD-OUT TEMPLATES (``git_merge``, ``heredoc_report``) are held out although their
  commands' families also occur in training: they test new combinations of known commands;
  ``missing_programs_heldout`` is ``missing_programs`` with programs of its own
  (``ABSENT_PROGRAMS``): it tests the rule (``command not found``), not the names.

Templates added after episodes were committed (``NAMED_ONLY_TEMPLATES``) are drawn only by
name (``generate terminal --templates``), so the round-robin of ``TEMPLATES`` and with it
every committed folder's commands regenerate as they were.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from aw_mcp.errors import UserInputError

Split = Literal["train", "heldout"]

HELDOUT_FAMILIES: frozenset[str] = frozenset({"tr", "cut", "find"})
HELDOUT_TEMPLATES: frozenset[str] = frozenset(
    {"git_merge", "heredoc_report", "missing_programs_heldout"}
)
MIN_COMMANDS, MAX_COMMANDS = 5, 12

WORDS = [
    "apple",
    "banana",
    "cherry",
    "grape",
    "lemon",
    "mango",
    "orange",
    "peach",
    "pear",
    "plum",
    "kiwi",
    "melon",
    "fig",
    "lime",
]
NAMES = [
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "oscar",
    "peggy",
    "trent",
]
CITIES = [
    "paris",
    "berlin",
    "tokyo",
    "lima",
    "oslo",
    "cairo",
    "delhi",
    "quito",
    "rome",
    "seoul",
    "dakar",
    "perth",
]
STEMS = [
    "notes",
    "todo",
    "data",
    "report",
    "items",
    "list",
    "summary",
    "draft",
    "ideas",
    "tasks",
    "inventory",
    "plan",
]
DIRS = [
    "src",
    "docs",
    "build",
    "lib",
    "tmp",
    "backup",
    "data",
    "scripts",
    "archive",
    "assets",
    "out",
    "tests",
    "config",
    "logs",
]
LEVELS = ["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"]
EVENTS = [
    "started",
    "stopped",
    "request served",
    "cache miss",
    "timeout",
    "retrying",
    "connected",
    "disk check",
    "user login",
    "job done",
]
COMMIT_MESSAGES = [
    "Add readme",
    "Initial commit",
    "Add notes",
    "First version",
    "Start project",
    "Add data file",
    "Add main script",
]


def q(text: str) -> str:
    """Single-quote for bash."""
    return "'" + text.replace("'", "'\\''") + "'"


def printf_lines(lines: list[str], target: str, append: bool = False) -> str:
    return f"printf '%s\\n' {' '.join(q(x) for x in lines)} {'>>' if append else '>'} {target}"


def fname(rng: random.Random, ext: str | None = None) -> str:
    return f"{rng.choice(STEMS)}.{ext or rng.choice(['txt', 'md', 'log', 'csv', 'cfg'])}"


def two(rng: random.Random, pool: list[str]) -> tuple[str, str]:
    a, b = rng.sample(pool, 2)
    return a, b


def maybe(rng: random.Random, p: float = 0.5) -> bool:
    return rng.random() < p


# --- training templates ------------------------------------------------------------------


def files_basic(rng: random.Random) -> list[str]:
    top, sub = two(rng, DIRS)
    f1, f2 = (f"{s}.txt" for s in two(rng, STEMS))
    cmds = [
        f"mkdir -p {top}/{sub}",
        f"echo {q(rng.choice(WORDS) + ' ' + str(rng.randint(1, 99)))} > {top}/{f1}",
        f"touch {top}/{f2}",
        rng.choice([f"ls {top}", f"ls -l {top}", f"ls -a {top}"]),
        f"cp {top}/{f1} {top}/{sub}/copy-{f1}",
        f"mv {top}/{f2} {top}/{sub}/",
        f"ls {top}/{sub}",
        f"cat {top}/{sub}/copy-{f1}",
    ]
    if maybe(rng):
        cmds += [f"rm {top}/{f1}", f"ls {top}"]
    if maybe(rng):
        cmds += [f"rm -r {top}/{sub}", rng.choice(["ls -R", f"ls -la {top}"])]
    return cmds


def write_and_read(rng: random.Random) -> list[str]:
    f = fname(rng, rng.choice(["txt", "md"]))
    lines = rng.sample(WORDS, rng.randint(3, 6))
    extra = rng.choice(NAMES)
    cmds = [
        printf_lines(lines, f),
        f"echo {extra} >> {f}",
        f"cat {f}",
        f"wc -l {f}",
        f"head -n {rng.randint(1, 3)} {f}",
        f"tail -n {rng.randint(1, 2)} {f}",
    ]
    cmds += rng.sample(
        [
            f"wc -c {f}",
            f"wc -w < {f}",
            f"cat {f} {f} > twice.txt && wc -l twice.txt",
            f"cat -n {f}",
            f"grep {extra} {f}",
            f"ls -l {f}",
        ],
        rng.randint(1, 3),
    )
    return cmds


def grep_search(rng: random.Random) -> list[str]:
    people = rng.sample(NAMES, rng.randint(4, 7))
    cities = [rng.choice(CITIES[:5]) for _ in people]
    rows = [f"{p} {c} {rng.randint(18, 70)}" for p, c in zip(people, cities, strict=True)]
    f = rng.choice(["people.txt", "staff.txt", "members.txt"])
    city = rng.choice(cities)
    cmds = [printf_lines(rows, f), f"grep {city} {f}", f"grep -c {city} {f}"]
    cmds += rng.sample(
        [
            f"grep -n {people[1]} {f}",
            f"grep -v {city} {f}",
            f"grep -i {people[0].upper()} {f}",
            f"grep -w {rng.choice(CITIES[5:])} {f}",
            f"grep {city} {f} | wc -l",
            f"grep -E '^({people[0]}|{people[-1]}) ' {f}",
        ],
        rng.randint(2, 4),
    )
    cmds.append(rng.choice([f"grep {city} missing-{f}", f"grep -q {people[2]} {f} && echo found"]))
    if maybe(rng):
        cmds += [f"grep {city} {f} > {city}.txt", f"cat {city}.txt"]
    return cmds


def sort_uniq(rng: random.Random) -> list[str]:
    pool = rng.sample(WORDS, 4)
    items = [rng.choice(pool) for _ in range(rng.randint(6, 10))]
    numbers = [str(rng.randint(1, 500)) for _ in range(rng.randint(5, 8))]
    f, n = fname(rng, "txt"), rng.choice(["numbers.txt", "scores.txt", "sizes.txt"])
    cmds = [printf_lines(items, f), f"sort {f}", f"sort -u {f}", f"sort {f} | uniq -c"]
    cmds += rng.sample(
        [
            f"sort {f} | uniq -c | sort -rn | head -n 1",
            f"sort {f} | uniq -d",
            f"sort -r {f} | head -n 3",
            f"sort {f} | uniq | wc -l",
        ],
        rng.randint(1, 2),
    )
    cmds += [
        printf_lines(numbers, n),
        rng.choice([f"sort -n {n}", f"sort {n}"]),
        f"sort -rn {n} | head -n {rng.randint(1, 3)}",
    ]
    return cmds


def sed_edit(rng: random.Random) -> list[str]:
    f = rng.choice(["app.cfg", "settings.ini", "server.conf"])
    port, new_port = rng.randint(3000, 8999), rng.randint(9000, 9999)
    name = rng.choice(WORDS)
    mode = rng.choice(["dev", "test", "debug"])
    cmds = [
        printf_lines([f"name={name}", f"port={port}", f"mode={mode}", "workers=2"], f),
        f"sed 's/{mode}/prod/' {f}",
        f"cat {f}",
        f"sed -i 's/port={port}/port={new_port}/' {f}",
        f"grep port {f}",
    ]
    cmds += rng.sample(
        [
            f"sed -n '2p' {f}",
            f"sed '/mode/d' {f}",
            f"sed -n '/name/p' {f}",
            f"sed 's/=/: /' {f}",
            f"sed -i '$a timeout=30' {f} && tail -n 2 {f}",
            f"sed '1d' {f} | wc -l",
        ],
        rng.randint(2, 4),
    )
    cmds.append(f"cat {f}")
    return cmds


def awk_table(rng: random.Random) -> list[str]:
    fruits = rng.sample(WORDS, rng.randint(3, 6))
    rows = ["name qty price"] + [
        f"{x} {rng.randint(1, 20)} {rng.randint(1, 9)}.{rng.choice(['0', '5', '25'])}"
        for x in fruits
    ]
    f = rng.choice(["stock.txt", "prices.txt", "cart.txt"])
    limit = rng.randint(5, 12)
    cmds = [printf_lines(rows, f), f"cat {f}", f"awk '{{print $1}}' {f}"]
    cmds += rng.sample(
        [
            f"awk 'NR>1 {{s+=$2}} END {{print s}}' {f}",
            f"awk 'NR>1 && $2 > {limit} {{print $1}}' {f}",
            f"awk 'NR>1 {{printf \"%s %.2f\\n\", $1, $2*$3}}' {f}",
            f"awk 'END {{print NR}}' {f}",
            f"awk 'NR>1 {{print $2, $1}}' {f} | sort -n",
            f"awk '{{print NF}}' {f} | sort -u",
        ],
        rng.randint(3, 5),
    )
    if maybe(rng):
        cmds += [f"awk 'NR>1 {{print $1 \",\" $2}}' {f} > {f[:-4]}.csv", f"cat {f[:-4]}.csv"]
    return cmds


def env_vars(rng: random.Random) -> list[str]:
    var = rng.choice(["PROJECT_NAME", "APP_ENV", "BUILD_ID", "RELEASE"])
    value = rng.choice(WORDS) + str(rng.randint(1, 9))
    count = rng.randint(2, 40)
    cmds = [
        f"export {var}={value}",
        f'echo "${var}"',
        f"COUNT={count}",
        'echo "count=$COUNT"',
        "bash -c 'echo \"child sees: [$COUNT]\"'",
        f"env | grep {var}",
    ]
    cmds += rng.sample(
        [
            'echo "$HOME $USER"',
            "export COUNT && bash -c 'echo \"child sees: $COUNT\"'",
            'echo "$((COUNT * 2))"',
            'echo "${COUNT}0"',
            "echo $PWD",
            "echo $LANG $TZ",
        ],
        rng.randint(1, 3),
    )
    cmds += [f"unset {var}", f'echo "[${var}]"', f"printenv {var}"]
    return cmds


def cd_paths(rng: random.Random) -> list[str]:
    a, b = two(rng, DIRS)
    c = rng.choice(["v1", "v2", "old", "new", "tmp"])
    f = fname(rng, "txt")
    cmds = [
        f"mkdir -p {a}/{b}/{c}",
        f"cd {a}/{b}",
        "pwd",
        f"echo {rng.choice(WORDS)} > {f}",
        "cd ..",
        rng.choice(["pwd", "ls", f"ls {b}"]),
        f"cat {b}/{f}",
        f"cd {b}/{c}",
        rng.choice(["pwd", "ls ..", "ls -a"]),
    ]
    cmds += rng.sample(
        ["cd -", "cd ~ && pwd", "cd ../../.. && ls", "cd ~/project && ls -R"], rng.randint(1, 2)
    )
    cmds.append("pwd")
    return cmds


def python_snippets(rng: random.Random) -> list[str]:
    n, k = rng.randint(5, 100), rng.randint(3, 7)
    f = rng.choice(["nums.txt", "squares.txt", "values.txt"])
    key = rng.choice(WORDS)
    cmds = [
        rng.choice(["python3 --version", "which python3"]),
        f"python3 -c 'print(sum(range({n})))'",
        f'python3 -c \'open("{f}", "w").write("\\n".join(str(i * i) for i in range(1, {k})))\'',
        f"cat {f}",
        f"python3 -c 'print(sum(int(x) for x in open(\"{f}\")))'",
    ]
    cmds += rng.sample(
        [
            f"python3 -c 'print(1 / {rng.choice([0, 0, 4])})'",
            f'python3 -c \'import json; print(json.dumps({{"{key}": {n}, "ok": True}}))\' '
            "> out.json",
            "python3 -c 'import os; print(os.getcwd())'",
            f"python3 -c 'print(\"{key}\".upper() * 2)'",
            f"python3 -c 'import sys; sys.exit({rng.randint(1, 3)})'",
            "python3 -c 'print(undefined_name)'",
            f"python3 -c 'print(sorted([{rng.randint(1, 9)}, {rng.randint(1, 9)}, 5]))'",
        ],
        rng.randint(2, 4),
    )
    cmds.append(rng.choice(["ls", f"wc -l {f}", "cat out.json"]))
    return cmds


def arithmetic(rng: random.Random) -> list[str]:
    a, b = rng.randint(2, 60), rng.randint(2, 12)
    n = rng.randint(3, 9)
    cmds = [
        f"echo $(({a} + {b}))",
        f"x=$(({a} * {b}))",
        'echo "$x"',
        f"echo $((x % {rng.randint(3, 9)}))",
        rng.choice([f"expr {a} + {b}", f"expr {a} \\* {b}", f"expr {a} - {b}", f"expr {a} / {b}"]),
        f"seq {n}",
    ]
    cmds += rng.sample(
        [
            f"seq {rng.randint(1, 5)} {rng.randint(2, 4)} {rng.randint(10, 20)}",
            f"seq -s , 1 {n}",
            f"seq {n} | paste -sd+ | bc"
            if maybe(rng, 0.3)
            else f"seq {n} | awk '{{s+=$1}} END {{print s}}'",
            f"expr {a} / 0",
            f"echo $(({a} / 0))",
            "echo $((x / 2)) $((x ** 2))",
            f"total=0; for i in $(seq {n}); do total=$((total + i)); done; echo $total",
        ],
        rng.randint(2, 4),
    )
    return cmds


def git_basic(rng: random.Random) -> list[str]:
    f = rng.choice(["README.md", "notes.md", "main.py", "todo.txt"])
    msg1, msg2 = rng.choice(COMMIT_MESSAGES), f"Update {f}"
    cmds = [
        rng.choice(["git init", "git init -q && git status"]),
        f"echo {q('# ' + rng.choice(WORDS).title())} > {f}",
        "git status",
        f"git add {f}",
        f"git commit -m {q(msg1)}",
        "git log --oneline",
        f"echo {q(rng.choice(NAMES) + ' was here')} >> {f}",
        "git diff",
        rng.choice(["git status --short", "git status"]),
        f"git commit -am {q(msg2)}",
    ]
    cmds.append(
        rng.choice(["git log --oneline", "git log --oneline | wc -l", "git show --stat HEAD"])
    )
    return cmds


def git_branch(rng: random.Random) -> list[str]:
    f = rng.choice(["app.txt", "version.txt", "config.ini"])
    branch = rng.choice(["feature", "fix", "dev", "topic"]) + "-" + rng.choice(WORDS)
    cmds = [
        "git init -q",
        f"echo v1 > {f} && git add {f} && git commit -q -m 'Version 1'",
        f"git checkout -b {branch}",
        f"echo v2 >> {f}",
        f"git commit -am 'Version 2 on {branch}'",
        "git branch",
        "git log --oneline",
        "git checkout main",
        f"cat {f}",
    ]
    cmds += rng.sample(
        [
            f"git diff main {branch}",
            f"git log --oneline {branch}",
            "git branch -v",
            f"git branch -d {branch}",
            "git checkout nonexistent-branch",
        ],
        rng.randint(1, 2),
    )
    return cmds


def errors(rng: random.Random) -> list[str]:
    secret, d = fname(rng, "txt"), rng.choice(DIRS)
    steps = [
        [f"cat {rng.choice(STEMS)}-missing.txt"],
        [
            f"echo {rng.choice(WORDS)} > {secret}",
            f"chmod 000 {secret}",
            f"cat {secret}",
            f"ls -l {secret}",
            f"chmod 644 {secret}",
            f"cat {secret}",
        ],
        [f"mkdir {d}", f"mkdir {d}", f"rm {d}"],
        [f"cd {rng.choice(DIRS)}-missing"],
        [rng.choice(["gti status", "pyhton3 --version", "sl", "ll", "nmp install"])],
        [
            rng.choice(
                ["ls --bogus", "cp", "mv onlyone", "rm", "head -n x /dev/null", "sort --nope"]
            )
        ],
        ["mkdir locked", "chmod 555 locked", "touch locked/file.txt", "ls locked"],
        [f"cp {rng.choice(STEMS)}.txt /tmp/nowhere/"],
    ]
    rng.shuffle(steps)
    want = rng.randint(MIN_COMMANDS - 1, MAX_COMMANDS - 1)
    cmds: list[str] = []
    for group in steps:
        if len(cmds) >= want:
            break
        cmds += group
    return [*cmds[: MAX_COMMANDS - 1], "ls"]


def missing_paths(rng: random.Random) -> list[str]:
    """Many tools on paths that are not there (and a few on one that is): each tool's own
    message and exit status. Most exit 1; ``ls``, ``grep``, ``sort``, ``diff``, ``awk`` and
    ``tar`` 2; a missing script 127 under ``bash`` or ``./``, 2 under ``python3``, 1 under
    ``source``; ``git -C`` 128; ``grep -s`` exits 2 saying nothing, ``realpath`` prints the path
    and exits 0. Without these the model learns one tool's status (``ls``'s 2) for every
    missing file."""
    word, real = rng.choice(WORDS), fname(rng, "txt")
    missing = f"{rng.choice(STEMS)}-missing.{rng.choice(['txt', 'csv', 'log', 'md', 'json'])}"
    gone_dir = f"{rng.choice(DIRS)}-missing"
    script = f"{rng.choice(STEMS)}-missing"
    on_missing = [
        f"cat {missing}",
        f"head -n {rng.randint(1, 5)} {missing}",
        f"tail -n {rng.randint(1, 5)} {missing}",
        f"wc -l {missing}",
        f"sort {missing}",
        f"uniq {missing}",
        f"grep {word} {missing}",
        f"grep -s {word} {missing}",
        f"ls {missing}",
        f"ls -l {gone_dir}/",
        f"cp {missing} copy.txt",
        f"mv {missing} moved.txt",
        f"rm {missing}",
        f"chmod 644 {missing}",
        f"stat {missing}",
        f"du -sh {gone_dir}",
        f"diff {real} {missing}",
        f"sed -n 1p {missing}",
        f"awk '{{print $1}}' {missing}",
        f"touch {gone_dir}/{real}",
        f"mkdir {gone_dir}/sub",
        f"rmdir {gone_dir}",
        f"cd {gone_dir}",
        f"python3 {script}.py",
        f"bash {script}.sh",
        f"./{script}.sh",
        f"source {script}.sh",
        f"nl {missing}",
        f"tac {missing}",
        f"md5sum {missing}",
        f"paste {real} {missing}",
        f"cat {real} {missing}",
        f"wc -c {real} {missing}",
        f"realpath {missing}",
        f"readlink -e {missing}",
        f"test -e {missing}; echo $?",
        f"[ -f {missing} ] || echo absent",
        f"git -C {gone_dir} status",
        f"tar -tf {script}.tar",
        f"ln -s {missing} link.txt && cat link.txt",
    ]
    on_present = [f"cat {real}", f"wc -l {real}", f"head -n 1 {real}", f"ls -l {real}"]
    cmds = [f"echo {q(word)} > {real}"]
    cmds += rng.sample(on_missing, rng.randint(MIN_COMMANDS, MAX_COMMANDS - 3))
    cmds.insert(rng.randint(2, len(cmds)), rng.choice(on_present))
    return [*cmds[: MAX_COMMANDS - 1], "ls"]


def pipes(rng: random.Random) -> list[str]:
    n = rng.randint(12, 60)
    digit = rng.randint(1, 9)
    f = rng.choice(["numbers.txt", "ids.txt", "lines.txt"])
    cmds = [
        f"seq 1 {n} > {f}",
        f"wc -l {f}",
        f"grep {digit} {f} | wc -l",
        f"head -n {rng.randint(3, 9)} {f} | tail -n 1",
    ]
    cmds += rng.sample(
        [
            f"cat {f} | awk '{{s+=$1}} END {{print s}}'",
            f"grep {digit} {f} | head -n 3",
            "ls | wc -l",
            f"echo {q(' '.join(rng.sample(WORDS, 4)))} | wc -w",
            f"sort -rn {f} | head -n 2",
            f"grep -v {digit} {f} | tail -n 2",
            f"cat {f} | sort -r | head -n 1",
        ],
        rng.randint(2, 4),
    )
    cmds += [f"grep {digit} {f} > with-{digit}.txt", f"wc -l with-{digit}.txt", "ls"]
    return cmds


def loops(rng: random.Random) -> list[str]:
    n = rng.randint(3, 6)
    stem = rng.choice(["file", "part", "note", "chunk"])
    word = rng.choice(WORDS)
    k = rng.randint(2, n)
    return [
        f'for i in $(seq 1 {n}); do echo "{word} $i" > {stem}_$i.txt; done',
        "ls",
        f"cat {stem}_{k}.txt",
        f'for f in {stem}_*.txt; do echo "$f: $(cat $f)"; done',
        f"cat {stem}_*.txt | wc -l",
        f"rm {stem}_1.txt",
        rng.choice(["ls", f"ls {stem}_*.txt | wc -l"]),
        f'i=0; while [ $i -lt {rng.randint(2, 4)} ]; do echo "tick $i"; i=$((i + 1)); done',
    ]


def shell_script(rng: random.Random) -> list[str]:
    script = rng.choice(["greet.sh", "hello.sh", "run.sh"])
    who = rng.choice(NAMES)
    cmds = [
        f"printf '%s\\n' '#!/bin/bash' 'echo \"Hello, $1\"' 'echo \"args: $#\"' > {script}",
        f"./{script} {who}",
        f"ls -l {script}",
        f"chmod +x {script}",
        f"./{script} {who}",
        f"bash {script} {' '.join(rng.sample(NAMES, 2))}",
    ]
    cmds += rng.sample(
        [
            f"cat {script}",
            f"./{script}",
            f"wc -l {script}",
            f"./{script} {who} > greeting.txt && cat greeting.txt",
        ],
        rng.randint(1, 3),
    )
    return cmds


def log_analysis(rng: random.Random) -> list[str]:
    lines = [
        f"2026-11-30 10:{m:02d} {rng.choice(LEVELS)} {rng.choice(EVENTS)}"
        for m in sorted(rng.sample(range(60), rng.randint(6, 10)))
    ]
    f = rng.choice(["app.log", "server.log", "worker.log"])
    cmds = [
        printf_lines(lines, f),
        f"wc -l {f}",
        f"grep -c ERROR {f}",
        f"awk '{{print $3}}' {f} | sort | uniq -c",
    ]
    cmds += rng.sample(
        [
            f"grep ERROR {f} | head -n 2",
            f"grep -v INFO {f} > problems.log && wc -l problems.log",
            f"tail -n 3 {f}",
            f"grep WARN {f}",
            f"sort -k3 {f} | head -n 3",
            f"awk '$3 == \"ERROR\" {{print $2}}' {f}",
        ],
        rng.randint(2, 4),
    )
    cmds.append(rng.choice([f"ls -l {f}", "ls", f"head -n 1 {f}"]))
    return cmds


# --- training templates added for breadth (commands developers and agents type often) -----


def heredoc_script(rng: random.Random) -> list[str]:
    script = rng.choice(["names.py", "greet.py", "tool.py"])
    word = rng.choice(WORDS)
    who = rng.sample(NAMES, 3)
    body = "\n".join(
        [
            "import sys",
            "names = sys.argv[1:]",
            'print(f"{len(names)} names")',
            "for name in sorted(names):",
            f'    print(name.title(), "{word}")',
        ]
    )
    cmds = [
        f"cat > {script} <<'EOF'\n{body}\nEOF",
        f"python3 {script} {' '.join(who)}",
        f"python3 {script}",
        f"wc -l {script}",
        f"cat >> {script} <<'EOF'\nprint(names[0].upper())\nEOF",
        f"python3 {script} {who[0]}",
        f"python3 {script}",
    ]
    cmds += rng.sample(
        [
            f"head -n 2 {script}",
            f"grep -n print {script}",
            f"python3 {script} {who[1]} {who[2]} | tail -n 1",
            f"python3 {script} {who[2]} > out.txt; echo $?",
            f"tail -n 1 {script}",
        ],
        rng.randint(1, 3),
    )
    return cmds


def heredoc_config(rng: random.Random) -> list[str]:
    f = rng.choice(["app.env", "build.env", "deploy.env"])
    app, port = rng.choice(WORDS), rng.randint(3000, 8999)
    lines = [f"APP_NAME={app}", f"APP_PORT={port}", "APP_OWNER=$USER", "APP_HOME=\\$HOME"]
    return [
        f"cat <<EOF > {f}\n" + "\n".join(lines) + "\nEOF",
        f"cat {f}",
        f"grep -c = {f}",
        rng.choice([f"sed -n '2,3p' {f}", f"awk -F= '{{print $1}}' {f}", f"nl {f}"]),
        f'. ./{f} && echo "$APP_NAME:$APP_PORT"',
        f"echo 'APP_DEBUG=1' >> {f} && wc -l < {f}",
        rng.choice([f"grep APP_PORT {f}", f"tail -n 2 {f}", f"sort {f}"]),
        f"awk -F= '$1 == \"APP_PORT\" {{print $2 + 1}}' {f}",
    ]


def text_tools(rng: random.Random) -> list[str]:
    words = rng.sample(WORDS, rng.randint(4, 7))
    numbered = [f"{w} {rng.randint(1, 90)}" for w in words]
    f = rng.choice(["fruit.txt", "items.txt", "stock.txt"])
    cmds = [printf_lines(numbered, f)]
    cmds += rng.sample(
        [
            f"tac {f}",
            f"rev {f} | head -n 2",
            f"nl {f}",
            f"paste -sd, {f}",
            f"tail -n +3 {f}",
            f"head -c 12 {f}; echo",
            f"sort -k2 -n {f}",
            f"sort -k2 -rn {f} | head -n 2",
            f"column -t {f}",
            f"fold -w 8 {f} | head -n 4",
            f"awk '{{print $2}}' {f} | paste -sd+ | bc",
            f"head -n -2 {f}",
            f"paste {f} {f} | head -n 2",
            f"awk '{{print length($1)}}' {f} | sort -n | tail -n 1",
        ],
        rng.randint(5, 8),
    )
    cmds.append(rng.choice([f"wc -l {f}", f"cat {f}", "ls"]))
    return cmds


def compare_files(rng: random.Random) -> list[str]:
    base = rng.sample(WORDS, 5)
    changed = list(base)
    changed[rng.randint(0, 4)] = rng.choice([w for w in WORDS if w not in base])
    a, b = rng.choice([("old.txt", "new.txt"), ("v1.txt", "v2.txt"), ("a.txt", "b.txt")])
    return [
        printf_lines(base, a),
        printf_lines(changed, b),
        f"diff {a} {b}",
        f"cmp {a} {b}",
        f"cp {a} copy.txt && diff {a} copy.txt && echo same",
        rng.choice([f"diff -q {a} {b}", f"diff {a} {b} | grep '^>'", f"diff {a} {b}; echo $?"]),
        f"sort {a} > s1.txt && sort {b} > s2.txt",
        rng.choice(["comm -12 s1.txt s2.txt", "comm -3 s1.txt s2.txt", "comm -23 s1.txt s2.txt"]),
        rng.choice([f"diff {a} missing.txt", "ls", f"diff -y -W 30 {a} {b}"]),
    ]


def xargs_tee(rng: random.Random) -> list[str]:
    names = rng.sample(DIRS, 3)
    word = rng.choice(WORDS)
    n = rng.randint(4, 9)
    cmds = [
        f"printf '%s\\n' {' '.join(names)} | xargs mkdir -p",
        "ls",
        f"echo {word} | tee {names[0]}/note.txt",
        f"cat {names[0]}/note.txt",
        f"seq {n} | xargs -n 2",
        f"echo {rng.choice(NAMES)} | tee -a {names[0]}/note.txt > /dev/null",
        f"wc -l {names[0]}/note.txt",
    ]
    cmds += rng.sample(
        [
            "ls | xargs -I{} echo dir: {}",
            f"seq {n} | xargs echo",
            f"printf '%s\\n' {' '.join(names)} | xargs -n 1 echo rm -r",
            f"echo {names[1]} {names[2]} | xargs rmdir && ls",
            "seq 3 | tee nums.txt | wc -l",
        ],
        rng.randint(1, 3),
    )
    return cmds


def archives(rng: random.Random) -> list[str]:
    d = rng.choice(DIRS)
    f1, f2 = (f"{s}.txt" for s in two(rng, STEMS))
    arc = rng.choice(["backup", "bundle", "release"])
    cmds = [
        f"mkdir {d} && echo {rng.choice(WORDS)} > {d}/{f1} && echo {rng.choice(WORDS)} > {d}/{f2}",
        f"tar -czf {arc}.tar.gz {d}",
        f"tar -tzf {arc}.tar.gz",
        f"rm -r {d} && ls",
        f"tar -xzf {arc}.tar.gz && ls {d}",
        f"gzip -k {d}/{f1}",
        f"ls {d}",
        f"zcat {d}/{f1}.gz",
    ]
    cmds += rng.sample(
        [
            f"gzip -d {d}/{f1}.gz",
            f"tar -tf {arc}.tar.gz | wc -l",
            "tar -xzf missing.tar.gz",
            f"gunzip -c {d}/{f1}.gz | wc -c",
            f"tar -cf {arc}.tar {d}/{f2} && tar -tvf {arc}.tar | wc -l",
        ],
        rng.randint(1, 3),
    )
    return cmds


def json_tools(rng: random.Random) -> list[str]:
    f = rng.choice(["package.json", "config.json", "data.json"])
    name, version = (
        rng.choice(WORDS),
        f"{rng.randint(0, 3)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
    )
    items = rng.sample(NAMES, rng.randint(2, 4))
    doc = (
        '{"name": "'
        + name
        + '", "version": "'
        + version
        + '", "private": true, "members": ['
        + ", ".join(f'"{x}"' for x in items)
        + "]}"
    )
    return [
        f"echo {q(doc)} > {f}",
        f"jq .name {f}",
        f"jq -r '.members[]' {f}",
        f"jq '.members | length' {f}",
        rng.choice([f"jq . {f}", f"python3 -m json.tool {f}"]),
        f"jq '.version = \"9.9.9\"' {f} > tmp.json && mv tmp.json {f}",
        f"jq -r .version {f}",
        rng.choice(
            [
                f"jq .missing {f}",
                "echo '{broken' | jq .",
                f"jq -c '{{name, count: (.members | length)}}' {f}",
                f'python3 -c \'import json; print(json.load(open("{f}"))["private"])\'',
            ]
        ),
    ]


def git_history(rng: random.Random) -> list[str]:
    f = rng.choice(["main.py", "README.md", "notes.txt", "VERSION"])
    tag = f"v{rng.randint(0, 2)}.{rng.randint(0, 9)}"
    cmds = [
        "git init -q",
        f"echo 'first' > {f} && git add {f} && git commit -q -m 'First'",
        f"echo 'second' >> {f} && git commit -q -am 'Second'",
        "git log --oneline | wc -l",
        f"git tag {tag}",
        rng.choice(["git tag", "git describe --tags", "git log -1 --format=%s"]),
        f"echo 'draft' >> {f}",
        rng.choice(["git status -s", "git diff --stat", "git status --short"]),
    ]
    cmds += rng.sample(
        [
            "git stash -q && git status -s && git stash pop -q && git status -s",
            f"git checkout -- {f} && cat {f}",
            "git rev-parse --abbrev-ref HEAD",
            "git log --format='%s' | head -n 1",
            f"git show HEAD~1:{f}",
            "git reset -q --hard && git status",
            "git branch --show-current",
        ],
        rng.randint(2, 4),
    )
    return cmds


def git_branches(rng: random.Random) -> list[str]:
    f = rng.choice(["app.cfg", "lib.py", "index.html"])
    branch = rng.choice(["wip", "hotfix", "exp", "docs"]) + "-" + rng.choice(WORDS)
    return [
        "git init -q",
        f"echo one > {f} && git add -A && git commit -q -m 'One'",
        rng.choice([f"git switch -q -c {branch}", f"git checkout -q -b {branch}"]),
        "git branch --show-current",
        "echo two > other.txt && git add other.txt && git commit -q -m 'Two'",
        rng.choice(["git switch -q main", "git checkout -q main"]),
        "ls",
        rng.choice(["git branch", f"git log --oneline {branch} | wc -l", "git branch -a"]),
        rng.choice([f"git branch -D {branch}", f"git branch -d {branch}", "git switch nope"]),
        "git branch",
    ]


def conditionals(rng: random.Random) -> list[str]:
    f, d = fname(rng, "txt"), rng.choice(DIRS)
    word = rng.choice(WORDS)
    steps = [
        f"echo {word} > {f}",
        f"[ -f {f} ] && echo yes || echo no",
        f"[ -d {d} ] && echo yes || echo no",
        f"if grep -q {word} {f}; then echo found; else echo missing; fi",
        f"ls {d} 2> err.txt; cat err.txt",
        "false; echo $?",
        "ls missing.txt > out.txt 2>&1; cat out.txt",
        f"test -s {f} && echo nonempty",
        "cat missing.txt 2>/dev/null || echo absent",
        f'n=$(wc -l < {f}); if [ $n -gt 0 ]; then echo "$n line(s)"; fi',
        f"case {word} in a*) echo starts-with-a;; *) echo other;; esac",
        "true && echo ok",
    ]
    head = steps[:2]
    rest = rng.sample(steps[2:], rng.randint(4, 8))
    return head + rest


def string_ops(rng: random.Random) -> list[str]:
    name = f"{rng.choice(STEMS)}.{rng.choice(['txt', 'tar.gz', 'md'])}"
    path = f"/home/dev/project/{rng.choice(DIRS)}/{name}"
    word = rng.choice(WORDS)
    cmds = [f"file={name}", 'echo "${file%.*}"', 'echo "${file#*.}"', 'echo "${#file}"']
    cmds += rng.sample(
        [
            f"basename {path}",
            f"dirname {path}",
            f"basename {path} .{name.split('.')[-1]}",
            f"w={word}; echo ${{w^^}}",
            f"w={word}; echo ${{w:0:3}}",
            f"printf '%05d\\n' {rng.randint(1, 999)}",
            f"printf '%-8s|\\n' {word}",
            "echo {1..5}",
            f"echo {word}{{A,B,C}}",
            f"s='{word} {rng.choice(WORDS)}'; echo ${{s/ /_}}",
            f"printf '%s has %d chars\\n' {word} {len(word)}",
        ],
        rng.randint(4, 7),
    )
    return cmds


def file_info(rng: random.Random) -> list[str]:
    f = fname(rng, "txt")
    link = rng.choice(["latest", "current", "link"])
    return [
        f"printf '%s\\n' {' '.join(rng.sample(WORDS, 3))} > {f}",
        f"ln -s {f} {link}",
        f"readlink {link}",
        f"cat {link}",
        rng.choice([f"stat -c '%s %n' {f}", f"wc -c < {f}", f"du -b {f}"]),
        rng.choice([f"file {f}", f"realpath {link}", f"test -L {link} && echo symlink"]),
        f"mv {f} renamed.txt",
        f"cat {link}",
        rng.choice(["ls -1", "ls -1 | wc -l", f"test -e {link} || echo broken"]),
    ]


def make_build(rng: random.Random) -> list[str]:
    target = rng.choice(["hello", "build", "app"])
    word = rng.choice(WORDS)
    # printf's format (not %s) turns \t into the tab make needs before a recipe
    makefile = (
        f"printf '{target}:\\n\\techo building {word} > {target}.txt\\n"
        "clean:\\n\\trm -f *.txt\\n' > Makefile"
    )
    return [
        makefile,
        "cat Makefile",
        "make",
        f"cat {target}.txt",
        "make",
        rng.choice(["make clean", "make -s clean"]),
        "ls",
        rng.choice(["make nothing", f"make -n {target}", f"make {target} && ls"]),
    ]


def ranges(rng: random.Random) -> list[str]:
    n = rng.randint(12, 30)
    f = rng.choice(["seq.txt", "lines.txt", "rows.txt"])
    a = rng.randint(2, 5)
    b = a + rng.randint(1, 4)
    cmds = [f"seq {n} > {f}"]
    cmds += rng.sample(
        [
            f"sed -n '{a},{b}p' {f}",
            f"awk 'NR=={a}' {f}",
            f"awk 'NR % 5 == 0' {f}",
            f"head -n {b} {f} | tail -n {b - a + 1}",
            f"tail -n +{n - 2} {f}",
            f"head -n -{n - 3} {f}",
            f"sed '{a},$d' {f}",
            f"grep -c 1 {f}",
            f"tail -n 3 {f} | tac",
            f"sed -n '$p' {f}",
        ],
        rng.randint(5, 8),
    )
    return cmds


def csv_awk(rng: random.Random) -> list[str]:
    people = rng.sample(NAMES, rng.randint(3, 6))
    rows = ["name,score,team"] + [
        f"{p},{rng.randint(10, 99)},{rng.choice(['red', 'blue', 'green'])}" for p in people
    ]
    f = rng.choice(["scores.csv", "results.csv", "board.csv"])
    cmds = [printf_lines(rows, f), f"head -n 1 {f}", f"wc -l < {f}"]
    cmds += rng.sample(
        [
            f"awk -F, 'NR>1 {{print $1}}' {f}",
            f"awk -F, 'NR>1 {{s+=$2}} END {{print s}}' {f}",
            f"sort -t, -k2 -n {f} | tail -n 1",
            f"grep -c red {f}",
            f"awk -F, '$3 == \"blue\"' {f}",
            f"awk -F, 'NR>1 {{print $3}}' {f} | sort | uniq -c",
            f"sed 1d {f} | sort",
            f"awk -F, 'NR>1 && $2 > 50 {{print $1}}' {f}",
        ],
        rng.randint(3, 6),
    )
    return cmds


# --- held-out templates ------------------------------------------------------------------


def tr_text(rng: random.Random) -> list[str]:
    words = rng.sample(WORDS, rng.randint(4, 6))
    f = rng.choice(["sentence.txt", "words.txt", "line.txt"])
    return [
        f"echo {q(' '.join(words))} > {f}",
        f"tr a-z A-Z < {f}",
        f"tr ' ' '\\n' < {f}",
        f"tr -d aeiou < {f}",
        f"tr ' ' '\\n' < {f} | sort | head -n {rng.randint(2, 4)}",
        f"cat {f} | tr '[:lower:]' '[:upper:]' > upper.txt",
        "cat upper.txt",
        rng.choice(
            [
                f"echo {q('a   b    c')} | tr -s ' '",
                "echo hello | tr -d l",
                f"tr -c -d 'a-z\\n' < {f} | wc -c",
            ]
        ),
    ]


def cut_fields(rng: random.Random) -> list[str]:
    people = rng.sample(NAMES, rng.randint(3, 6))
    rows = ["name,age,city"] + [f"{p},{rng.randint(18, 70)},{rng.choice(CITIES)}" for p in people]
    f = rng.choice(["people.csv", "users.csv", "team.csv"])
    return [
        printf_lines(rows, f),
        f"cut -d, -f1 {f}",
        f"cut -d, -f2,3 {f}",
        f"cut -c1-3 {f}",
        f"tail -n +2 {f} | cut -d, -f3 | sort",
        rng.choice([f"cut -d, -f5 {f}", f"cut -f1 {f}", f"cut {f}"]),
        f"cut -d, -f1 missing-{f}",
        f"cut -d, -f1 {f} | wc -l",
    ]


def find_tree(rng: random.Random) -> list[str]:
    a, b = two(rng, DIRS)
    files = [f"{a}/{x}.py" for x in rng.sample(STEMS, 2)] + [f"{b}/{rng.choice(STEMS)}.md"]
    return [
        f"mkdir -p {a}/sub {b}",
        f"touch {' '.join(files)} README.md",
        "find . -name '*.py'",
        "find . -type d",
        f"find {a} -type f | sort",
        "find . -name '*.md' | wc -l",
        rng.choice(["find . -empty", f"find {b} -maxdepth 1", "find . -name 'README*'"]),
        f"find missing-{a} -name '*.py'",
    ]


def git_merge(rng: random.Random) -> list[str]:
    f = rng.choice(["notes.txt", "app.py", "CHANGES.md"])
    branch = rng.choice(["topic", "feature", "patch"]) + "-" + rng.choice(WORDS)
    return [
        "git init -q",
        f"echo 'line 1' > {f} && git add . && git commit -q -m 'Start'",
        f"git checkout -q -b {branch}",
        f"echo 'line 2' >> {f} && git commit -q -am 'Add line 2'",
        "git checkout -q main",
        f"git merge {branch}",
        "git log --oneline",
        f"cat {f}",
        rng.choice(["git branch", "git status"]),
    ]


def heredoc_report(rng: random.Random) -> list[str]:
    title = rng.choice(WORDS).title() + " report"
    items = rng.sample(NAMES, rng.randint(3, 5))
    body = "\n".join([title, *[f"- {x}: {rng.randint(1, 99)}" for x in items]])
    f = rng.choice(["report.txt", "summary.md", "status.txt"])
    return [
        f"cat > {f} <<'EOF'\n{body}\nEOF",
        f"cat {f}",
        f"wc -l {f}",
        f"grep -- '- {items[0]}' {f}",
        f"sed -i 's/{items[1]}/{items[1].upper()}/' {f}",
        f"tail -n +2 {f} | sort",
        f"cp {f} {f}.bak && ls",
    ]


def explore_world(rng: random.Random) -> list[str]:
    """Everyday look-arounds whose answers are the world's own facts (who, where, which
    files, which versions, the git state), then a few changes and reads of them."""
    d, f = rng.choice(DIRS), fname(rng)
    a, b = rng.randint(2, 19), rng.randint(2, 19)
    first = rng.sample(["pwd", "whoami", "hostname", "ls", "ls -a"], rng.randint(2, 4))
    rest = rng.sample(
        [
            "cat README.md",
            f"head -n {rng.randint(1, 4)} README.md",
            f"tail -n {rng.randint(1, 3)} README.md",
            "cat requirements.txt",
            "cat package.json",
            "ls -1 | wc -l",
            "echo $HOME",
            "echo $USER",
            "id -un",
            "git status",
            "git branch",
            "git log --format=%s",
            "git log --oneline | wc -l",
            "python3 --version",
            "git --version",
            "uname -s",
            "cd .. && pwd",
            "cd ..",
            f"rm {rng.choice(['requirements.txt', 'README.md', 'main.py', 'package.json'])} && ls",
            "ls ~",
            "ls tests",
            "cat main.py",
            f"cat {f}",
            f"echo $(({a} * {b}))",
            f"mkdir {d} && cd {d} && touch {f} && ls",
            f"mkdir {d} && ls",
            f"echo {q(rng.choice(WORDS))} > {f} && cat {f}",
        ],
        rng.randint(5, 8),
    )
    return first + rest


# Programs a developer or an agent reaches for that a plain Debian machine lacks (or a typo's
# name): bash answers ``bash: NAME: command not found``, status 127, whatever the arguments.
# The held-out pool has its own names, so the held-out episodes test the rule, not a name.
ABSENT_PROGRAMS: dict[Split, list[str]] = {
    "train": [
        "python main.py",
        "python --version",
        "sudo apt-get install -y htop",
        "sudo ls /root",
        "htop",
        "cargo build",
        "rustc --version",
        "go version",
        "ruby -v",
        "php -v",
        "yarn install",
        "brew install jq",
        "ifconfig",
        "ping -c 1 localhost",
        "nano notes.txt",
        "emacs main.py",
        "gh pr list",
        "poetry install",
        "conda env list",
        "black .",
        "flake8 main.py",
        "gradle build",
        "clang --version",
        "gerp -n TODO main.py",
        "cta README.md",
        "ecoh hello",
        "mkdri build",
        "sl -la",
        "gti log",
        "pyhton3 main.py",
    ],
    "heldout": [
        "tree -L 2",
        "rsync -av . /tmp/copy",
        "mysql -u root",
        "nslookup example.com",
        "svn status",
        "ffmpeg -version",
        "screen -ls",
        "redis-cli info",
        "grpe main main.py",
        "whomai",
    ],
}


def _missing_programs(rng: random.Random, split: Split) -> list[str]:
    """A session that reaches for programs the machine lacks, alone, with ``|``, ``||``, ``;``
    and ``$?`` (a pipeline's status is its last command's), between commands that work."""
    absent = rng.sample(ABSENT_PROGRAMS[split], 5)
    name = absent[4].split()[0]
    f = fname(rng, "txt")
    tries = [
        absent[0],
        absent[1],
        f"{absent[2]} | head -n 3",
        f"{absent[3]} || echo {q('not installed')}",
        rng.choice(
            [
                f"{name}; echo $?",
                f"command -v {name} || echo missing",
                f"which {name}",
                f"type {name}",
                f"{name} 2>/dev/null; echo status $?",
            ]
        ),
    ]
    works = [
        f"echo {q(rng.choice(WORDS))} > {f}",
        f"cat {f}",
        "ls",
        "pwd",
        "python3 --version",
        "command -v python3",
    ]
    rng.shuffle(tries)
    cmds = [works[0], *tries]
    for command in rng.sample(works[1:], rng.randint(1, 3)):
        cmds.insert(rng.randint(1, len(cmds)), command)
    return cmds[:MAX_COMMANDS]


def missing_programs(rng: random.Random) -> list[str]:
    return _missing_programs(rng, "train")


def missing_programs_heldout(rng: random.Random) -> list[str]:
    return _missing_programs(rng, "heldout")


@dataclass(frozen=True)
class Template:
    name: str
    families: frozenset[str]
    build: Callable[[random.Random], list[str]]

    @property
    def split(self) -> Split:
        held = self.name in HELDOUT_TEMPLATES or self.families & HELDOUT_FAMILIES
        return "heldout" if held else "train"


def _t(build: Callable[[random.Random], list[str]], *families: str) -> Template:
    return Template(build.__name__, frozenset(families), build)


TEMPLATES: list[Template] = [
    _t(files_basic, "files"),
    _t(write_and_read, "files", "redirection", "head-tail", "wc"),
    _t(grep_search, "grep", "redirection", "pipes"),
    _t(sort_uniq, "sort-uniq", "pipes", "head-tail"),
    _t(sed_edit, "sed", "grep"),
    _t(awk_table, "awk", "pipes"),
    _t(env_vars, "environment"),
    _t(cd_paths, "cd", "files"),
    _t(python_snippets, "python"),
    _t(arithmetic, "arithmetic", "seq"),
    _t(git_basic, "git"),
    _t(git_branch, "git"),
    _t(errors, "errors", "chmod", "files"),
    _t(missing_paths, "errors", "files", "head-tail", "wc", "sort-uniq", "grep", "sed", "awk"),
    _t(pipes, "pipes", "seq", "grep", "wc"),
    _t(loops, "loops", "files"),
    _t(shell_script, "scripts", "chmod"),
    _t(log_analysis, "grep", "awk", "sort-uniq"),
    _t(heredoc_script, "heredoc", "python"),
    _t(heredoc_config, "heredoc", "environment", "awk"),
    _t(text_tools, "text-tools", "sort-uniq", "head-tail"),
    _t(compare_files, "diff", "sort-uniq"),
    _t(xargs_tee, "xargs", "files"),
    _t(archives, "archives", "files"),
    _t(json_tools, "json"),
    _t(git_history, "git"),
    _t(git_branches, "git"),
    _t(conditionals, "conditionals", "redirection"),
    _t(string_ops, "strings"),
    _t(file_info, "links", "files"),
    _t(make_build, "make"),
    _t(ranges, "head-tail", "sed", "awk", "seq"),
    _t(csv_awk, "awk", "sort-uniq", "head-tail"),
    _t(tr_text, "tr", "pipes"),
    _t(cut_fields, "cut", "pipes"),
    _t(find_tree, "find", "files"),
    _t(git_merge, "git"),
    _t(heredoc_report, "files", "redirection", "sed"),
]


# --- after a world fault (aw-mcp generate terminal --world-fault) ----------------------
# An episode starts with a template's first commands; the condition (a full disk, a read-only
# folder) becomes true; these commands follow: writes that it breaks, reads it does not.
# The held-out list is its own, so held-out fault episodes are not memorised ones.

AFTER_FAULT: dict[Split, list[str]] = {
    "train": [
        "echo 'one more line' >> notes.txt",
        "touch new.txt && ls",
        "mkdir -p out && echo done > out/result.txt",
        "cat out/result.txt",
        "printf '%s\\n' a b c > letters.txt; wc -l letters.txt",
        'cp "$(ls | head -n 1)" backup.txt',
        'python3 -c \'open("data.txt", "w").write("x" * 100)\'',
        "ls -l",
        "df -h .",
        'rm -f "$(ls | head -n 1)"',
        "echo saved > /home/dev/project/state.txt && cat state.txt",
        "git init -q",
        "ls | wc -l",
        "seq 100 > numbers.txt; tail -n 1 numbers.txt",
        # Every kind of write the training templates make elsewhere (heredoc, tee, sed -i,
        # links, chmod, loops, archives, several files at once), so a condition that breaks
        # writes is learned for writes, not for the first list's few commands.
        "cat > notes.md <<'EOF'\n- todo\nEOF",
        "touch one.txt two.txt && ls",
        "echo hello | tee greeting.txt",
        "sed -i 's/^/# /' \"$(ls | head -n 1)\"",
        'ln -s "$(ls | head -n 1)" link.txt && ls -l link.txt',
        'chmod +x "$(ls | head -n 1)" && ls -l',
        "for i in 1 2 3; do echo $i > part$i.txt; done; ls part*",
        "tar cf backup.tar * && ls",
        'head -n 2 "$(ls | head -n 1)"',
        "git add -A && git commit -qm wip && git log --oneline | head -n 1",
    ],
    "heldout": [
        "echo 'final entry' > log.txt",
        "mkdir results && ls",
        "cat > report.md <<'EOF'\n# Report\nEOF",
        "df -h /home/dev/project",
        'mv "$(ls | head -n 1)" renamed.txt',
        "touch a b c && ls | wc -l",
        "ls",
        'python3 -c \'print(open("out.txt", "w").write("hello"))\'',
        'sort "$(ls | head -n 1)" > sorted.txt',
        "cat sorted.txt",
    ],
}


# Drawn only by name (``--templates``; see the module docstring).
NAMED_ONLY_TEMPLATES: list[Template] = [
    _t(missing_programs, "missing-programs"),
    _t(missing_programs_heldout, "missing-programs"),
]


def templates_for(split: Split) -> list[Template]:
    return [t for t in TEMPLATES if t.split == split]


def template_of(split: Split, episode: int) -> Template:
    """Episode ``episode``'s template: the split's templates in turn, each equally often."""
    choices = templates_for(split)
    return choices[episode % len(choices)]


# Varied worlds only (``generate terminal --worlds varied``): a training template whose
# answers are the world's facts, every EXPLORE_EVERY-th training episode. Kept out of the fixed
# world's list, so the committed fixed-world episodes regenerate as they were.
EXPLORE = _t(explore_world, "files", "git", "environment")
EXPLORE_EVERY = 5


def named_templates(split: Split, varied: bool, names: Sequence[str]) -> list[Template]:
    """The split's templates called ``names``, in that order (``explore_world`` is one of
    them for varied training worlds); an unknown or other-split name is a ValueError that
    lists the names there are."""
    pool = templates_for(split) + [t for t in NAMED_ONLY_TEMPLATES if t.split == split]
    pool += [EXPLORE] if varied and split == "train" else []
    by_name = {t.name: t for t in pool}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UserInputError(
            f"no {split} template {', '.join(unknown)} (the {split} templates"
            f"{' of varied worlds' if varied else ''}: {', '.join(sorted(by_name))})"
        )
    return [by_name[n] for n in names]


def episode_script(
    split: Split, seed: int, episode: int, varied: bool = False, only: Sequence[str] = ()
) -> tuple[Template, list[str]]:
    """The template and commands of one episode: the same (split, seed, episode, only), the
    same commands, whatever else is generated. ``only``: draw from these templates alone, in
    turn (more episodes of a few kinds without generating all the others)."""
    rng = random.Random(f"terminal:{split}:{seed}:{episode}")
    if only:
        chosen = named_templates(split, varied, only)
        template = chosen[episode % len(chosen)]
    elif varied and split == "train" and episode % EXPLORE_EVERY == 0:
        template = EXPLORE
    else:
        template = template_of(split, episode)
    commands = template.build(rng)[:MAX_COMMANDS]
    if len(commands) < MIN_COMMANDS:  # a template bug, not a case to paper over
        raise AssertionError(f"template {template.name} gave {len(commands)} commands")
    return template, commands


FaultTail = Literal["list", "template"]


def world_fault_script(
    split: Split, seed: int, episode: int, at: int, tail: FaultTail = "list"
) -> tuple[Template, list[str]]:
    """A world-fault episode: a template's first ``at - 1`` commands, then (the condition
    holds from command ``at`` on) ``tail``:
    - ``list``: 4-6 commands of ``AFTER_FAULT`` (the episodes committed so far);
    - ``template``: the template goes on under the condition, its own next commands (at most
      6), then 2-3 of ``AFTER_FAULT``: the condition meets every kind of command the split's
      templates write, not one fixed list's."""
    if tail == "list":  # the draws this tail always made (its own seed string)
        rng = random.Random(f"terminal-world-fault:{split}:{seed}:{episode}")
        template = template_of(split, episode)
        before = template.build(rng)[: at - 1]
        return template, before + rng.sample(AFTER_FAULT[split], rng.randint(4, 6))
    rng = random.Random(f"terminal-world-fault-{tail}:{split}:{seed}:{episode}")
    template = template_of(split, episode)
    commands = template.build(rng)[:MAX_COMMANDS]
    after = commands[at - 1 : at + 5] + rng.sample(AFTER_FAULT[split], rng.randint(2, 3))
    return template, commands[: at - 1] + after
