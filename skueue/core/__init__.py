"""The protocol core: pure, deterministic, sans-IO (see docs/architecture.md)."""
