"""``bench/message_cost.py``'s profile summary: py-spy's collapsed stacks summed by the
part of the code each sample's leaf frame is in (issue 10: "is it the scheduler?")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.bench_scripts import load_bench

message_cost = load_bench("message_cost")

ROOT = "<module> (skueued:6);main (skueue/cli/skueued.py:289);run (trio/_core/_run.py:2532)"


def collapsed(tmp_path: Path, stacks: dict[str, int]) -> Path:
    path = tmp_path / "spy.txt"
    path.write_text("".join(f"{ROOT};{leaf} {n}\n" for leaf, n in stacks.items()))
    return path


def test_samples_are_summed_by_the_part_of_their_leaf_frame(tmp_path: Path) -> None:
    path = collapsed(
        tmp_path,
        {
            "EpollIOManager.get_events (trio/_core/_io_epoll.py:225)": 50,
            "unrolled_run (trio/_core/_run.py:2765)": 10,
            "MemorySendChannel.send_nowait (trio/_channel.py:180)": 5,
            "QueueAnchor.assign (skueue/core/anchor.py:85)": 20,
            "position_key (skueue/dht/keys.py:46)": 4,
            "__create_fn__.<locals>.__init__ (<string>:4)": 1,
            "KindCodec.encode (skueue/wire/peer_codec.py:70)": 3,
            "packb (msgpack/__init__.py:30)": 2,
            "LinkSender._write_now (skueue/runtime/network/link_sender.py:114)": 4,
            "_GeneratorContextManager.__exit__ (contextlib.py:146)": 1,
        },
    )
    idle, parts, functions = message_cost.profile_shares(path)
    assert idle == pytest.approx(50 / 100)
    assert parts == pytest.approx(
        {
            "protocol core": 25 / 50,
            "trio scheduler": 10 / 50,
            "codec": 5 / 50,
            "trio streams, sockets, channels": 5 / 50,
            "daemon runtime": 4 / 50,
            "standard library, native": 1 / 50,
        }
    )
    assert list(parts) == sorted(parts, key=lambda p: -parts[p])  # largest first
    assert functions[0] == ("QueueAnchor.assign", pytest.approx(20 / 50))
    assert "EpollIOManager.get_events" not in dict(functions)  # idle is not work


def test_the_same_function_on_several_stacks_is_summed(tmp_path: Path) -> None:
    path = tmp_path / "spy.txt"
    leaf = "write_now (skueue/runtime/network/reply_writer.py:78)"
    path.write_text(f"{ROOT};a (skueue/runtime/owner.py:1);{leaf} 3\n{ROOT};{leaf} 2\n")
    idle, parts, functions = message_cost.profile_shares(path)
    assert (idle, parts, functions) == (0.0, {"daemon runtime": 1.0}, [("write_now", 1.0)])
