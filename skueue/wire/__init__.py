"""The wire: framing, the client protocol and the peer codec."""
