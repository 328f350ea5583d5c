"""`servedrill join LINK`: play a served game-day round from a terminal.

The game runs on the server, exactly as in a browser tab (its journal is the server's, signed, on the
server's clock); this is only a terminal for it. It opens the tab's websocket (`/ws/<token>`) the way
textual-serve's page does, puts the local terminal in raw mode, sends keys as `["stdin", text]` and the
terminal size as `["resize", {...}]`, and writes what the app draws to the terminal. The token comes
from the player's link; a refused link ends with the server's reason, one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit


class JoinError(Exception):
    """A link or a server that cannot be joined; one line for the player."""


def websocket_of(link: str) -> tuple[str, str]:
    """(the page URL, the tab's websocket URL) of a personal link `http://HOST:PORT/?token=...`."""
    parts = urlsplit(link)
    token = (parse_qs(parts.query).get("token") or [""])[0]
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise JoinError(f"{link!r} is not a link (hint: the facilitator's link, http://HOST:PORT/?token=...)")
    if not token:
        raise JoinError(f"{link!r} has no token (hint: your personal link ends in ?token=...)")
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{parts.scheme}://{parts.netloc}/?token={quote(token)}", f"{scheme}://{parts.netloc}/ws/{quote(token)}"


async def _check_page(page: str) -> None:
    """The server's word on the link before the terminal goes raw (refusals are pages with a reason)."""
    import re
    from html import unescape

    import aiohttp

    async with aiohttp.ClientSession() as client, client.get(page) as response:
        if response.status != 200:
            text = await response.text()
            found = re.search(r"<p>(.*?)</p>", text, re.DOTALL)
            raise JoinError(unescape(found.group(1)) if found else f"the server answered {response.status}")


async def run(link: str) -> None:
    import aiohttp

    page, url = websocket_of(link)
    try:
        await _check_page(page)
    except aiohttp.ClientError as exc:
        raise JoinError(f"cannot reach {page.split('/?')[0]} ({exc})") from None
    size = shutil.get_terminal_size((80, 24))
    origin = page.split("/?")[0]
    async with aiohttp.ClientSession() as client:
        try:
            ws = await client.ws_connect(f"{url}?width={size.columns}&height={size.lines}", origin=origin,
                                         max_msg_size=0)
        except aiohttp.WSServerHandshakeError as exc:
            raise JoinError(f"the server refused the game ({exc.status}): open your link in a browser to see "
                            "why") from None
        async with ws:
            await _pump(ws)


async def _pump(ws: Any) -> None:
    import termios
    import tty

    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    out = sys.stdout.buffer

    outgoing: asyncio.Queue[str] = asyncio.Queue()  # in typing order, sent by one task

    def resized() -> None:
        size = shutil.get_terminal_size((80, 24))
        outgoing.put_nowait(json.dumps(["resize", {"width": size.columns, "height": size.lines}]))

    def typed() -> None:
        data = os.read(fd, 4096)
        if data:
            outgoing.put_nowait(json.dumps(["stdin", data.decode("utf-8", "replace")]))

    async def send() -> None:
        while True:
            await ws.send_str(await outgoing.get())

    sender = asyncio.create_task(send())
    try:
        tty.setraw(fd)
        loop.add_reader(fd, typed)
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGWINCH, resized)
        async for message in ws:
            if message.type.name == "BINARY":
                out.write(message.data)
                out.flush()
    finally:
        sender.cancel()
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        out.write(b"\x1b[?1049l\x1b[?25h\r\n")  # leave the app's screen, show the cursor
        out.flush()
