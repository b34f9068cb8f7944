"""Numbers that depend only on who asks and why: a hash, never a shared random stream.

Fault decisions and sampling seeds use it, so concurrent episodes cannot change each other's
draws, however their calls interleave, and the same inputs give the same numbers on every run.
"""

from __future__ import annotations

import hashlib


class Draws:
    """Uniform numbers in [0, 1) that depend only on who asks and why."""

    def __init__(self, *identity: object):
        self._identity = "\x1f".join(str(part) for part in identity)

    def uniform(self, purpose: str) -> float:
        # surrogatepass: an id may hold a lone surrogate (valid JSON, not valid UTF-8)
        data = f"{self._identity}\x1f{purpose}".encode("utf-8", "surrogatepass")
        digest = hashlib.blake2b(data, digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    def integer(self, purpose: str) -> int:
        return int(self.uniform(purpose) * 2**53)
