"""The settings of the simulation of a call (a section of ``aw-mcp serve``'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from aw_mcp.sections import ENGINE, EPISODES, flag
from aw_mcp.simulation.sampling import SamplingSettings


class SimulationSettings(SamplingSettings):
    """Who answers a call besides the world model, and how the world model samples."""

    replay_read_only: bool = Field(
        default=True,
        description="repeat a read-only call's observation when nothing changed since "
        "(--no-replay-read-only: always ask the model)",
        json_schema_extra=flag(EPISODES),
    )

    window_tokens: int | None = Field(
        default=None,
        ge=256,
        description="tokens a call's prompt and answer may fill, when fewer than the context "
        "window (e.g. the sequence length a state-keeping adapter was trained on); the oldest "
        "turns past it are summarized (a profile that keeps state tells them as the state "
        "they left). Default: the context window",
        json_schema_extra=flag(ENGINE, "N"),
    )

    replay: Path | None = Field(
        default=None,
        description="a record directory (--record-dir output, real trajectories): calls that "
        "follow a recorded episode's calls get its recorded observations",
        json_schema_extra=flag(EPISODES, "DIR"),
    )

    replay_miss: Literal["model", "error"] = Field(
        default="model",
        description="with --replay, a call no recording matches: 'model' lets the world model "
        "answer it and the rest of the episode; 'error' returns an isError naming the mismatch",
        json_schema_extra=flag(EPISODES),
    )

    grounding: Path | None = Field(
        default=None,
        description="a record dir of real episodes: for each call, the most similar recorded "
        "real transitions (BM25) are shown to the model as examples",
        json_schema_extra=flag(ENGINE, "DIR"),
    )

    grounding_k: int = Field(
        default=3,
        ge=1,
        le=20,
        description="real transitions shown per call (--grounding)",
        json_schema_extra=flag(ENGINE),
    )

    answer_shapes: bool = Field(
        default=True,
        description="a tool with no outputSchema whose earlier answers (in the episode, and "
        "in --grounding's records) are JSON of one shape answers in that shape or one line "
        "of text (--no-answer-shapes: free text; local engines)",
        json_schema_extra=flag(ENGINE),
    )
