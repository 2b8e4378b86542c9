# SPDX-License-Identifier: MIT
"""The built documentation site, as a reader sees it.

Runs only on a built site: BARECUDA_SITE_DIR names its HTML folder (.ci/run builds
it with ``sphinx-build -W --keep-going -b html docs DIR`` and sets it).  Without it
every test here is skipped, with the reason.

- every internal link and picture of every page points at a file (and an anchor)
  that exists: the link check, limited to internal links (no network);
- the home page, an API page and a tutorial open in headless Chromium (Debian's
  ``chromium`` package, or $BARECUDA_CHROMIUM), driven through the DevTools
  protocol over a pipe (``--remote-debugging-pipe``: no extra Python package):
  each renders with its pictures (no broken image), its style sheets loaded, and
  no error on the console or in loading; a screenshot of each goes to
  $BARECUDA_SITE_SHOTS (default /tmp/barecuda-site-shots) for a person to look at,
  with the tutorial's timeline picture as drawn (tutorial-timeline.png).
"""

import base64
import html
import html.parser
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

SITE = os.environ.get("BARECUDA_SITE_DIR")
SHOTS = Path(os.environ.get("BARECUDA_SITE_SHOTS", "/tmp/barecuda-site-shots"))

pytestmark = pytest.mark.skipif(
    not SITE or not (Path(SITE) / "index.html").is_file(),
    reason="the site is not built: build it (sphinx-build -b html docs DIR) and set "
           "BARECUDA_SITE_DIR=DIR")

PAGES = {
    "home": "index.html",
    "api": "reference/gpuarray.html",
    "tutorial": "tutorials/03_streams_events.html",
}


# ------------------------------------------------------------- internal links

class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("canonical",)):
                self.refs.append((tag, a[key]))


def _parse(path, cache={}):
    if path not in cache:
        p = _Links()
        p.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = p
    return cache[path]


def test_internal_links_and_pictures_resolve():
    root = Path(SITE).resolve()
    pages = sorted(root.rglob("*.html"))
    assert len(pages) > 20
    bad = []
    checked = 0
    for page in pages:
        for tag, ref in _parse(page).refs:
            url = urllib.parse.urlsplit(ref)
            if url.scheme or ref.startswith("//") or ref.startswith("data:"):
                continue        # external (not checked here) or inline
            target = page if not url.path else (page.parent / urllib.parse.unquote(url.path))
            target = target.resolve()
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.exists():
                bad.append(f"{page.relative_to(root)}: <{tag}> {ref}: no such file")
                continue
            if url.fragment and target.suffix == ".html" and tag == "a":
                if url.fragment not in _parse(target).ids:
                    bad.append(f"{page.relative_to(root)}: {ref}: no anchor #{url.fragment}")
    assert checked > 100
    assert not bad, "\n".join(bad[:40])


# ------------------------------------------------------------- the API reference

def _reference_entries():
    """Every object entry of the API reference: ids such as barecuda.driver.mem_alloc."""
    ids = set()
    for page in sorted((Path(SITE).resolve() / "reference").glob("*.html")):
        ids |= {i for i in _parse(page).ids if i.startswith("barecuda.")}
    return ids


def test_every_public_name_has_an_entry_in_the_reference():
    """Each public module's public names (its __all__, else its names without an
    underscore) that are barecuda's own have an entry: on the module's page, or, for
    one re-exported from another public module, on that one's.  autodoc leaves out
    what a module imports unless the object names the module as its __module__: the C
    functions of barecuda.driver (barecuda._driver's) and the pools re-exported by
    barecuda.tools were missing until they named their faces."""
    import importlib
    import inspect

    import barecuda
    entries = _reference_entries()
    modules = [*barecuda.PUBLIC_MODULES, "barecuda.trace"]
    missing = []
    for modname in modules:
        module = importlib.import_module(modname)
        names = getattr(module, "__all__", None) or [n for n in vars(module)
                                                     if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            home = getattr(obj, "__module__", None) or ""
            if inspect.ismodule(obj) or not (home.startswith("barecuda") or callable(obj)):
                continue        # numpy, the standard library, constants
            if not home.startswith("barecuda"):
                continue
            if f"{modname}.{name}" in entries or (home in modules and f"{home}.{name}" in entries):
                continue
            missing.append(f"{modname}.{name} (__module__ {home})")
    assert not missing, f"{len(missing)} public names have no entry: " + ", ".join(missing[:30])


def _entry_signature(page, anchor):
    text = (Path(SITE).resolve() / "reference" / page).read_text(encoding="utf-8")
    start = text.index(f'id="{anchor}"')
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text[start:text.index("</dt>", start)]))
                    .split())


def test_the_driver_signatures_come_from_the_type_stub():
    """The C functions' and types' entries show the stub's types (barecuda/_driver.pyi),
    and the page lists the aliases those use."""
    mem_alloc = _entry_signature("driver.html", "barecuda.driver.mem_alloc")
    assert "nbytes : _Int ) → DeviceAllocation" in mem_alloc, mem_alloc
    stream = _entry_signature("driver.html", "barecuda.driver.Stream")
    assert "flags : _Int = 0" in stream, stream
    method = _entry_signature("driver.html", "barecuda.driver.Event.time_since")
    assert "event : Event ) → float" in method, method
    page = (Path(SITE).resolve() / "reference" / "driver.html").read_text(encoding="utf-8")
    assert "_DevicePointer" in page and "any object with .gpudata" in page


def _entry_body(page, anchor):
    """The text of the first paragraph of an API entry (after its signature and
    the "Bases:" line of a class)."""
    text = (Path(SITE).resolve() / "reference" / page).read_text(encoding="utf-8")
    start = text.index("</dt>", text.index(f'id="{anchor}"'))
    while True:
        end = text.index("</p>", start)
        para = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text[start:end])).split())
        if not para.startswith("Bases:"):
            return para
        start = end + 4


def test_entries_do_not_repeat_their_call_form():
    """Docstrings that open with the call form for help() (`GPUArray(shape, dtype,
    ...)`, `all(stream=None, allocator=None): whether ...`) show the typed signature
    once: the call form is gone, the words after it open the entry."""
    first = _entry_body("gpuarray.html", "barecuda.gpuarray.GPUArray")
    assert first.startswith("An array of shape and dtype in device memory"), first
    method = _entry_body("gpuarray.html", "barecuda.gpuarray.GPUArray.all")
    assert method.startswith("Whether every element is true"), method
    # a C function's entry keeps its docstring as it is (the stub gives its signature)
    assert not _entry_body("driver.html", "barecuda.driver.mem_alloc").startswith("mem_alloc(")


# ------------------------------------------------------------- the browser

def _chromium():
    for name in (os.environ.get("BARECUDA_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class DevTools:
    """Headless Chromium, driven over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, exe, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="barecuda-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire():     # in the child: the pipe ends at fds 3 (commands) and 4 (replies)
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
             "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
             "--allow-file-access-from-files", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            # close_fds runs after preexec_fn: 3 and 4 must be kept by number, or the
            # child starts with the two ends wire() placed there already closed.
            preexec_fn=wire, pass_fds=(3, 4, to_child_r, from_child_w),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._replies = {}
        self._events = queue.Queue()
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.width, self.height = width, height

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[None] = "closed"
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._events.put(msg)

    def send(self, method, params=None, session=None, timeout=60):
        self._next += 1
        mid = self._next
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                if None in self._replies:
                    raise RuntimeError("chromium closed the pipe")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply to {method} in {timeout} s")
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def events(self):
        out = []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def wait_event(self, method, session, timeout=60):
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            seen.append(msg)
            if msg.get("method") == method and msg.get("sessionId") == session:
                for m in seen:
                    self._events.put(m)
                return
        for m in seen:
            self._events.put(m)
        raise TimeoutError(f"no {method} in {timeout} s")

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:   # noqa: BLE001
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        pytest.skip("no headless Chromium (apt-get install chromium, or set BARECUDA_CHROMIUM)")
    b = DevTools(exe)
    try:
        b.send("Browser.getVersion", timeout=60)
    except Exception as exc:   # noqa: BLE001
        b.close()
        pytest.skip(f"Chromium did not start: {exc}")
    yield b
    b.close()


CHECK_PAGE = r"""
(async () => {
  await Promise.all([...document.images].map(i => i.decode().catch(() => null)));
  await document.fonts.ready;
  const imgs = [...document.images];
  const links = [...document.querySelectorAll('link[rel="stylesheet"]')];
  return {
    title: document.title,
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src),
    sheets: links.length,
    unloaded: links.filter(l => !l.sheet).map(l => l.href),
    styled: getComputedStyle(document.body).fontFamily,
    svgs: document.querySelectorAll('svg').length,
    apiEntries: document.querySelectorAll('dl.py').length,
    height: document.documentElement.scrollHeight,
    text: document.body.innerText.length,
  };
})()
"""


# The page box of the first picture whose alt text contains a word, with a margin for
# the text around it; null when none is drawn (no width or height).
FIND_PICTURE = r"""
(() => {
  const img = [...document.images].find(i => i.alt.toLowerCase().includes(%s));
  if (!img) return null;
  const r = img.getBoundingClientRect();
  if (!(r.width > 0 && r.height > 0)) return null;
  const m = 24;
  return {x: Math.max(0, r.left + window.scrollX - m), y: Math.max(0, r.top + window.scrollY - m),
          width: r.width + 2 * m, height: r.height + 2 * m};
})()
"""


def _open(browser, url, picture=None):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target,
                                                     "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable", session=session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": browser.width, "height": browser.height, "deviceScaleFactor": 1,
                  "mobile": False}, session=session)
    browser.events()
    browser.send("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired", session)
    result = browser.send("Runtime.evaluate", {"expression": CHECK_PAGE, "awaitPromise": True,
                                               "returnByValue": True}, session=session)
    info = result["result"]["value"]
    time.sleep(0.3)     # late console messages
    problems = []
    for ev in browser.events():
        if ev.get("sessionId") != session:
            continue
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                   for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            problems.append("exception: " + params["exceptionDetails"].get("text", "")
                            + " " + str(params["exceptionDetails"].get("exception", {})
                                        .get("description", "")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            problems.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(f"loading failed: {params.get('errorText')}")
    shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
    figure = None
    if picture:     # the first picture whose alt text has this word, as it is drawn
        found = browser.send("Runtime.evaluate", {"expression": FIND_PICTURE % json.dumps(picture),
                                                  "returnByValue": True}, session=session)
        box = found["result"].get("value")
        if box:
            clip = dict(box, scale=1)
            figure = base64.b64decode(browser.send(
                "Page.captureScreenshot",
                {"format": "png", "clip": clip, "captureBeyondViewport": True},
                session=session)["data"])
    browser.send("Target.closeTarget", {"targetId": target})
    return info, problems, base64.b64decode(shot["data"]), figure


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_in_chromium(browser, name):
    path = Path(SITE).resolve() / PAGES[name]
    assert path.is_file(), path
    picture = "timeline" if name == "tutorial" else None
    info, problems, png, figure = _open(browser, path.as_uri(), picture)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{name}.png"
    shot.write_bytes(png)
    if picture:
        assert figure is not None, f"no picture with {picture!r} in its alt text is drawn"
        (SHOTS / f"{name}-{picture}.png").write_bytes(figure)
        assert figure[:8] == b"\x89PNG\r\n\x1a\n" and len(figure) > 10_000, \
            f"blank picture {SHOTS / f'{name}-{picture}.png'}"
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, f"blank screenshot {shot}"
    assert not problems, "\n".join(problems)
    assert not info["broken"], f"broken images: {info['broken']}"
    assert info["sheets"] >= 2 and not info["unloaded"], f"style sheets not loaded: {info}"
    assert "serif" in info["styled"] and "Times" not in info["styled"].split(",")[0], info
    assert info["text"] > 500, info
    if name == "home":
        assert "barecuda" in info["title"] and info["images"] >= 1, info
    elif name == "api":
        assert info["apiEntries"] > 20, info        # autodoc's class and function entries
    else:
        assert info["images"] >= 1, info            # the timeline picture
        assert "Streams" in info["title"], info
