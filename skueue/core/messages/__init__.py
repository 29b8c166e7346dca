"""Peer messages: one frozen attrs class per kind."""
