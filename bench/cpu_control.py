"""A control for the loop's longest callback: fixed work in a process of its own, timed by the same clock.

loop_work.py reads a callback's length in its thread's CPU time, which leaves
out the time the thread waited for a core. On this VM it still does not read
the work alone: a fixed piece of work has read over ten times its median by
that clock (docs/performance.md, churn.py's section). What adds it is not
known for certain: interrupts handled while the thread ran (this kernel has
no IRQ time accounting), time the virtual CPU was not run that the guest
does not see as steal, or the other core's load. This process does one fixed
piece of work (a 4,000-step loop, about 0.2-0.3 ms) every 10 ms, a few per
cent of a core, and reads each piece by CLOCK_THREAD_CPUTIME_ID as
loop_work.py does: its readings are one sample of the machine's noise in the
same run, to read a callback's against (not a bound on it).

    with cpu_control() as control:
        ...                                  # the run
    control.result                           # {"pieces", "median_ms", "max_ms", "over_twice_median"}
"""

from __future__ import annotations

import json
import subprocess
import sys
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
median = readings[len(readings) // 2] if readings else 0.0
print(json.dumps({
    "pieces": len(readings),
    "median_ms": median * 1000,
    "max_ms": readings[-1] * 1000 if readings else 0.0,
    "over_twice_median": sum(1 for reading in readings if reading > 2 * median),
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
            f"a fixed piece of work in a process beside the run (cpu_control.py), {found['pieces']:,.0f} pieces: "
            f"median {found['median_ms']:.2f} ms, longest {found['max_ms']:.2f} ms of its thread's CPU time, "
            f"{found['over_twice_median']:,.0f} over twice the median"
        )


@contextmanager
def cpu_control() -> Iterator[Control]:
    """Runs the control process for the block's duration; its readings are in the yielded Control after."""
    control = Control()
    process = subprocess.Popen([sys.executable, "-c", PIECE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield control
    finally:
        # Its readings are the run's by-product: a control that hangs or dies costs them, never the run's figures.
        try:
            out, _ = process.communicate(input="", timeout=30)
            if process.returncode == 0 and out.strip():
                control.result = json.loads(out)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        except ValueError:  # half a line from a control that died printing
            control.result = {}
