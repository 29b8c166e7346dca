"""The trio runtime: framing, the wire codec, the task that owns a process, client protocol."""
