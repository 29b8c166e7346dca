"""Replication: each Skueue process a Raft group of k hosts (docs/replication.md).

A pure, deterministic, sans-IO consensus module in the style of ``skueue/host/``: a
:class:`~skueue.replication.node.ReplicaNode` is one group's Raft state at one host;
``node.step(input) -> effects`` is the only way it changes.  Entries are opaque bytes:
nothing here imports any other part of Skueue, so the same module replicates the input
log of a daemon's process and the opaque commands of the replication simulator
(``skueue/sim/replicas.py``).
"""
