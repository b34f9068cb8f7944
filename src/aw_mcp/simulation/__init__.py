"""One tool call simulated: ``simulator.WorldSimulator`` strings the parts together as
server -> faults -> episode -> engine -> record.

- ``fault_step``: ask the fault layer, wait or fail as it says, damage the answer after;
- ``replay``: ``serve --replay``: answer from recorded episodes a call sequence follows;
- ``read_repeats``: a repeated read-only call sees what it saw before;
- ``context_window``: fit the episode's history into the model's context window;
- ``grounding``: recorded real transitions shown as examples (``--grounding``);
- ``observation``: ask the engine, retrying answers that break the tool's outputSchema;
- ``sampling``: temperature and a reproducible seed for each request;
- ``progress``: progress notifications while the model generates;
- ``recording``: the record of each call, however it ended;
- ``restore``: an episode rebuilt from its records after a restart.
"""
