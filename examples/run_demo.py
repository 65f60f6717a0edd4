"""`make run`: the demo owning service, the gateway on the demo policy, demo traffic, and the TUI on it.

Everything runs on loopback and stops when the TUI quits (q) or on Ctrl-C;
without a terminal a one-line status replaces the TUI. The gateway's logs and the
sampled offending values go to .demo/ (tail them in another terminal).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STATE = os.path.join(ROOT, ".demo")
BIN = os.path.dirname(sys.executable)
PORTS = {"source": 50061, "gateway": 50051, "admin": 50052, "metrics": 9464}


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_healthy(target: str, seconds: float) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + seconds
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    return False


def main() -> int:
    busy = [f"{name} {port}" for name, port in PORTS.items() if not port_free(port)]
    if busy:
        print(f"make run: ports in use ({', '.join(busy)}); stop what holds them first", file=sys.stderr)
        return 1
    os.makedirs(STATE, exist_ok=True)
    logs = open(os.path.join(STATE, "gateway.log"), "w")  # noqa: SIM115 (lives as long as the demo)
    children: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(args, **kwargs)  # type: ignore[call-overload]
        children.append(child)
        return child

    try:
        start(
            [sys.executable, os.path.join(HERE, "demo_source.py"), "--listen", f"127.0.0.1:{PORTS['source']}"],
            stdout=logs,
            stderr=logs,
        )
        start(
            [
                os.path.join(BIN, "argwatch"),
                "serve",
                "--policy",
                os.path.join(HERE, "policy.yaml"),
                "--listen",
                f"127.0.0.1:{PORTS['gateway']}",
                "--admin-listen",
                f"127.0.0.1:{PORTS['admin']}",
                "--metrics-listen",
                f"127.0.0.1:{PORTS['metrics']}",
                "--sample-log",
                os.path.join(STATE, "samples.jsonl"),
                "--mode-state",
                os.path.join(STATE, "modes.json"),
                # Every verdict a line, kept within 64 MiB: `argwatch decisions tail .demo/decisions` reads it.
                "--decision-log",
                os.path.join(STATE, "decisions"),
                "--decision-log-max-bytes",
                str(64 << 20),
                "--decision-log-rotate-bytes",
                str(8 << 20),
            ],
            stdout=logs,
            stderr=logs,
        )
        if not wait_healthy(f"127.0.0.1:{PORTS['gateway']}", 20):
            print("make run: the gateway did not become healthy; see .demo/gateway.log", file=sys.stderr)
            return 1
        start(
            [sys.executable, os.path.join(HERE, "traffic.py"), "--target", f"127.0.0.1:{PORTS['gateway']}"],
            stdout=logs,
            stderr=logs,
        )
        print(
            f"argwatch demo: gateway 127.0.0.1:{PORTS['gateway']}, admin :{PORTS['admin']}, "
            f"metrics http://127.0.0.1:{PORTS['metrics']}/metrics; logs and samples in .demo/."
        )
        admin = f"127.0.0.1:{PORTS['admin']}"
        if sys.stdin.isatty() and sys.stdout.isatty():
            # The TUI in the foreground; quitting it (q) stops the demo.
            viewer = start([os.path.join(BIN, "argwatch"), "tui", "--admin", admin])
        else:
            print("no terminal: a status line instead of the TUI (Ctrl-C stops)")
            print("per tool: mode, calls, out-of-set rate as written/after normalisation, rejected, failed open")
            viewer = start([os.path.join(BIN, "argwatch"), "watch", "--admin", admin])
        viewer.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        logs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
