"""The history format and the consistency checkers (exact, certificate, patterns)."""
