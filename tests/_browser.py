"""A headless Chromium for tests, driven over W3C WebDriver with ``requests`` (no new dependency).

:func:`start_browser` runs Debian's ``/usr/bin/chromedriver`` on a free local port and opens one
session of ``/usr/bin/chromium --headless=new`` with a throw-away profile and every background
network feature off; :class:`Browser` wraps the few WebDriver commands the tests need. Tests that
need it skip when either binary is absent (``apt-get install chromium chromium-driver``; CI
installs both in ``.ci/run``'s "machine tools" stage).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional

import requests

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: W3C's key for an element reference in WebDriver JSON
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def missing_browser() -> Optional[str]:
    """Why the browser tests cannot run here, or None when they can."""
    absent = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if absent:
        return f"{' and '.join(absent)} not installed (apt-get install chromium chromium-driver)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WebDriverError(RuntimeError):
    """A WebDriver command failed; carries the W3C error code (``no such alert``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Browser:
    """One WebDriver session. Element references are the W3C JSON objects, passed back as is."""

    def __init__(self, driver: subprocess.Popen[bytes], base: str, profile: tempfile.TemporaryDirectory[str]) -> None:
        self.driver = driver
        self.base = base
        self.profile = profile
        self.http = requests.Session()
        self.session_id: Optional[str] = None

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        url = f"{self.base}/session/{self.session_id}{path}" if self.session_id else f"{self.base}{path}"
        response = self.http.request(method, url, json=body if body is not None else {}, timeout=60)
        value = response.json().get("value")
        if response.status_code != 200:
            raise WebDriverError(str(value.get("error")), str(value.get("message", ""))[:500])
        return value

    def open(self) -> None:
        args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={self.profile.name}",
            "--window-size=1200,900",
        ]
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
            "unhandledPromptBehavior": "ignore",  # an alert() stays open, so a test can see it
        }
        value = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})
        self.session_id = value["sessionId"]

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def find(self, css: str) -> Dict[str, str]:
        return self._call("POST", "/element", {"using": "css selector", "value": css})

    def find_all(self, css: str) -> List[Dict[str, str]]:
        return self._call("POST", "/elements", {"using": "css selector", "value": css})

    def click(self, element: Dict[str, str]) -> None:
        self._call("POST", f"/element/{element[ELEMENT]}/click")

    def displayed(self, element: Dict[str, str]) -> bool:
        return bool(self._call("GET", f"/element/{element[ELEMENT]}/displayed"))

    def rect(self, element: Dict[str, str]) -> Dict[str, float]:
        return self._call("GET", f"/element/{element[ELEMENT]}/rect")

    def text(self, element: Dict[str, str]) -> str:
        return self._call("GET", f"/element/{element[ELEMENT]}/text")

    def execute(self, script: str, *args: Any) -> Any:
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self) -> bytes:
        return base64.b64decode(self._call("GET", "/screenshot"))

    def alert_text(self) -> Optional[str]:
        """The text of an open alert/confirm/prompt dialog, or None when none is open."""
        try:
            return str(self._call("GET", "/alert/text"))
        except WebDriverError as exc:
            if exc.code == "no such alert":
                return None
            raise

    def console(self) -> List[Dict[str, Any]]:
        """Browser console entries since the last call (chromedriver's log endpoint)."""
        return self._call("POST", "/se/log", {"type": "browser"})

    def close(self) -> None:
        try:
            if self.session_id:
                self._call("DELETE", "")
        finally:
            self.session_id = None
            self.http.close()
            self.driver.terminate()
            try:
                self.driver.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
            self.profile.cleanup()


def start_browser() -> Browser:
    """Start chromedriver and one headless Chromium session; the caller must :meth:`Browser.close`."""
    port = _free_port()
    driver = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}", "--allowed-ips=127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    browser = Browser(driver, f"http://127.0.0.1:{port}", tempfile.TemporaryDirectory(prefix="agentcore-chrome-"))
    try:
        _wait_ready(browser)
        browser.open()
    except BaseException:
        browser.close()
        raise
    return browser


def _wait_ready(browser: Browser) -> None:
    """Poll ``/status`` until chromedriver answers (it starts in well under a second)."""
    deadline = time.monotonic() + 30
    while True:
        if browser.driver.poll() is not None:
            raise RuntimeError(f"chromedriver exited with status {browser.driver.returncode}")
        try:
            if browser.http.get(f"{browser.base}/status", timeout=2).json()["value"]["ready"]:
                return
        except (requests.RequestException, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("chromedriver did not become ready in 30 s")
        time.sleep(0.05)
