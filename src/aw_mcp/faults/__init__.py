"""The fault layer: decides, per call, whether to answer instead of the world model or to add
a condition to the world. Scenario files in ``faults/`` drive it."""

from aw_mcp.faults.layer import CallContext, FaultDecision, FaultLayer, FiredFault, NoFaults
from aw_mcp.faults.scenario import Scenario, load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer

__all__ = [
    "CallContext",
    "FaultDecision",
    "FaultLayer",
    "FiredFault",
    "NoFaults",
    "Scenario",
    "ScenarioFaultLayer",
    "load_scenario",
]
