"""The daemon: the trio driver around the host; its top level wires the parts and owns the host."""
