"""Export: recorded episodes rendered as the world model's conversations (``rendering``), and
the files ``aw-mcp export`` writes from them (``formats``: AgentWorldBench, chat, ATIF)."""
