"""Drivers without I/O: synchronous rounds (the paper's model) and adversarial schedules."""
