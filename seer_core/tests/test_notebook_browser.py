"""A person watching in JupyterLab (issue #22), in a real browser: Debian's chromium driven through
chromium-driver with Selenium. The browser opens ``session.notebook_url`` (``jupyter_url`` with the
notebook), sees the notebook, sees a cell another writer runs appear without reloading, and a cell
typed in the browser is read back by the session. A request without the token is refused.

Skips, saying why, where chromium, chromium-driver or Selenium is missing (``scripts/browser``
installs the browser; ``.ci/run`` calls it). The screenshot is kept as a test artefact:
``$SEER_TEST_ARTEFACTS`` (default ``bench-results/``)/jupyterlab.png, its path printed.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import browser as _browser
from _browser import until as _until
from _notebook_kit import local_sandbox
from seer import Sandbox
from seer.execution import create_notebook_session
from seer.notebook import JupyterClient, NotebookSession

pytest.importorskip("jupyter_server_ydoc")
pytest.importorskip("websocket")

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with local_sandbox(timeout=900, force=True) as box:
        yield box


def test_a_person_watches_and_writes_in_jupyterlab(sandbox: Sandbox, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    browser = _browser()
    session: NotebookSession = create_notebook_session(sandbox, name="watched", outputs_dir=tmp_path)
    shot = Path(os.environ.get("SEER_TEST_ARTEFACTS") or "bench-results").absolute() / "jupyterlab.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    try:
        session.exec("x = 41")
        browser.get(session.notebook_url)

        def cell_texts() -> list[str]:
            return [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")]

        _until("the notebook with the session's cell", lambda: any("x = 41" in t for t in cell_texts()))

        # Another writer runs a cell: it appears in the open tab, output and all, with no reload.
        marker = browser.execute_script("window.__seer_marker = 1; return window.__seer_marker;")
        session.exec("print('from the agent', x + 1)")
        _until("the agent's cell and its output", lambda: any("from the agent 42" in t for t in cell_texts()))
        assert browser.execute_script("return window.__seer_marker;") == marker, "the page was reloaded"

        # A person types a cell in the browser: the session reads it back.
        browser.find_element(By.CSS_SELECTOR, ".jp-Notebook-footer").click()  # "Click to add a cell."
        editor = _until(
            "a new cell to type in",
            lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell.jp-mod-active .cm-content"),
        )[0]
        _until("three cells", lambda: len(cell_texts()) == 3)
        editor.send_keys("typed_in_the_browser = 7")

        def typed() -> bool:
            return any(c["source"] == "typed_in_the_browser = 7" for c in session.cells)

        _until("the typed cell in the session's notebook", typed)
        browser.save_screenshot(str(shot))
        print(f"screenshot of JupyterLab: {shot}")
        assert shot.stat().st_size > 10_000

        # The agent's next cell does not overwrite it, and it reaches the saved notebook.
        session.exec("x * 2")
        session.flush()
        sources = [c["source"] for c in session.notebook["cells"]]
        assert sources == ["x = 41", "print('from the agent', x + 1)", "typed_in_the_browser = 7", "x * 2"]
        assert "typed_in_the_browser = 7" in sandbox.read_file(session.notebook_path)
    except BaseException:
        browser.save_screenshot(str(shot.with_name("jupyterlab-failed.png")))
        print(f"screenshot of JupyterLab when the test failed: {shot.with_name('jupyterlab-failed.png')}")
        raise
    finally:
        browser.quit()
        session.shutdown()


def test_jupyterlab_refuses_a_request_without_the_token(sandbox: Sandbox) -> None:
    client = JupyterClient.from_url(str(sandbox.jupyter_url))
    status, _ = client.request("GET", "/api/contents/notebooks", token="")
    assert status == 403
    status, _ = client.request("PUT", "/api/collaboration/session/notebooks/x.ipynb", {}, token="")
    assert status == 403
    # the page itself sends a browser without the token to the login form, not to JupyterLab
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(f"{client.url}/api/status"), timeout=30)
    assert refused.value.code == 403

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as moved:
        opener.open(f"{client.url}/lab/tree/notebooks", timeout=30)
    assert moved.value.code == 302 and "/login" in moved.value.headers["Location"]
    # and with the token it is JupyterLab
    page = urllib.request.urlopen(str(sandbox.jupyter_url).replace("/?", "/lab?"), timeout=30).read()
    assert b"<title>JupyterLab</title>" in page
