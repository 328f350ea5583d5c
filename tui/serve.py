"""`servedrill serve`: the terminal UI in a browser, through textual-serve.

textual-serve answers `/` with a page that draws a terminal (xterm.js) and, for every websocket a page
opens on `/ws`, starts one app process: here `servedrill play` (as `python -m tui.cli play ...`, so the
same interpreter and install), with the seed, player and incident list the server was given. So every
browser tab is its own process and its own session; sessions land where `servedrill play` puts them
(`$SERVEDRILL_DATA`, inherited with the rest of the environment, as is `$SERVEDRILL_CACHE`). With a warm
pool (`warm` > 0, tui.serve_warm) that command runs in a process forked from a template that has imported
the game already, instead of a fresh interpreter; what it runs and under which bounds stay the same.

Safety. Every tab gets the SQL console on this machine's telemetry, so the server binds to loopback
unless told otherwise (`check_host`). On top of textual-serve it:
- refuses browser websockets whose Origin is not the page's own host (another web site open in the
  same browser could otherwise drive a session), and on loopback refuses Host headers that are not
  loopback names (DNS rebinding);
- caps the number of app processes alive at once (`max_sessions`);
- holds every tab and its app to `tui.serve_limits.Limits` (terminal size, message size and rate, the
  app's memory and CPU, idle and total time; the app is killed when its socket closes and ends when the
  server does); tui.serve_session applies them;
- lists no folder: `/static/` and every folder under it answer 404 (textual-serve lists them);
- serves a page that loads nothing from outside this machine: textual-serve's template asks Google Fonts
  for Roboto Mono, which textual-serve itself ships; `local_page` points the page at that copy
  (a machine without internet access, or a player who should not be tracked, gets the same page).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import shlex
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tui.serve_limits import DEFAULT_LIMITS, Limits

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 32
"""App processes (browser tabs) alive at once; more websockets are refused with HTTP 503."""
DEFAULT_WARM = 4
"""Warm app processes kept ready for the next tabs (tui.serve_warm); 0: every tab's app starts cold."""
TAB_HANDOVER_S = 3.0
"""A game day's one tab per player: how long, besides the app's `quit_grace_s`, a page or websocket for a player
whose tab is still open waits for it to end before being refused. A reload (or a new tab right after closing the
old one) arrives before the server has seen the old socket close and stopped its app; it should continue the game,
not meet 'already open in another tab'. A second tab really open elsewhere is refused after this wait."""

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})

log = logging.getLogger("servedrill.serve")


_LINK = re.compile(r"<link\b[^>]*?href=\"([^\"]*)\"[^>]*?/?>", re.IGNORECASE | re.DOTALL)
_STATIC = re.compile(r"href=\"([^\"]*)css/xterm\.css\"")
FONT_FILES = (("normal", "RobotoMono-VariableFont_wght.ttf"), ("italic", "RobotoMono-Italic-VariableFont_wght.ttf"))
"""Roboto Mono as textual-serve ships it under its static/fonts folder."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""


def local_page(html: str) -> str:
    """textual-serve's page with every link to another host (its Google Fonts stylesheet) replaced by
    @font-face rules for the copy of Roboto Mono in textual-serve's own static folder."""
    found = _STATIC.search(html)
    static = found.group(1) if found else "/static/"
    ours = _origin(static)
    faces = "<style>" + "".join(
        f'@font-face {{ font-family: "Roboto Mono"; font-style: {style}; font-weight: 100 700; '
        f'src: url("{static}fonts/{name}") format("truetype"); }}'
        for style, name in FONT_FILES) + "</style>"
    replaced = False

    def swap(match: re.Match[str]) -> str:
        nonlocal replaced
        origin = _origin(match.group(1))
        if not origin or origin == ours:
            return match.group(0)  # this server's own file
        text, replaced = ("" if replaced else faces), True
        return text

    out = _LINK.sub(swap, html)
    return out if replaced else out.replace("</head>", faces + "</head>", 1)


class ServeError(Exception):
    """A serve option that cannot work; the message is one line for the user."""


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) means this machine only. A name counts when every
    address it resolves to is a loopback address; a name that does not resolve does not count."""
    name = host.strip("[]")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    if name.lower() in LOOPBACK_NAMES:
        return True
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    # getaddrinfo's address is a string for the IPv4 and IPv6 families a host name resolves to; anything
    # else is not a loopback address
    return bool(addresses) and all(isinstance(a, str) and ipaddress.ip_address(a.split("%")[0]).is_loopback
                                   for a in addresses)


def check_host(host: str, public: bool) -> str | None:
    """None when `host` is loopback; the warning to print when it is not and `public` is set.
    Raises ServeError when it is not loopback and `public` is not set."""
    if is_loopback(host):
        return None
    if not public:
        raise ServeError(f"refusing to serve on {host}: not a loopback address, and every browser tab gets "
                         f"the SQL console; pass --public to allow it")
    return (f"warning: serving on {host} without authentication: anyone who can reach it gets a game "
            f"session with the SQL console on this machine's telemetry, and writes session files here")


def library_files(paths: Sequence[Path | str]) -> list[Path]:
    """Incident files from files and folders (a folder gives its *.yaml/*.yml, sorted, without
    template.yaml). Raises ServeError for a path that is missing or a folder with no incident."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path.is_dir():
            found = sorted(p for p in (*path.glob("*.yaml"), *path.glob("*.yml"))
                           if p.is_file() and p.name != "template.yaml")
            if not found:
                raise ServeError(f"no incident files (*.yaml) in {path}")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise ServeError(f"no such incident file or folder: {raw}")
    return out


def app_command(*, incident: str | None = None, seed: int | None = None, player: str | None = None,
                random_deal: bool = False, library: Sequence[Path] = (),
                python: str | None = None, ask_player: bool = False) -> str:
    """The shell command textual-serve runs for each tab: `servedrill play` with these options.
    `exec` so the app process is the shell's own pid (the server's quit and the load test's memory
    figures reach it directly)."""
    argv = [python or sys.executable, "-m", "tui.cli", "play"]
    if incident:
        argv.append(incident)
    if seed is not None:
        argv += ["--seed", str(seed)]
    if random_deal:
        argv.append("--random")
    if player:
        argv += ["--player", player]
    for path in library:
        argv += ["--library", str(path)]
    if ask_player:
        argv.append("--ask-player")
    return "exec " + shlex.join(argv)


def _host_of(netloc: str) -> str:
    """The host part of `host[:port]` (IPv6 in brackets kept without them)."""
    return urlsplit(f"//{netloc}").hostname or ""


def request_allowed(host_header: str, origin: str | None, loopback_only: bool,
                    public_url: str | None = None) -> str | None:
    """None when a request may proceed, else why not. `origin` is the Origin header (browsers always
    send it on websockets; other clients may not); it must name this server: the Host the request
    came to, or the host of `public_url`."""
    if loopback_only and not is_loopback_name(_host_of(host_header)):
        return f"Host {host_header!r} is not a loopback name"
    ours = {host_header.lower()} | ({urlsplit(public_url).netloc.lower()} if public_url else set())
    if origin is not None and urlsplit(origin).netloc.lower() not in ours:
        return f"Origin {origin!r} is not this server ({host_header!r})"
    return None


def is_loopback_name(host: str) -> bool:
    """Loopback without a DNS lookup: a loopback address literal or a localhost name."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() in LOOPBACK_NAMES


def make_server(command: str, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                public_url: str | None = None, max_sessions: int = DEFAULT_MAX_SESSIONS,
                loopback_only: bool = True, limits: Limits = DEFAULT_LIMITS, gate: Any = None,
                warm: int = DEFAULT_WARM) -> Any:
    """A textual-serve Server running `command` per tab, with the checks this module describes. `gate`: a
    served game-day round (game.gameday.gate.RoundGate): pages and tabs by roster token only, each tab's
    command the gate's. `warm`: spare app processes kept ready (tui.serve_warm; 0: none, every app starts
    cold)."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server

    from tui.serve_session import app_environment, run_tab
    from tui.serve_warm import WarmPool

    @web.middleware
    async def no_listings(request: web.Request, handler: Any) -> Any:
        # aiohttp answers 403 for a folder under a static route once listings are off: say 404, so a
        # client learns nothing about which folders exist
        try:
            return await handler(request)
        except web.HTTPForbidden:
            if request.path.startswith("/static"):
                raise web.HTTPNotFound() from None
            raise

    class ServedrillServer(Server):
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title="servedrill", public_url=public_url)
            self.fixed_public_url = public_url
            self.max_sessions = max_sessions
            self.loopback_only = loopback_only
            self.limits = limits
            self.active = 0
            self.warm: WarmPool | None = None

        async def _make_app(self) -> web.Application:
            """textual-serve's routes, with its static folder served without listings."""
            app = web.Application(middlewares=[no_listings])
            aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
            app.add_routes([
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.get("/ws/{token}", self.handle_websocket),  # a game day's tabs: the player's token
                web.get("/room/{token}", self.handle_room),  # a game day's live room: the facilitator's token
                web.get("/room/{token}/ws", self.handle_room_websocket),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, show_index=False, name="static"),
            ])
            app.on_startup.append(self.on_startup)
            app.on_shutdown.append(self.on_shutdown)
            app.on_cleanup.append(self.close_warm)
            return app

        def _refusal(self, request: web.Request) -> str | None:
            return request_allowed(request.host, request.headers.get("Origin"), self.loopback_only,
                                   self.fixed_public_url)

        async def handle_index(self, request: web.Request) -> Any:
            if (why := self._refusal(request)) is not None:
                log.warning("refused page: %s", why)
                raise web.HTTPForbidden(text=why)
            if gate is not None:
                from game.api import RoundRefused
                from tui.serve_gameday import refusal_page

                await self._handover(request.query.get("token"))
                try:
                    gate.check_page(request.query.get("token"))
                except RoundRefused as refused:
                    return web.Response(status=refused.status, text=refusal_page(refused.message),
                                        content_type="text/html")
            if self.fixed_public_url is None:
                # The page names its websocket URL: make it the address the browser used, so the
                # Origin check passes whether the tab opened localhost or 127.0.0.1. Read
                # synchronously by the handler below, before any other request runs.
                self.public_url = f"{request.scheme}://{request.host}"
            response = await super().handle_index(request)
            if isinstance(response, web.Response) and response.text is not None:
                response.text = local_page(response.text)
                if gate is not None:
                    from tui.serve_gameday import websocket_url

                    response.text = websocket_url(response.text, request.query.get("token", ""))
            return response

        async def handle_websocket(self, request: web.Request) -> Any:
            if (why := self._refusal(request)) is not None:
                log.warning("refused websocket: %s", why)
                raise web.HTTPForbidden(text=why)
            if self.active >= self.max_sessions:
                log.warning("refused websocket: %d sessions already open", self.active)
                raise web.HTTPServiceUnavailable(text=f"servedrill: {self.max_sessions} sessions already open")
            command, player = self.command, None
            if gate is not None:
                from game.api import RoundRefused

                await self._handover(request.match_info.get("token"))
                try:
                    player, command = gate.admit(request.match_info.get("token"))
                except RoundRefused as refused:
                    log.warning("refused websocket: %s", refused.message)
                    raise web.HTTPForbidden(text=refused.message) from None
            self.active += 1
            try:
                return await run_tab(request, command, self.download_manager, self.limits, self.warm)
            finally:
                self.active -= 1
                if player is not None:
                    gate.release(player)

        async def _handover(self, token: str | None) -> None:
            """Wait (at most `quit_grace_s` + TAB_HANDOVER_S) while the player of `token` still has a tab open: a
            reload's old tab is closing, and the gate then admits the new one instead of refusing it."""
            if gate is None or not token or (player := gate.roster.player_of(token)) is None:
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.limits.quit_grace_s + TAB_HANDOVER_S
            while player in gate.open_tabs and loop.time() < deadline:
                await asyncio.sleep(0.05)

        def _room_gate(self, request: web.Request) -> Any:
            """The gate, once the request may open the facilitator's room; HTTP errors otherwise (404 without a
            game day: there is no room to serve)."""
            if (why := self._refusal(request)) is not None:
                log.warning("refused room: %s", why)
                raise web.HTTPForbidden(text=why)
            if gate is None:
                raise web.HTTPNotFound()
            return gate

        async def handle_room(self, request: web.Request) -> Any:
            """The live room's page (`servedrill gameday room PLAN` in a tab), for the facilitator's token only."""
            from game.api import RoundRefused
            from tui.serve_gameday import refusal_page, room_websocket_url

            room_gate = self._room_gate(request)
            token = request.match_info.get("token")
            try:
                room_gate.check_room(token)
            except RoundRefused as refused:
                log.warning("refused room page: %s", refused.message)
                return web.Response(status=refused.status, text=refusal_page(refused.message), content_type="text/html")
            if self.fixed_public_url is None:
                self.public_url = f"{request.scheme}://{request.host}"
            response = await super().handle_index(request)
            if isinstance(response, web.Response) and response.text is not None:
                response.text = room_websocket_url(local_page(response.text), token or "")
            return response

        async def handle_room_websocket(self, request: web.Request) -> Any:
            from game.api import RoundRefused

            room_gate = self._room_gate(request)
            try:
                room_gate.check_room(request.match_info.get("token"))
            except RoundRefused as refused:
                log.warning("refused room websocket: %s", refused.message)
                raise web.HTTPForbidden(text=refused.message) from None
            if self.active >= self.max_sessions:
                raise web.HTTPServiceUnavailable(text=f"servedrill: {self.max_sessions} sessions already open")
            self.active += 1
            try:
                return await run_tab(request, room_gate.room_command(), self.download_manager, self.limits,
                                     self.warm)
            finally:
                self.active -= 1

        async def on_startup(self, app: web.Application) -> None:
            """Start the warm pool (quiet: textual-serve prints its banner here, before the port is bound)."""
            if warm > 0:
                self.warm = WarmPool(warm, app_environment(), nice=self.limits.app_nice)
                self.warm.start()

        async def close_warm(self, app: web.Application) -> None:
            if self.warm is not None:
                await self.warm.close()

        def serve(self, debug: bool = False) -> None:
            """textual-serve's `serve`, announcing the URL only once the port is bound."""
            import asyncio
            import signal

            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(signum, self.request_exit)
            shown = self.fixed_public_url or f"http://{_url_host(host)}:{port}"
            web.run_app(self._make_app(), host=host, port=port, handle_signals=False, loop=loop,
                        access_log_class=redacting_access_logger(),
                        print=lambda *_: print(f"servedrill: serving on {shown} (one game per browser tab; "
                                               f"ctrl+c stops)", flush=True))

    return ServedrillServer()


_TOKEN_QUERY = re.compile(r"(?i)([?&]token=)[^&#\s]*")
_TOKEN_PATH = re.compile(r"^(/ws/|/room/)[^/?#]+")


def redact(path_qs: str) -> str:
    """A request's path and query as the access log may keep it: a game day's personal token (in `?token=`,
    in the tab's `/ws/TOKEN`, or the facilitator's in `/room/TOKEN`) is a password, so it is replaced by
    `<token>`."""
    return _TOKEN_PATH.sub(r"\1<token>", _TOKEN_QUERY.sub(r"\1<token>", path_qs))


def redacting_access_logger() -> type:
    """aiohttp's access logger, logging (client, request line, status, seconds) with tokens redacted
    (aiohttp is imported only when a server starts)."""
    from aiohttp import web
    from aiohttp.abc import AbstractAccessLogger

    class RedactingAccessLogger(AbstractAccessLogger):
        def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
            self.logger.info('%s "%s %s" %s %.3fs', request.remote, request.method, redact(request.path_qs),
                             response.status, time)

    return RedactingAccessLogger


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def serve(command: str, **options: Any) -> None:
    """Run the server until interrupted (ctrl+c or SIGTERM); open tabs' apps are told to quit."""
    make_server(command, **options).serve()
