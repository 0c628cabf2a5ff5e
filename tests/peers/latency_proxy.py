"""A TCP proxy on loopback that delays every byte and every close by ``--delay`` seconds each
way, as a distant server would (not a test module).

    python tests/peers/latency_proxy.py --listen N --to M --delay 0.05

On loopback a server's close of an idle connection reaches the client within microseconds,
so the keep-alive race (docs/connection.md, "Idle connections") almost never shows; over a
real network the close and the client's next request cross each other for a whole round
trip. Through this proxy they do too: a call made about the server's keep-alive timeout
after the last answer meets the server's close on the way. Data and end-of-stream keep their
order in each direction; a reset from one side closes both. It prints ``connection N`` for
each connection it accepts (the tests count the client's connections). Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk (and the end) ``delay`` seconds late."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

    async def later() -> None:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                with contextlib.suppress(OSError):
                    if writer.can_write_eof():
                        writer.write_eof()
                return
            writer.write(data)
            with contextlib.suppress(OSError):
                await writer.drain()

    sender = asyncio.ensure_future(later())
    try:
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                data = b""
            queue.put_nowait((loop.time() + delay, data or None))
            if not data:
                break
        await sender
    finally:
        sender.cancel()


async def serve(listen: int, to: int, delay: float) -> None:
    accepted = 0

    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        print(f"connection {accepted}", flush=True)
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", to)
        except OSError:
            c_writer.close()
            return
        try:
            await asyncio.gather(pipe(c_reader, s_writer, delay), pipe(s_reader, c_writer, delay))
        finally:
            for w in (s_writer, c_writer):
                w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--to", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.05)
    args = parser.parse_args()
    asyncio.run(serve(args.listen, args.to, args.delay))


if __name__ == "__main__":
    main()
