"""Random order keys of assisted studies, all 62 bits: a sentence's (SHA-256 of study seed
and id, at import) and a rating task's (SplitMix64 of study seed, sentence, arm and slot; the
same whatever the batch). Routing gives each task its rank; rating leases in rank order (a
rater's own order starts at a random point of the same rank space)."""

from __future__ import annotations

import hashlib

MASK64 = (1 << 64) - 1
RANK_BITS = 62


def splitmix64(x: int) -> int:
    """One step of SplitMix64 (Steele, Lea & Flood 2014): a 64-bit mixing bijection."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def task_rank(seed: int, sentence_id: int, arm_id: int, slot: int) -> int:
    """Queue rank of a rating task: a 62-bit hash of (study seed, sentence, arm, slot)."""
    h = splitmix64(seed & MASK64)
    for part in (sentence_id, arm_id, slot):
        h = splitmix64(h ^ (part & MASK64))
    return h >> (64 - RANK_BITS)


def sentence_rank(seed: int, external_id: str) -> int:
    """A sentence's random order key: the first 62 bits of SHA-256("<seed>:<id>")."""
    digest = hashlib.sha256(f"{seed}:{external_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - RANK_BITS)
