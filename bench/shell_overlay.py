"""What the trust model's safety costs per call, against a floor measured in the same run.

1. A sandboxed `shell_run` writes through an overlay that is copied back afterwards (writes
   to places that run code later are held): the sandboxed command with the overlay and its
   copy-back, against the same command in bubblewrap alone. A folder of 200 files, the
   command writes one.
2. Every request to the model is masked whole by the tripwire before it leaves
   (`masked_payload`): a 200-message request with 20 known secrets, against serialising the
   same request to JSON (which every request pays anyway).

    .venv/bin/python bench/shell_overlay.py
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RUNS = 21


def median_ms(fn: Callable[[], object], runs: int = RUNS) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def overlay_cost() -> None:
    from tools.shell.overlay import prepare
    from tools.shell.sandbox import probe, wrap

    if not probe().available:
        print("no sandbox here: skipping the overlay figure")
        return
    proj = Path(tempfile.mkdtemp(prefix="deskhand-bench-", dir="/var/tmp"))
    try:
        for i in range(200):
            (proj / f"f{i}.txt").write_text("x" * 1000)

        def run(overlay: bool) -> None:
            box = prepare([proj], proj / "home") if overlay else None
            argv = wrap(
                ["bash", "-c", "echo hi > out.txt"],
                cwd=proj,
                writable=[proj],
                hidden=[box.private] if box else [],
                network=False,
            )
            subprocess.run(box.argv(argv) if box else argv, cwd=proj, check=True,
                           capture_output=True)  # fmt: skip
            if box is not None:
                box.finish()

        if prepare([proj], proj / "home") is None:
            print("no overlay on this file system: skipping the overlay figure")
            return
        floor = median_ms(lambda: run(False))
        cost = median_ms(lambda: run(True))
        print(
            f"shell_run sandboxed: bubblewrap alone {floor:.1f} ms, with the overlay and its "
            f"copy-back {cost:.1f} ms ({cost / floor:.2f}×, +{cost - floor:.1f} ms)"
        )
    finally:
        shutil.rmtree(proj, ignore_errors=True)


def masking_cost() -> None:
    from app.core.providers._http import masked_payload
    from tools.redact import TRIPWIRE

    secrets = [f"sk-bench-{i:02d}-" + "a1b2c3d4e5f6g7h8" * 2 for i in range(20)]
    TRIPWIRE.remember(secrets)
    body = {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "user" if i % 2 else "assistant", "content": "lorem ipsum dolor " * 60}
            for i in range(200)
        ],
    }
    floor = median_ms(lambda: json.dumps(body))
    cost = median_ms(lambda: json.dumps(masked_payload(body)))
    size = len(json.dumps(body)) // 1024
    print(
        f"request of {size} KiB, 20 known secrets: JSON alone {floor:.1f} ms, masked then "
        f"JSON {cost:.1f} ms ({cost / floor:.1f}×, +{cost - floor:.1f} ms)"
    )


if __name__ == "__main__":
    overlay_cost()
    masking_cost()
