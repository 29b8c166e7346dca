"""bench/cost_model.py's figures: what one ``n`` measured (:class:`Point`) and the
throughput the model projects from it (:class:`Projection`, :func:`project`).  The
definitions are in cost_model.py's docstring."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Point:
    """One ``n``: what the counted window measured (plain data; goes to JSON as is)."""

    n: int
    ops_per_process: int
    cycles: int
    warmup_cycles: int
    seed: int
    tree_height: int
    ops_submitted: int
    ops_completed: int
    rounds: int
    messages: int
    bytes: int
    by_kind: dict[str, dict[str, int]]  # kind -> {"messages", "bytes"}
    busiest: str  # process id
    busiest_messages: int  # its sent + received
    busiest_is_anchor: bool
    busiest_tree_kids: int  # its nodes' children in the tree that live in other processes
    # Its nodes' part of the label space (the DHT keys it stores and the routes that end
    # or pass there), times n: 1.0 is an even part.
    busiest_interval_over_even: float
    busiest_by_kind: dict[str, int]  # kind -> its sent + received
    # Pearson correlation, over the processes, of sent + received with the part of the
    # label space owned: near 1 when the DHT's uneven intervals make the busy processes.
    load_interval_correlation: float
    least_messages: int  # the idlest process's sent + received
    wall_seconds: float
    per_process: list[int] = field(repr=False)  # sent + received, by process index

    @property
    def rounds_per_cycle(self) -> float:
        return self.rounds / self.cycles

    @property
    def messages_per_op(self) -> float:
        return self.messages / self.ops_completed

    @property
    def bytes_per_op(self) -> float:
        return self.bytes / self.ops_completed

    @property
    def process_msgs_per_op_average(self) -> float:
        return 2 * self.messages / (self.n * self.ops_completed)

    @property
    def process_msgs_per_op_busiest(self) -> float:
        return self.busiest_messages / self.ops_completed

    @property
    def busiest_share(self) -> float:
        return self.busiest_messages / (2 * self.messages)

    @property
    def average_share(self) -> float:
        return 1 / self.n


@dataclass
class Projection:
    """Cluster throughput of ``n`` one-core hosts as the model projects it."""

    cpu_us_per_message: float
    cpu_us_per_op_local: float
    busiest_us_per_op: float  # the busiest process's CPU per cluster operation
    average_us_per_op: float
    ops_per_second: float  # bounded by the busiest process
    ops_per_second_ideal: float  # if every process did the average work


def project(point: Point, cpu_us_per_message: float, cpu_us_per_op_local: float) -> Projection:
    local = cpu_us_per_op_local / point.n
    busiest = point.process_msgs_per_op_busiest * cpu_us_per_message + local
    average = point.process_msgs_per_op_average * cpu_us_per_message + local
    return Projection(
        cpu_us_per_message, cpu_us_per_op_local, busiest, average, 1e6 / busiest, 1e6 / average
    )
