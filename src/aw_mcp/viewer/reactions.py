"""What an agent did after each injected fault, read from its episode's records.

A *fault hit* is a call whose record shows a fault: a rule fired on it (``faults``), or it was
answered by the fault layer (source ``fault``) or with a JSON-RPC error (``rpc-error``, a
rule's or a real server's). The calls that follow it say how the agent reacted:

- ``retried``: the same call (tool and arguments) again, ``retries`` times in a row; with
  backoff when every wait before a retry was at least ``BACKOFF_MIN_SECONDS`` and no shorter
  than the wait before it (waits are the gaps between one attempt's end and the next's
  start, from ``started_at`` and ``seconds``);
- ``looped``: the same call failed ``loop`` times in a row (the hit included), and the
  agent was still repeating it (``loop >= LOOP_MIN``);
- ``adjusted``: the same tool again with other arguments;
- ``switched``: another tool next;
- ``gave-up``: no further call in the episode.

A ``mislead`` fault (a plausible but wrong answer, no error) also gets ``mislead``: whether the
agent noticed, read from its next call:

- ``re-checked``: the same call again (a read of the same thing);
- ``verified``: another read-only call (checked another way before acting);
- ``built-on``: a state-changing call next: the agent acted on the wrong value;
- ``ended``: no further call: the agent finished on the wrong value.

``blind_write`` marks a retry, with identical arguments, of a call that writes: if the
faulted call did reach the world (a timeout after the write, say), the repeat writes twice.
Whether a tool is read-only comes from its domain's annotations (``readOnlyHint``, or the
domain file's ``simulation.read_only``) when the record's domain is a bundled one that has the
tool and says so; otherwise from ``name_looks_read_only``. A shell tool (``run_command`` and
the like: a ``command`` argument) writes or not by its command line (``command_writes``): a
retried ``cat`` after a 429 is no blind write, a retried ``touch`` is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from itertools import pairwise
from typing import Literal

from aw_mcp.domain.models import DomainSpec
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import RecordedEpisode

FAULT_SOURCES = frozenset({"fault", "rpc-error"})
BACKOFF_MIN_SECONDS = 0.2
LOOP_MIN = 3

Outcome = Literal["retried", "looped", "adjusted", "switched", "gave-up"]
OUTCOMES: tuple[Outcome, ...] = ("retried", "looped", "adjusted", "switched", "gave-up")
MisleadReaction = Literal["re-checked", "verified", "built-on", "ended"]
MISLEAD_REACTIONS: tuple[MisleadReaction, ...] = ("re-checked", "verified", "built-on", "ended")
NOTICED: frozenset[MisleadReaction] = frozenset({"re-checked", "verified"})

# Words that name a read in a tool's name (split at _ - . / and camelCase).
READ_WORDS = frozenset(
    {
        "get", "list", "read", "search", "find", "query", "fetch", "show", "view", "describe",
        "lookup", "status", "stat", "browse", "count", "check", "inspect", "peek", "cat", "ls",
        "head", "tail", "grep", "info", "diff", "log", "screenshot", "dump", "tree",
    }
)  # fmt: skip


def name_looks_read_only(tool: str) -> bool:
    """The fallback when no domain annotates the tool: its name begins with a read word
    (``get_issue``, ``listFiles``, ``web_search`` reads too: any word of the name counts)."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", tool).lower()
    return any(w in READ_WORDS for w in re.split(r"[_\-./\s]+", words) if w)


@cache
def _bundled_domain(name: str) -> DomainSpec | None:
    from aw_mcp.domain.loader import bundled_domain_names, load_domain

    return load_domain(name) if name in bundled_domain_names() else None


def is_read_only(domain: str, tool: str) -> bool:
    spec = _bundled_domain(domain)
    if spec is not None:
        for candidate in spec.tools:
            # A tool served next to another of the same name is public as "<domain>_<name>".
            if tool in (candidate.name, f"{domain}_{candidate.name}"):
                annotated = candidate.simulation.read_only is not None or "readOnlyHint" in (
                    candidate.annotations or {}
                )
                if annotated:
                    return candidate.read_only
    return name_looks_read_only(tool)


# Programs that only read, for ``command_writes``; any other program may write.
READ_PROGRAMS = frozenset(
    {
        "cat", "ls", "head", "tail", "grep", "egrep", "fgrep", "rg", "wc", "cut", "tr", "uniq",
        "nl", "echo", "printf", "pwd", "whoami", "id", "date", "env", "printenv", "which",
        "type", "stat", "file", "du", "df", "free", "uptime", "uname", "hostname", "ps",
        "diff", "cmp", "md5sum", "sha256sum", "basename", "dirname", "realpath", "readlink",
        "less", "more", "jq", "true", "false", "test", "[", "sleep", "tree", "awk",
    }
)  # fmt: skip
# git subcommands that only read.
READ_GIT = frozenset({"status", "log", "diff", "show", "branch", "rev-parse", "ls-files", "blame"})
# Options that make a read program write: ``sort -o FILE``, ``sed -i``, ``find -delete``.
_WRITING_OPTIONS = re.compile(r"(^|\s)(-o|--output|-i|--in-place|-delete|-exec|-execdir)\b")


def command_writes(command: str) -> bool:
    """Whether a shell command line may change the machine: a redirection into a file, or a
    program (in any part of a pipe or list) that is not a known read. Unknown is a write."""
    # Redirections that write no file: into /dev/null, or one stream into another (2>&1).
    command = re.sub(r"[0-9]*>\s*/dev/null|[0-9]*>&[0-9]+", " ", command)
    if re.search(r">|\btee\b", command):
        return True
    for part in re.split(r"&&|\|\||[;|&\n]", command):
        words = part.split()
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program == "git":
            if len(words) < 2 or words[1] not in READ_GIT:
                return True
        elif program in ("sort", "sed", "find"):
            if _WRITING_OPTIONS.search(part):
                return True
        elif program not in READ_PROGRAMS:
            return True
    return False


def call_writes(record: CallRecord) -> bool:
    """Whether the recorded call may have changed the world (see the module docstring)."""
    if is_read_only(record.domain, record.tool):
        return False
    command = record.arguments.get("command")
    if isinstance(command, str):
        return command_writes(command)
    return True


def is_fault_hit(record: CallRecord) -> bool:
    return bool(record.faults) or record.source in FAULT_SOURCES


def is_mislead(record: CallRecord) -> bool:
    return any(f.get("effect") == "mislead" for f in record.faults)


def mislead_reaction(records: list[CallRecord], at: int) -> MisleadReaction:
    """What the agent did right after the misleading answer ``records[at]``."""
    if at + 1 >= len(records):
        return "ended"
    following = records[at + 1]
    if same_call(following, records[at]):
        return "re-checked"
    return "verified" if is_read_only(following.domain, following.tool) else "built-on"


def rule_names(record: CallRecord) -> list[str]:
    """``scenario/rule`` of each rule that fired; ``(rpc-error)`` or ``(fault)`` when the
    record names none (a real server's JSON-RPC error)."""
    names = [
        "/".join(str(f[k]) for k in ("scenario", "rule") if f.get(k)) or "(unnamed rule)"
        for f in record.faults
    ]
    return names or [f"({record.source})"]


@dataclass
class Reaction:
    episode: str
    domain: str
    index: int  # the faulted call's index
    tool: str
    rules: list[str]
    outcome: Outcome
    retries: int = 0  # identical calls right after the faulted one
    waits: list[float] = field(default_factory=list)  # seconds before each retry
    backoff: bool | None = None  # None without retries
    loop: int = 1  # identical failing calls in a row, the faulted one included
    next_tool: str | None = None
    blind_write: bool = False
    recovered: bool = False  # the last identical retry succeeded
    mislead: MisleadReaction | None = None  # a mislead fault only: did the agent notice?


def same_call(a: CallRecord, b: CallRecord) -> bool:
    return a.tool == b.tool and a.arguments == b.arguments


def has_backoff(waits: list[float]) -> bool:
    return all(w >= BACKOFF_MIN_SECONDS for w in waits) and all(
        later >= earlier for earlier, later in pairwise(waits)
    )


def react(records: list[CallRecord], at: int) -> tuple[Reaction, int]:
    """The reaction to the fault hit ``records[at]``; also the position of the first record
    after its run of identical retries (retries are part of this reaction, not new hits)."""
    hit = records[at]
    run = at + 1
    while run < len(records) and same_call(records[run], hit):
        run += 1
    attempts = records[at:run]
    waits = [
        round(max(0.0, b.started_at - (a.started_at + a.seconds)), 3) for a, b in pairwise(attempts)
    ]
    failing = 0
    for attempt in attempts:
        if not (attempt.is_error or is_fault_hit(attempt)):
            break
        failing += 1
    reaction = Reaction(
        episode=hit.episode,
        domain=hit.domain,
        index=hit.index,
        tool=hit.tool,
        rules=rule_names(hit),
        outcome="gave-up",
        retries=len(attempts) - 1,
        waits=waits,
        backoff=has_backoff(waits) if waits else None,
        loop=failing,
        mislead=mislead_reaction(records, at) if is_mislead(hit) else None,
    )
    if reaction.retries:
        last = attempts[-1]
        reaction.recovered = not (last.is_error or is_fault_hit(last))
        reaction.outcome = "looped" if failing >= LOOP_MIN and not reaction.recovered else "retried"
        reaction.blind_write = call_writes(hit)
    elif run < len(records):
        following = records[run]
        reaction.next_tool = following.tool
        reaction.outcome = "adjusted" if following.tool == hit.tool else "switched"
    return reaction, run


def episode_reactions(records: list[CallRecord]) -> list[Reaction]:
    ordered = sorted(records, key=lambda r: r.index)
    reactions: list[Reaction] = []
    at = 0
    while at < len(ordered):
        if not is_fault_hit(ordered[at]):
            at += 1
            continue
        reaction, at = react(ordered, at)
        reactions.append(reaction)
    return reactions


def reactions_of(episodes: Iterable[RecordedEpisode]) -> list[Reaction]:
    return [r for e in episodes for r in episode_reactions(e.records)]


@dataclass
class Tally:
    """Reactions of one tool, or to one fault rule."""

    faults: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    retries: int = 0
    max_retries: int = 0
    with_backoff: int = 0  # retried reactions whose waits grew
    blind_writes: int = 0
    longest_loop: int = 0
    recovered: int = 0
    misled: int = 0  # mislead faults
    noticed: int = 0  # of which the agent re-checked or verified

    def add(self, r: Reaction) -> None:
        self.faults += 1
        self.outcomes[r.outcome] += 1
        self.retries += r.retries
        self.max_retries = max(self.max_retries, r.retries)
        self.with_backoff += bool(r.backoff)
        self.blind_writes += r.blind_write
        self.longest_loop = max(self.longest_loop, r.loop)
        self.recovered += r.recovered
        if r.mislead is not None:
            self.misled += 1
            self.noticed += r.mislead in NOTICED


def tally(reactions: list[Reaction], key: Literal["tool", "rule"]) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    for r in reactions:
        for name in [r.tool] if key == "tool" else r.rules:
            tallies.setdefault(name, Tally()).add(r)
    return dict(sorted(tallies.items()))


def summary(reactions: list[Reaction]) -> dict:
    """Everything ``aw-mcp report --json`` prints (policy results are added by the caller)."""
    return {
        "faults": len(reactions),
        "outcomes": {o: sum(r.outcome == o for r in reactions) for o in OUTCOMES},
        "mislead": {m: sum(r.mislead == m for r in reactions) for m in MISLEAD_REACTIONS},
        "by_tool": {k: asdict(v) for k, v in tally(reactions, "tool").items()},
        "by_rule": {k: asdict(v) for k, v in tally(reactions, "rule").items()},
        "reactions": [asdict(r) for r in reactions],
    }
