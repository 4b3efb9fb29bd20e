"""The scripted model server (tests/fakellm.py) in its own process, so its Python threads
do not compete for the measured process's GIL.

It also keeps no growing record of the requests in the measured process (the server
records every request body it receives).

Run: python bench/llm_server.py stall|soak ROOT TURNS — prints the base URL (OpenAI, ending
in /v1) on stdout, then serves until stdin closes. The script:
* stall: TURNS user turns that each call three read-only file tools on ROOT, then stream
  the answer at a model's pace (~100 deltas/s);
* soak: TURNS user turns, as fast as the server can send them; odd turns (1, 3, ...) call
  two read-only file tools first, even turns are plain answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scripted import started_llm, text_turn, tool_turn
from tests.fakellm import Turn, text, tool_calls

#: Seconds between streamed deltas: ~100 deltas/s, the pace of a fast real model.
DELAY = 0.01


def paced(turn: Turn) -> Turn:
    if turn.calls:
        calls = tuple((c.id, c.name, c.arguments) for c in turn.calls)
        return tool_calls(*calls, text_before=turn.text, delay=DELAY)
    return text(turn.text, chunk_size=turn.chunk_size, delay=DELAY)


def script(kind: str, root: Path, turns: int) -> list[Turn]:
    if kind == "stall":
        return [paced(t) for n in range(turns) for t in tool_turn(root, n, calls=3)]
    return [t for n in range(1, turns + 1) for t in (tool_turn(root, n) if n % 2 else text_turn())]


def main() -> None:
    kind, root, turns = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    llm = started_llm()
    llm.add(*script(kind, root, turns))
    print(llm.openai_base_url, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    llm.stop()


if __name__ == "__main__":
    main()
