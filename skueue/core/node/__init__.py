"""One virtual node and the parts it owns."""
