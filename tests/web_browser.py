"""The browser harness for the web app's tests: Debian's headless Chromium driven by Selenium
(/usr/bin/chromium through /usr/bin/chromedriver; nothing is downloaded), against the real gateway
and PostgreSQL of tests/conftest.py.

Every page the browser opens is checked for console errors (a CSP violation, a failing script, a
404 asset): any error fails the test. ``shot(label)`` saves a screenshot to tests/screenshots/.

``viewport(browser, width, height, mobile=)`` shows pages at another screen size for a while;
the ``phone`` (390 x 844) and ``desktop`` (1366 x 900) fixtures are the browser at those sizes.

Also ``web_login``: a requests session logged in through the login form, for asserting what
the pages do without a browser (statuses, headers, CSRF).
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import RunningServer

SHOTS = Path(__file__).resolve().parent / "screenshots"
# How long a page may take to arrive: a deadline, not a figure. Generous, because the suite's
# other tests (real mounts, PostgreSQL) share the two cores with Chromium.
WAIT = 30.0
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def web_login(server: RunningServer, email: str, password: str) -> requests.Session:
    """A requests session logged in through the login form (cookie session)."""
    s = requests.Session()
    r = s.post(server.url + "/login", data={"email": email, "password": password}, allow_redirects=False)
    assert r.status_code == 302, (r.status_code, r.text[:500])
    return s


def csrf_of(html: str) -> str:
    """The CSRF token a page carries (its meta tag)."""
    m = re.search(r'<meta name="csrf-token" content="([^"]+)"', html)
    assert m, "the page carries no CSRF token"
    return m.group(1)


class Browser:
    """One test's view of the shared Chromium: open pages, fill forms, take screenshots, and fail
    on any console error."""

    def __init__(self, driver: Any, base_url: str, name: str) -> None:
        from selenium.webdriver.common.by import By
        self.driver, self.base, self.name, self.By = driver, base_url, name, By
        self._shots = 0

    # --- pages ----------------------------------------------------------------------------------
    def open(self, path: str) -> Browser:
        self.driver.get(self.base + path)
        self.check_console()
        return self

    @property
    def path(self) -> str:
        url = self.driver.current_url
        return url[len(self.base):] if url.startswith(self.base) else url

    @property
    def source(self) -> str:
        return self.driver.page_source

    def find(self, css: str) -> Any:
        return self.driver.find_element(self.By.CSS_SELECTOR, css)

    def finds(self, css: str) -> list[Any]:
        return self.driver.find_elements(self.By.CSS_SELECTOR, css)

    def link(self, text: str) -> Any:
        return self.driver.find_element(self.By.LINK_TEXT, text)

    def button(self, text: str, within: Any = None) -> Any:
        """The visible button whose text is exactly ``text`` (one XPath query, so a page that
        is still settling cannot detach elements between a listing and a look)."""
        root = within or self.driver
        literal = "concat('" + text.replace("'", "', \"'\", '") + "', '')"
        xpath = f".//button[normalize-space()={literal}] | .//input[@type='submit' and @value={literal}]"
        for attempt in range(3):
            try:
                found = [b for b in root.find_elements(self.By.XPATH, xpath) if b.is_displayed()]
            except Exception:  # the page replaced the node while we looked: look again
                if attempt == 2:
                    raise
                continue
            if found:
                return found[0]
        raise AssertionError(f"no visible button {text!r} on {self.path}")

    def navigate(self, element: Any) -> None:
        """Click something that loads a new page and wait until the new page has replaced the old
        one (a click returns before the navigation ends)."""
        from selenium.common.exceptions import WebDriverException
        old = self.driver.find_element(self.By.TAG_NAME, "html")
        element.click()

        def replaced(_: Any) -> bool:
            # Chromium answers for a node of an unloaded page with "stale element" or, while
            # the new page settles, "Node ... does not belong to the document": both mean gone.
            try:
                old.is_enabled()
                return False
            except WebDriverException:
                return True
        self.wait(replaced)
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete")
        self.check_console()

    def press(self, text: str, within: Any = None) -> None:
        """Submit with the button reading ``text`` and wait for the answer page."""
        self.navigate(self.button(text, within))

    def follow(self, text: str) -> None:
        """Follow the link reading ``text`` and wait for the page."""
        self.navigate(self.link(text))

    def fill(self, fields: dict[str, str], within: Any = None) -> None:
        root = within or self.driver
        for name, value in fields.items():
            el = root.find_element(self.By.NAME, name)
            if el.tag_name == "select":
                from selenium.webdriver.support.ui import Select
                Select(el).select_by_value(value)
            elif el.get_attribute("type") == "checkbox":
                if el.is_selected() != bool(value):
                    el.click()
            else:
                el.clear()
                el.send_keys(value)

    def wait(self, condition: Any, timeout: float = WAIT) -> Any:
        """Ask ``condition`` until it holds. A live page (a table's grid) re-renders while the
        condition reads it: an element it found can be replaced before it reads its text, and
        the condition is then simply asked again, as for one not there yet."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait
        return WebDriverWait(self.driver, timeout,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition)

    def wait_for(self, css: str, timeout: float = WAIT) -> Any:
        return self.wait(lambda d: d.find_element(self.By.CSS_SELECTOR, css), timeout)

    def text(self) -> str:
        return self.find("body").text

    def login(self, email: str, password: str) -> None:
        self.open("/")
        self.fill({"email": email, "password": password})
        self.press("Log in")

    # --- proof ----------------------------------------------------------------------------------
    def shot(self, label: str) -> Path:
        SHOTS.mkdir(exist_ok=True)
        self._shots += 1
        path = SHOTS / f"{self.name}--{self._shots:02d}-{label}.png"
        self.driver.save_screenshot(str(path))
        return path

    def console_errors(self) -> list[str]:
        """SEVERE console entries, except Chromium's note that the page itself came with a 4xx
        status: a refused form is answered 401/422 on purpose (tests assert those statuses).
        A failing script, stylesheet, image or fetch still counts."""
        here = self.driver.current_url.split("#")[0]
        return [e["message"] for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"
                and not (e["message"].startswith(here + " - Failed to load resource: the server responded"))]

    def check_console(self) -> None:
        errors = self.console_errors()
        assert not errors, f"console errors on {self.path}: {errors}"


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium for the whole run (starting one per test would cost seconds each).
    Its temporary files go to a folder of the run's own (TMPDIR), removed after it: Chromium left
    a dozen socket folders in /tmp at every run otherwise."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    scratch = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--disable-extensions", "--no-first-run", "--lang=en-GB"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options,
                              service=Service(CHROMEDRIVER, env={**os.environ, "TMPDIR": str(scratch)}))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def browser(chromium: Any, server: RunningServer, request: pytest.FixtureRequest) -> Iterator[Browser]:
    """The shared Chromium with no cookies, pointed at this test's gateway. Fails the test on
    any console error left when it ends."""
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    chromium.get_log("browser")  # drop what an earlier test left
    b = Browser(chromium, server.url, re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name))
    yield b
    errors = b.console_errors()
    chromium.get("about:blank")
    assert not errors, f"console errors: {errors}"


# The screens the layout tests use: a phone as an iPhone shows it, and a reviewer's desktop window.
PHONE = (390, 844)
DESKTOP = (1366, 900)


@contextmanager
def viewport(browser: Browser, width: int, height: int, *, mobile: bool) -> Iterator[Browser]:
    """``browser`` showing pages at ``width`` x ``height`` CSS pixels (``mobile``: as a phone's
    browser lays them out) until the block ends."""
    browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
    try:
        yield browser
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.fixture
def phone(browser: Browser) -> Iterator[Browser]:
    """The browser on a phone-sized screen (PHONE)."""
    with viewport(browser, *PHONE, mobile=True) as b:
        yield b


@pytest.fixture
def desktop(browser: Browser) -> Iterator[Browser]:
    """The browser in a desktop window (DESKTOP)."""
    with viewport(browser, *DESKTOP, mobile=False) as b:
        yield b
