"""Network: client sessions, peer links and their handshakes, over TCP (and TLS)."""
