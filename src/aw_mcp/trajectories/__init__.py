"""Recorded episodes: reading them back, recording from real servers, generating real
trajectories, exporting them for evaluation and training."""
