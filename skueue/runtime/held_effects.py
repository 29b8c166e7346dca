"""What the owner's steps made for peers and clients, held until the process's group has
committed the step's entries (docs/replication.md §5.1, I2: nothing of an input leaves
before the input is committed).

Each step's frames, replies and acknowledgements of peer frames are held under the last
log index of the step, and released, in step order, once the group's commit index has
reached it.  A group of one commits at its own write, before the owner flushes: each
step's effects are released in the same step.  With more voters the commit comes later,
with a follower's ack, and the steps after it go on meanwhile (pipelined, §4); what they
made waits its turn here.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class HeldStep:
    index: int
    """The last log index of the step (its effects go once the commit reaches it)."""
    peer_frames: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    replies: list[tuple[int, Any]] = field(default_factory=list)
    handled: dict[str, int] = field(default_factory=dict)
    """Per peer, the last of its link's frames the step took: acknowledged once
    committed (a frame acknowledged before would be lost with an uncommitted step)."""


class HeldEffects:
    def __init__(self) -> None:
        self.steps: deque[HeldStep] = deque()
        # A leader deposed under failover (runtime/group.py): its later steps never go
        # out, and the new leader's appends may have cut its log below them.
        self.frozen = False

    def freeze(self) -> None:
        self.frozen = True

    def hold(self, step: HeldStep) -> None:
        if self.frozen:
            return
        last = self.steps[-1].index if self.steps else 0
        assert step.index >= last, "a step's entries come after the last step's"
        self.steps.append(step)

    def release(self, commit: int) -> HeldStep:
        """Everything held through ``commit``, merged in step order."""
        steps = self.steps
        if len(steps) == 1 and steps[0].index <= commit:
            return steps.popleft()  # the usual case: one step, committed at once
        out = HeldStep(commit)
        while steps and steps[0].index <= commit:
            step = steps.popleft()
            for peer, frames in step.peer_frames.items():
                out.peer_frames[peer].extend(frames)
            out.replies.extend(step.replies)
            out.handled.update(step.handled)
        return out

    def holds_through(self, index: int) -> bool:
        """Whether a step whose entries end at ``index`` or before is still held."""
        return bool(self.steps) and self.steps[0].index <= index

    def __len__(self) -> int:
        return len(self.steps)
