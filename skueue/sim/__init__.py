"""Drivers without I/O: synchronous rounds (the paper's model), adversarial schedules of the
core, and the daemon's hosts with churn, crashes and restarts (hosts.py)."""
