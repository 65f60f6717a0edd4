"""A control for the loop's longest callback: fixed work in a process of its own, timed by the same clock.

loop_work.py reads a callback's length in its thread's CPU time, which leaves
out the time the thread waited for a core. On this VM it still does not read
the work alone: a thread's CPU time also counts time its virtual CPU did not
run it (the host's, not reported to the guest as steal), and interrupts
handled while it ran. This process does one fixed piece of work (about
0.2 ms) every 10 ms, 2 % of a core, and reads each piece by
CLOCK_THREAD_CPUTIME_ID as loop_work.py does: its longest reading, beside a
bench's run, is what the machine alone adds to one callback's reading then.
At 100 pieces a second it sees a tenth of what a 1 ms ticker's callbacks see,
so its longest is a lower bound.

    with cpu_control() as control:
        ...                                  # the run
    control.result                           # {"pieces", "median_ms", "max_ms", "over_2ms"}
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PIECE = """
import json, sys, threading, time
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
readings = []
while not stop.is_set():
    time.sleep(0.01)
    started = time.thread_time()
    total = 0
    for number in range(4000):
        total += number
    readings.append(time.thread_time() - started)
readings.sort()
print(json.dumps({
    "pieces": len(readings),
    "median_ms": readings[len(readings) // 2] * 1000 if readings else 0.0,
    "max_ms": readings[-1] * 1000 if readings else 0.0,
    "over_2ms": sum(1 for reading in readings if reading > 0.002),
}))
"""


@dataclass
class Control:
    """The control's readings, once its block has ended."""

    result: dict[str, float] = field(default_factory=dict)

    def words(self) -> str:
        found = self.result
        if not found:
            return "the control gave no reading"
        return (
            f"a fixed piece of work in a process beside it (cpu_control.py), {found['pieces']:,.0f} pieces: median "
            f"{found['median_ms']:.2f} ms, longest {found['max_ms']:.2f} ms of its thread's CPU time"
        )


@contextmanager
def cpu_control() -> Iterator[Control]:
    """Runs the control process for the block's duration; its readings are in the yielded Control after."""
    control = Control()
    process = subprocess.Popen([sys.executable, "-c", PIECE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.05)  # started before the run's first callback
        yield control
    finally:
        out, _ = process.communicate(input="", timeout=30)
        if out.strip():
            control.result = json.loads(out)
