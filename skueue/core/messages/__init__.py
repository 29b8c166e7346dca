"""Peer messages: one frozen dataclass per kind; the wire codec is derived from them."""
