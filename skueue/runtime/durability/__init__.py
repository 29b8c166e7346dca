"""Durability: the input log, snapshots, the entry store, and recovery by replaying the log."""
