"""Episode scripts for the terminal generator: templates of 5-12 commands a developer types.

Each template draws names, contents and numbers from a seeded ``random.Random`` and returns
the command lines of one episode. Later commands read what earlier ones wrote (a file written
at one step is cat, grepped or committed later; ``cd`` moves where later ``ls`` and ``pwd``
look), so an observation depends on the episode's history, not on the command alone.

The held-out split is fixed here, by rule, never by sampling:

- every template that uses a HELD-OUT FAMILY (``tr``, ``cut``, ``find``) is held out, and no
  training template uses those commands at all;
- the HELD-OUT TEMPLATES (``git_merge``, ``heredoc_report``) are held out although their
  commands' families also occur in training: they test new combinations of known commands.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Split = Literal["train", "heldout"]

HELDOUT_FAMILIES: frozenset[str] = frozenset({"tr", "cut", "find"})
HELDOUT_TEMPLATES: frozenset[str] = frozenset({"git_merge", "heredoc_report"})
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
    _t(pipes, "pipes", "seq", "grep", "wc"),
    _t(loops, "loops", "files"),
    _t(shell_script, "scripts", "chmod"),
    _t(log_analysis, "grep", "awk", "sort-uniq"),
    _t(tr_text, "tr", "pipes"),
    _t(cut_fields, "cut", "pipes"),
    _t(find_tree, "find", "files"),
    _t(git_merge, "git"),
    _t(heredoc_report, "files", "redirection", "sed"),
]


def templates_for(split: Split) -> list[Template]:
    return [t for t in TEMPLATES if t.split == split]


def episode_script(split: Split, seed: int, episode: int) -> tuple[Template, list[str]]:
    """The template and commands of one episode: the same (split, seed, episode), the same
    commands, whatever else is generated."""
    rng = random.Random(f"terminal:{split}:{seed}:{episode}")
    choices = templates_for(split)
    template = choices[episode % len(choices)]  # every template equally often
    commands = template.build(rng)[:MAX_COMMANDS]
    if len(commands) < MIN_COMMANDS:  # a template bug, not a case to paper over
        raise AssertionError(f"template {template.name} gave {len(commands)} commands")
    return template, commands
