"""The parts one tool call goes through; ``aw_mcp.simulator.WorldSimulator`` strings them
together as server -> faults -> episode -> engine -> record.

- ``fault_step``: ask the fault layer, wait or fail as it says, damage the answer after;
- ``replay``: a repeated read-only call sees what it saw before;
- ``context_window``: fit the episode's history into the model's context window;
- ``generation``: ask the engine, retrying answers that break the tool's outputSchema;
- ``sampling``: temperature and a reproducible seed for each request;
- ``progress``: progress notifications while the model generates;
- ``recording``: the record of each call, however it ended.
"""
