"""Linearized De Bruijn overlay: labels, a node's local view, the aggregation tree, routing.

Everything here is pure: no I/O, no clocks, no global knowledge of the ring.
"""
