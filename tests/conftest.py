"""Test-suite wide settings: hypothesis profiles.

``quick`` (the default, used by CI) keeps the suite fast; ``long`` runs the property
tests for real (select it with SKUEUE_PROFILE=long).  Every profile prints the blob that
replays a failing example, and our generators print their seeds too.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "quick",
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=5_000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("SKUEUE_PROFILE", "quick"))
