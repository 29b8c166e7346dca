"""The wire: framing, and the codecs derived from the classes they carry (the client
protocol's from skueue.host, the peer messages' from skueue.core.messages)."""
