"""The fault layer: decides, per call, whether to answer instead of the world model or to add
a condition to the world. Scenario files in ``faults/`` drive it.

- ``layer``: the seam the simulator calls (``FaultLayer``, ``FaultDecision``) and ``NoFaults``;
- ``scenario``: the pydantic models of a scenario file; ``scenario_layer``: the layer they drive;
- ``presets``, ``output``, ``mislead``: error texts, answer damage, plausible-but-wrong answers;
- ``coverage``: whether a scenario's rules fit the tools they are meant for.
"""
