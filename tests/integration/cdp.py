"""Headless Chromium driven through the DevTools protocol, standard library only.

Chromium speaks the protocol over a pipe as well as a websocket
(--remote-debugging-pipe: commands in on fd 3, replies and events out on
fd 4, each message JSON ended by a NUL byte), which needs no websocket
client: this is the same protocol, minus the framing.

    with Browser(chromium, workdir) as b:
        page = b.open("http://127.0.0.1:8080/")
        page.wait_for("window.cohortDashboard && window.cohortDashboard.ready", timeout=30)
        print(page.evaluate("document.title"))
        page.screenshot("out.png")

Every wait is bounded; a reply that does not come in time raises
BrowserError. close() kills Chromium's whole process group.
"""

import base64
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time

COMMAND_TIMEOUT_S = 30.0


class BrowserError(Exception):
    pass


def find_chromium(given=None):
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, chromium, workdir, width=1400, height=1000):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
        self.stderr_path = os.path.join(workdir, "chromium.stderr")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        args = ["--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--hide-scrollbars",
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                f"--window-size={width},{height}", f"--user-data-dir={self.profile}", "about:blank"]
        with open(self.stderr_path, "wb") as err:
            # The shell puts the pipes on the descriptors Chromium reads and writes.
            self.proc = subprocess.Popen(
                ["sh", "-c", f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w}', chromium, *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                pass_fds=(to_child_r, from_child_w), start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id = 0
        self._lock = threading.Lock()
        self._waiting = {}  # id -> queue for its reply
        self.events = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                data = json.loads(message)
                if "id" in data:
                    with self._lock:
                        waiter = self._waiting.pop(data["id"], None)
                    if waiter is not None:
                        waiter.put(data)
                else:
                    self.events.put(data)
        with self._lock:
            for waiter in self._waiting.values():
                waiter.put({"error": {"message": "Chromium closed the pipe"}})
            self._waiting.clear()

    def send(self, method, params=None, session=None, timeout=COMMAND_TIMEOUT_S):
        with self._lock:
            self._next_id += 1
            message_id = self._next_id
            reply = queue.Queue()
            self._waiting[message_id] = reply
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._to_child, json.dumps(message).encode() + b"\0")
        except OSError as e:
            raise BrowserError(f"{method}: cannot write to Chromium ({e}); {self.stderr_tail()}") from None
        try:
            data = reply.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no reply within {timeout} s; {self.stderr_tail()}") from None
        if "error" in data:
            raise BrowserError(f"{method}: {data['error'].get('message')}; {self.stderr_tail()}")
        return data.get("result", {})

    def open(self, url, width=1400, height=1000):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send("Page.enable")
        page.send("Runtime.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": url})
        return page

    def stderr_tail(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return "chromium stderr: " + f.read().decode(errors="replace")[-1500:]
        except OSError:
            return ""

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    def __init__(self, browser, session):
        self.browser = browser
        self.session = session

    def send(self, method, params=None, timeout=COMMAND_TIMEOUT_S):
        return self.browser.send(method, params, self.session, timeout)

    def evaluate(self, expression, timeout=COMMAND_TIMEOUT_S):
        """The value of a JavaScript expression (awaited if it is a promise), as JSON."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"{expression[:80]!r}: {text}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout, what=None):
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{what or expression!r} not true within {timeout} s")
            time.sleep(0.1)

    def screenshot(self, path, clip=None):
        """A PNG of the whole page (or of clip {x, y, width, height}) into path."""
        params = {"format": "png", "captureBeyondViewport": True}
        if clip is None:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            clip = {"x": 0, "y": 0, "width": size[0], "height": size[1]}
        params["clip"] = dict(clip, scale=1)
        data = self.send("Page.captureScreenshot", params, timeout=60)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
