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
IMPORT_SAVE = "import_save_v1_projects__project__saves_post"
EXPORT_SAVE = "export_save_v1_projects__project__saves__save_id__get"


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
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
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


def _try_it_out(page, operation_id: str) -> Any:
    """Open the operation, Try it out with what the page offers, Execute; the live response."""
    block = page.locator(f"[id$='-{operation_id}']")
    block.locator(".opblock-summary").first.click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    return block.locator(".live-responses-table")


def test_docs_render_and_try_it_out_imports_the_example_save(live_server, page, tmp_path):
    server, key = live_server
    with _screenshot_on_failure(page, tmp_path):
        _render_and_import(server, key, page)


def _render_and_import(server: Server, key: str, page: Any) -> None:
    spec = httpx.get(server.url + "/openapi.json").json()
    page.goto(server.url + "/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
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
    _keep(page, "docs.png")

    _authorize(page, key)
    imported = _try_it_out(page, IMPORT_SAVE)
    response = imported.locator("tr.response").first
    response.wait_for(timeout=30_000)
    status = response.locator(".response-col_status").inner_text().strip()
    assert status == "201", imported.inner_text()
    receipt = json.loads(response.locator(".response-col_description pre").first.inner_text())
    response.scroll_into_view_if_needed()
    _keep(page, "try-it-out.png")

    # The download through the page too: the save's id goes into the second operation's form.
    download = page.locator(f"[id$='-{EXPORT_SAVE}']")
    download.locator(".opblock-summary").first.click()
    download.locator("button.try-out__btn").click()
    download.locator("tr[data-param-name='save_id'] input").fill(str(receipt["id"]))
    download.locator("button.execute").click()
    shown = download.locator(".live-responses-table tr.response .response-col_status").first
    shown.wait_for(timeout=30_000)
    assert shown.inner_text().strip() == "200"

    # The bytes: MDAN-AUTO's own `json.dumps(save, indent=2)` of the example, whatever the page
    # sent on the wire (Swagger UI re-serialises the example it shows).
    stored = httpx.get(
        f"{server.url}/v1/projects/MyProject/saves/{receipt['id']}",
        headers={"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"},
    )
    assert stored.status_code == 200
    assert stored.content == json.dumps(SAVE, indent=2).encode()
