"""Measuring a world model against real observations.

- ``samples``: AgentWorldBench-format samples (one per turn) and what each one asks for;
- ``metrics``: per-sample text metrics (exact match, similarity, exit code, JSON validity);
- ``scoring``: per-domain / per-command-family tables of the model beside two baselines;
- ``judge``: the optional LLM judge (five dimensions, 1-5 each);
- ``infer``: teacher-forced predictions (real history, one turn at a time);
- ``closed_loop``: whole recorded episodes replayed through the MCP server, the model seeing
  its own earlier answers;
- ``predictions``: the resumable predictions.jsonl both modes write and ``score`` reads;
- ``everyday`` (with ``sessions``): a session of everyday commands beside real bash;
- ``volatile``: values no simulator can know, masked for scoring;
- ``publish``: results files (``lab/results``) and the tables of docs/fidelity.md and README.
"""
