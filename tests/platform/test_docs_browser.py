"""/docs in a real browser: Debian's chromium, headless, driven by playwright, against the real
service on a live port (both databases). It renders the OpenAPI document, shows every tag and
operation, and Try it out imports the example save, whose bytes then come back as expected.

`make test` installs chromium where it is missing (as root). Where no browser can be installed
the test skips and says why, except under CI=true, where it fails.
"""

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.migrations import upgrade
from app.saves.api_docs import SAVE
from tests.conftest import IN_CI
from tests.platform.servers import Server, create_key_in, running

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# No first-run work, no network of the browser's own: the page talks to the service alone.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Where a run keeps its screenshots of /docs for people to look at (they are always taken on
# failure, into the test's tmp dir).
SCREENSHOTS = os.environ.get("CONTEXT_STORE_SCREENSHOTS")
# Generous: the page renders and executes in seconds, but CI machines can be busy.
TIMEOUT_MS = 120_000
IMPORT_SAVE = "Import an MDAN-AUTO save"
DOWNLOAD_SAVE = "Download a save"


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    message = (
        f"no chromium at {CHROMIUM}: `make test` installs Debian's chromium when run as root "
        "(apt-get install chromium); the /docs browser test needs it"
    )
    if IN_CI:
        pytest.fail("CI=true requires the browser test: " + message, pytrace=False)
    pytest.skip(message)


@pytest.fixture
def live_server(backend, tmp_path) -> Iterator[tuple[Server, str]]:
    database_url = backend.new_database_url()
    upgrade(database_url)
    key = create_key_in(database_url, "docs-browser")
    with running(database_url, tmp_path / "server.log") as server:
        yield server, key


@pytest.fixture
def page(tmp_path) -> Iterator[Any]:
    """A headless chromium page of Debian's chromium (never a browser of playwright's own)."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            browser_page = browser.new_page(viewport={"width": 1400, "height": 1000})
            browser_page.set_default_timeout(TIMEOUT_MS)
            yield browser_page
        finally:
            browser.close()


@contextmanager
def _screenshot_on_failure(page: Any, tmp_path: Path) -> Iterator[None]:
    """What the page showed when the test failed, kept as docs-failure.png in its tmp dir."""
    try:
        yield
    except BaseException:
        failure = tmp_path / "docs-failure.png"
        page.screenshot(path=str(failure), full_page=True)
        print(f"the page at the failure: {failure}")
        raise


def _keep(page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=False)


def _authorize(page, key: str) -> None:
    page.click("button.authorize")
    bearer = page.locator(".auth-container").filter(has_text="HTTPBearer")
    bearer.locator("input").fill(key)
    bearer.locator("button.authorize").click()
    page.click("button.btn-done")


def _operation(page, summary: str) -> Any:
    """The operation's block, found by the summary a person reads."""
    description = page.locator(".opblock-summary-description").get_by_text(summary, exact=True)
    return page.locator(".opblock").filter(has=description)


def _try_it_out(block: Any, **fields: str) -> Any:
    """Open the operation, Try it out with what the page offers (and ``fields`` typed into
    their parameters), Execute; the first live response row, once it is there."""
    block.locator(".opblock-summary").first.click()
    block.locator("button.try-out__btn").click()
    for name, value in fields.items():
        block.locator(f"tr[data-param-name='{name}'] input").fill(value)
    block.locator("button.execute").click()
    response = block.locator(".live-responses-table tr.response").first
    response.wait_for()
    return response


def test_docs_render_and_try_it_out_imports_the_example_save(live_server, page, tmp_path):
    server, key = live_server
    with _screenshot_on_failure(page, tmp_path):
        _render_and_import(server, key, page)


def _render_and_import(server: Server, key: str, page: Any) -> None:
    spec = httpx.get(server.url + "/openapi.json").json()
    page.goto(server.url + "/docs")
    page.wait_for_selector(".swagger-ui .opblock")
    assert page.locator(".swagger-ui .errors-wrapper").count() == 0, page.content()[:2000]

    for tag in spec["tags"]:
        section = page.locator(f".opblock-tag-section h3[data-tag='{tag['name']}']")
        assert section.is_visible(), tag["name"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            block = page.locator(f"[id$='-{operation['operationId']}']")
            assert block.count() == 1, (method, path)
            shown = block.locator(".opblock-summary-description").inner_text()
            assert shown == operation["summary"], (method, path, shown)
            assert block.locator(".opblock-summary-path").inner_text().replace("\u200b", "") == path
    _keep(page, "docs.png")

    _authorize(page, key)
    imported = _try_it_out(_operation(page, IMPORT_SAVE))
    assert imported.locator(".response-col_status").inner_text().strip() == "201"
    receipt = json.loads(imported.locator(".response-col_description pre").first.inner_text())
    imported.scroll_into_view_if_needed()
    _keep(page, "try-it-out.png")

    # The download through the page too, with the id the import answered.
    downloaded = _try_it_out(_operation(page, DOWNLOAD_SAVE), save_id=str(receipt["id"]))
    assert downloaded.locator(".response-col_status").inner_text().strip() == "200"

    # The bytes: MDAN-AUTO's own `json.dumps(save, indent=2)` of the example, whatever the page
    # sent on the wire (Swagger UI re-serialises the example it shows).
    stored = httpx.get(
        f"{server.url}/v1/projects/MyProject/saves/{receipt['id']}",
        headers={"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"},
    )
    assert stored.status_code == 200
    assert stored.content == json.dumps(SAVE, indent=2).encode()
