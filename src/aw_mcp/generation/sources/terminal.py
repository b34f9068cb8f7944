"""Source ``terminal``: real bash in a sandbox (generate_terminal.py does the work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aw_mcp.errors import UserInputError
from aw_mcp.progress_bar import add_quiet_flag


class TerminalSource:
    def __init__(self) -> None:
        self.name = "terminal"
        self.summary = (
            "real bash in a sandbox: as user dev in an empty /home/dev/project, or each "
            "episode in a machine of its own (--worlds varied); needs root and unshare"
        )
        self.versions: dict[str, str] = {}  # bash, git, python3...: measured into world.yaml

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--out", type=Path, required=True, metavar="DIR")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--episodes", type=int, default=10)
        parser.add_argument(
            "--split",
            choices=["train", "heldout"],
            default="train",
            help="which script templates to draw from (held-out ones never appear in training)",
        )
        parser.add_argument("--command-timeout", type=float, default=10.0, metavar="SECONDS")
        parser.add_argument(
            "--world-fault",
            metavar="SCENARIO",
            help="run every episode under a real world condition from a bundled fault "
            "scenario (sandbox-disk-full, sandbox-read-only), its calls labelled with the "
            "condition text",
        )
        parser.add_argument(
            "--fault-tail",
            choices=["list", "template"],
            default="list",
            help="with --world-fault, what runs under the condition: list, 4-6 commands of a "
            "fixed list (the committed episodes); template, the episode's template goes on "
            "(its own next commands), then 2-3 of the list",
        )
        parser.add_argument(
            "--worlds",
            choices=["fixed", "varied"],
            default="fixed",
            help="fixed: every episode as user dev in an empty /home/dev/project; varied: "
            "each episode in a machine of its own (user, host, working directory, files, git "
            "history; a quarter in the bundled Terminal world's), written to "
            "OUT/worlds/EPISODE.yaml",
        )
        parser.add_argument(
            "--templates",
            type=lambda text: [n.strip() for n in text.split(",") if n.strip()],
            default=[],
            metavar="NAME[,NAME...]",
            help="draw only these script templates of the split, in turn (for more episodes "
            "of a few kinds; a wrong name lists the split's templates)",
        )
        parser.add_argument(
            "--script",
            choices=["templates", "state"],
            default="templates",
            help="templates: the script templates (5-12 commands of one kind); state: long "
            "sessions (20-40 commands) that make, move, edit, commit and read back what they "
            "did, text tools over what they wrote (use with --worlds varied)",
        )
        parser.add_argument(
            "--no-state",
            dest="state",
            action="store_false",
            help="do not record what each command read and changed (by default strace "
            "follows the sandbox's shell and each record holds its command's recall and "
            "change: the state the world model learns to keep)",
        )
        add_quiet_flag(parser)

    def generate(self, args: argparse.Namespace) -> list[Path]:
        from aw_mcp.generation.terminal import generate_terminal

        if args.episodes < 1:
            raise UserInputError("--episodes must be at least 1")
        return generate_terminal(
            args.out,
            args.seed,
            args.episodes,
            args.split,
            args.command_timeout,
            args.quiet,
            args.world_fault,
            args.worlds,
            args.templates,
            args.fault_tail,
            args.state,
            args.script,
        )


SOURCE = TerminalSource()
