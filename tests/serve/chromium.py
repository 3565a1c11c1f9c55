"""A small headless-Chromium driver over the DevTools protocol's pipe transport.

Chromium started with ``--remote-debugging-pipe`` reads protocol commands from fd 3 and writes
replies and events to fd 4, each a JSON message ended by a NUL byte; no WebSocket library is
needed. Used by the browser tests and by ``benchmarks/bench_serve.py``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["find_chromium", "Chromium", "Page", "CHROMIUM_FLAGS"]

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                  "--no-default-browser-check", "--disable-features=Translate,MediaRouter,OptimizationHints"]


def find_chromium() -> str | None:
    """Path of a Chromium binary (``QDEVOLVE_CHROMIUM``, then ``chromium`` on PATH), or None."""
    env = os.environ.get("QDEVOLVE_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _high(fd: int) -> int:
    new = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return new


class ProtocolError(RuntimeError):
    """Chromium answered a command with an error, or did not answer in time."""


class Chromium:
    """One headless Chromium process with a fresh profile; ``with Chromium() as b: page = b.new_page()``."""

    def __init__(self, executable: str | None = None, *, width: int = 1400, height: int = 900) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError("chromium is not installed")
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="qdevolve-chromium-")
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        # bash below maps them to fds 3 and 4; move them above 9 first so that the two
        # redirections cannot overwrite each other (pytest's own descriptors may make them 3 or 4).
        to_chrome_r, from_chrome_w = (_high(fd) for fd in (to_chrome_r, from_chrome_w))
        args = [*CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
                f"--window-size={width},{height}", "about:blank"]
        self.log_path = Path(self.profile) / "chromium.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', exe, *args],
            pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.send("Target.setDiscoverTargets", {"discover": True})

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        """Send one command and wait for its reply's ``result``."""
        with self._lock:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise ProtocolError(f"{method}: no reply from chromium ({'exited' if self._closed else 'timeout'})")
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise ProtocolError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session=session)
        return page

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=5)
                except ProtocolError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._w, self._r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab: navigate, evaluate JavaScript, wait for a condition, screenshot, and what it logged/fetched."""

    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def _events(self, method: str) -> list[dict[str, Any]]:
        return [e.get("params", {}) for e in list(self.browser.events)
                if e.get("sessionId") == self.session and e.get("method") == method]

    def navigate(self, url: str, *, wait_for: str | None = None, timeout: float = 30.0) -> float:
        """Open ``url``; wait until the JavaScript expression ``wait_for`` is truthy (or the load
        event). Returns the seconds from the navigation command to that moment."""
        t0 = time.perf_counter()
        self.send("Page.navigate", {"url": url})
        self.wait_for(wait_for or "document.readyState === 'complete'", timeout=timeout)
        return time.perf_counter() - t0

    def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in res:
            raise ProtocolError(f"JavaScript error in {expression!r}: {res['exceptionDetails'].get('text')} "
                                f"{res['exceptionDetails'].get('exception', {}).get('description', '')}")
        return res.get("result", {}).get("value")

    def wait_for(self, expression: str, *, timeout: float = 30.0, interval: float = 0.05) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except ProtocolError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} still false after {timeout}s; console: {self.console()[-5:]}")
            time.sleep(interval)

    def screenshot(self, path: str | Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        out = Path(path)
        out.write_bytes(base64.b64decode(data))
        return out

    def requests(self) -> list[str]:
        """URLs of every request the page made (documents, scripts, XHR/fetch, images)."""
        return [e["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def console(self) -> list[str]:
        """Console messages, uncaught exceptions and browser log entries (CSP reports among them)."""
        out = [" ".join(str(a.get("value", a.get("description", ""))) for a in e.get("args", []))
               for e in self._events("Runtime.consoleAPICalled")]
        out += [e.get("exceptionDetails", {}).get("exception", {}).get("description", "exception")
                for e in self._events("Runtime.exceptionThrown")]
        out += [e.get("entry", {}).get("text", "") for e in self._events("Log.entryAdded")]
        return out

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})
