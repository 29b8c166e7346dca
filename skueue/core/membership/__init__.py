"""Join, Leave and the update phase (SPEC §8)."""
