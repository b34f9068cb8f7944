"""Engines: text generation backends behind one protocol (``aw_mcp.engines.base.Engine``)."""

from aw_mcp.engines.base import (
    ChatMessage,
    Engine,
    EngineError,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
)

__all__ = [
    "ChatMessage",
    "Engine",
    "EngineError",
    "GenerationControl",
    "GenerationRequest",
    "GenerationResult",
    "GenerationStats",
]
