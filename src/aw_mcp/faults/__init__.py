"""The fault layer: decides, per call, whether to answer instead of the world model or to add
a condition to the world. Scenario files in ``faults/`` drive it."""

from aw_mcp.faults.layer import FaultDecision, FaultLayer, FiredFault, NoFaults

__all__ = ["FaultDecision", "FaultLayer", "FiredFault", "NoFaults"]
