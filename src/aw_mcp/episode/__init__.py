"""Episodes: each agent's history in one world, and the prompt the world model reads.

- ``episode``: one run of an (episode id, domain): its turns, records, world conditions;
- ``store``: every live episode of a server and their one lifecycle (create, end, evict);
- ``prompt``: a domain, its world and an episode's history as chat messages (the profiles);
- ``schema_outline``: a short outline of a tool's JSON Schema for the prompt.
"""
