"""Skueue: a scalable, linearizable peer-to-peer distributed queue and stack."""
