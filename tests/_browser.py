"""A real browser for tests: Debian's chromium, driven through chromium-driver with Selenium.

:func:`browser` skips the test, saying why, where chromium, chromium-driver or Selenium is missing
(``scripts/browser`` installs the browser; ``.ci/run`` calls it). Screenshots are test artefacts:
:func:`artefact` gives their path under ``$SEER_TEST_ARTEFACTS`` (default ``bench-results/``).

:func:`check_code_server` is what a person does with ``debug=True`` (issue #28), on any provider:
open ``code_server_url``, be refused without the password, log in, and see the working
directory's file in VS Code.
"""

from __future__ import annotations

import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: How long the browser may take to show something (a first load on a loaded machine).
SLOW = 120.0


def browser() -> Any:
    """A headless chromium (the caller quits it), or a skip saying what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no chromium and chromium-driver here (scripts/browser installs them, as root)")
    pytest.importorskip("selenium", reason="selenium is not installed (the dev group has it)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


def until(what: str, check: Callable[[], Any], timeout: float = SLOW) -> Any:
    """``check()``'s first truthy result, polling; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except Exception:  # the page is still changing under us
            got = None
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"the browser never showed {what} within {timeout:g}s")
        time.sleep(0.25)


def artefact(name: str) -> Path:
    """Where a test keeps ``name`` (a screenshot) for people to look at."""
    path = Path(os.environ.get("SEER_TEST_ARTEFACTS") or "bench-results").absolute() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def assert_gone(port: int) -> None:
    """Nothing listens on 127.0.0.1:``port`` any more (a sandbox's code-server after teardown)."""
    import socket

    with socket.socket() as sock, pytest.raises(OSError):
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


def check_code_server(url: str, password: str, filename: str, text: str, screenshot: str) -> Path:
    """A person opens ``url`` (``sandbox.code_server_url``): without the password every page is
    the login form (over HTTP and in the browser, a wrong password included); with it, VS Code
    shows ``filename`` from the working directory and opens it, ``text`` in the editor. Returns the
    screenshot's path."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    # Without the password: the editor is never served, every page sends to the login form.
    opener = urllib.request.build_opener(_NoRedirect)
    for path in ("/", "/?folder=/", "/vscode-remote-resource?path=/etc/passwd", "/proxy/1/"):
        base = urllib.parse.urlsplit(url)
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(f"{base.scheme}://{base.netloc}{path}", timeout=30)
        assert refused.value.code in (302, 401, 403), (path, refused.value.code)
        if refused.value.code == 302:
            assert "/login" in refused.value.headers["Location"], path

    shot = artefact(screenshot)
    driver = browser()
    try:
        driver.get(url)
        field = until("code-server's login form", lambda: driver.find_element(By.NAME, "password"))
        assert not driver.find_elements(By.CSS_SELECTOR, ".monaco-workbench")
        field.send_keys("not-the-password" + Keys.ENTER)
        until("the wrong password refused", lambda: "Incorrect password" in driver.page_source)
        assert not driver.find_elements(By.CSS_SELECTOR, ".monaco-workbench")

        driver.find_element(By.NAME, "password").send_keys(password + Keys.ENTER)
        until("the VS Code workbench", lambda: driver.find_elements(By.CSS_SELECTOR, ".monaco-workbench"))
        item = until(
            f"{filename} in the explorer",
            lambda: [
                e for e in driver.find_elements(By.CSS_SELECTOR, ".explorer-folders-view .monaco-list-row")
                if e.text.strip() == filename
            ],
        )[0]  # fmt: skip
        item.click()
        until(f"{filename} open in an editor", lambda: driver.title.startswith(filename))

        def shown() -> str:
            lines = driver.find_elements(By.CSS_SELECTOR, ".editor-instance .view-lines")
            return " ".join(e.text for e in lines).replace("\u00a0", " ")

        until(f"{text!r} in the editor", lambda: text in shown())
        if filename.endswith(".py"):  # VS Code's own Python support (colours, the language mode)
            until(
                "the Python language mode",
                lambda: "Python" in driver.find_element(By.ID, "status.editor.mode").text,
            )
        driver.save_screenshot(str(shot))
        print(f"screenshot of VS Code (code-server): {shot}")
        assert shot.stat().st_size > 10_000
    except BaseException:
        failed = shot.with_name(shot.stem + "-failed.png")
        driver.save_screenshot(str(failed))
        print(f"screenshot of code-server when the test failed: {failed}")
        raise
    finally:
        driver.quit()
    return shot
