"""``python -m revbench.replay``: serve a world and/or recorded fixtures on loopback."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from revbench.replay.server import ReplayApp, free_port
from revbench.settings import ReplaySettings


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m revbench.replay")
    p.add_argument("--world", type=Path)
    p.add_argument("--fixtures", "--cassettes", dest="fixtures", type=Path,
                   help="Directory of recorded answers (routes.json and/or VCR *.yaml cassettes), served before the world")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", type=Path)
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--max-consecutive-faults", type=int, default=2)
    p.add_argument("--timeout-delay", type=float, default=2.0)
    p.add_argument("--retry-after", type=int, default=1)
    p.add_argument("--as-of", help="ISO timestamp: hide versions after it")
    a = p.parse_args(argv)
    settings = ReplaySettings(
        host=a.host, port=a.port, fault_rate=a.fault_rate, fault_seed=a.fault_seed,
        max_consecutive_faults=a.max_consecutive_faults, timeout_delay_seconds=a.timeout_delay,
        retry_after_seconds=a.retry_after,
    )
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("the replay server binds to loopback only")
    as_of = datetime.fromisoformat(a.as_of) if a.as_of else None
    replay = ReplayApp(settings, world_dir=a.world, fixtures_dir=a.fixtures, as_of=as_of)
    port = settings.port or free_port(settings.host)
    import uvicorn

    config = uvicorn.Config(replay.app, host=settings.host, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    if a.port_file:
        # The port file is written once the socket is bound, so waiters never race the bind.
        orig_startup = server.startup

        async def startup(sockets=None):  # type: ignore[no-untyped-def]
            await orig_startup(sockets=sockets)
            a.port_file.write_text(str(port))

        server.startup = startup  # type: ignore[method-assign]
    server.run()


if __name__ == "__main__":
    main()
