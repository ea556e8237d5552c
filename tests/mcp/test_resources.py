"""Every file a project holds is an MCP resource whose contents are, byte for byte, what the REST
export gives: the project's archive and the file's own route."""

import base64
import gzip
import logging
import secrets
from typing import Any

from mcp.client.session import ClientSession
from mcp_types import (
    BlobResourceContents,
    PaginatedRequestParams,
    Resource,
    TextResourceContents,
)

from app.archive.service import MEMBER_LIST, MEMBER_TYPES
from app.core.pagination import encode_position
from app.mcp_server import files
from app.mcp_server.server import _Position
from tests.helpers import python_indent2, seed_save, untar
from tests.mcp_client import session
from tests.platform.world import populate


def _bytes(contents: TextResourceContents | BlobResourceContents) -> bytes:
    if isinstance(contents, TextResourceContents):
        return contents.text.encode()
    return base64.b64decode(contents.blob)


async def _every_resource(client: ClientSession) -> list[Resource]:
    resources: list[Resource] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await client.list_resources(params=params)
        resources += page.resources
        if page.next_cursor is None:
            return resources
        cursor = page.next_cursor


def test_every_exported_file_is_a_resource_with_the_same_bytes(app, client, project):
    populate(client, project)
    second = f"{project}-2"
    assert client.put(
        f"/v1/projects/{second}/memory/running-summary", json={"content": "x"}
    ).is_success
    large = seed_save()  # over 1 MiB: stored, and archived, gzipped
    large["context"]["conversation_history"][0]["content"] = secrets.token_hex(600_000)
    stored = client.post(
        f"/v1/projects/{second}/saves",
        content=python_indent2(large),
        headers={"Content-Type": "application/json"},
    )
    assert stored.status_code == 201, stored.text
    key = client.headers["Authorization"].removeprefix("Bearer ")
    archives = {
        name: untar(client.get(f"/v1/projects/{name}/archive").content)
        for name in (project, second)
    }

    async def read_all(mcp: ClientSession) -> dict[str, Any]:
        listed = await _every_resource(mcp)
        return {
            str(resource.uri): (resource, (await mcp.read_resource(str(resource.uri))).contents)
            for resource in listed
        }

    read = session(app, key, read_all)
    # A gzipped save's resource is its JSON, as its route answers without gzip.
    expected = {
        f"context-store://{name}/{path.removesuffix('.gz')}": (
            gzip.decompress(content) if path.endswith(".json.gz") else content
        )
        for name, files in archives.items()
        for path, content in files.items()
    }
    assert set(read) == set(expected)
    assert len(archives[project]) >= 10  # one of everything: saves, agents, runs, features, memory
    assert any(path.endswith(".json.gz") for path in archives[second])  # a save kept gzipped
    for uri, (resource, contents) in read.items():
        assert len(contents) == 1 and _bytes(contents[0]) == expected[uri], uri
        assert contents[0].mime_type == resource.mime_type, uri


def test_the_templates_name_every_kind_of_file(app, client):
    key = client.headers["Authorization"].removeprefix("Bearer ")

    async def templates(mcp: ClientSession) -> list[str]:
        return [t.uri_template for t in (await mcp.list_resource_templates()).resource_templates]

    listed = session(app, key, templates)
    assert "context-store://{project}/features/{feature}/context.json" in listed
    assert "context-store://{project}/.atari/state.json" in listed
    assert "context-store://{project}/memory/agents/{agent}/working_context_snapshot.json" in listed
    assert "context-store://{project}/.autonomous/context/key-decisions.json" in listed
    assert "context-store://{project}/mdan/{save}.json" in listed


def test_a_project_named_with_a_colon_is_a_resource_that_reads_back(app, client, project):
    """A name may hold ':' (the identifier rule): in the URI's authority it must not be taken
    for a port."""
    name = f"{project}:x"
    summary = f"/v1/projects/{name}/memory/running-summary"
    assert client.put(summary, json={"content": "x"}).is_success
    key = client.headers["Authorization"].removeprefix("Bearer ")
    uri = f"context-store://{name}/.autonomous/context/running-summary.json"

    async def list_and_read(mcp: ClientSession) -> tuple[list[str], bytes]:
        listed = [str(resource.uri) for resource in await _every_resource(mcp)]
        (contents,) = (await mcp.read_resource(uri)).contents
        return listed, _bytes(contents)

    listed, read = session(app, key, list_and_read)
    assert uri in listed
    assert read == client.get(f"/v1/projects/{name}/memory/files/running-summary.json").content


def test_a_resource_of_another_tenant_or_of_no_file_is_not_found(
    app, client, other_client, project
):
    populate(client, project)
    key = other_client.headers["Authorization"].removeprefix("Bearer ")
    owner = client.headers["Authorization"].removeprefix("Bearer ")

    async def read(mcp: ClientSession, uri: str) -> str:
        try:
            await mcp.read_resource(uri)
        except Exception as error:  # the SDK raises the server's error
            return str(error)
        raise AssertionError(f"{uri} was read")

    stolen = session(
        app, key, lambda mcp: read(mcp, f"context-store://{project}/.atari/state.json")
    )
    assert "404" in stolen
    nothing = session(
        app, owner, lambda mcp: read(mcp, f"context-store://{project}/features/none/context.json")
    )
    assert "404" in nothing


def test_a_save_resource_is_read_with_two_requests_whatever_the_saves(app, client, project, caplog):
    """The save is found by its file name (`GET .../saves?filename=`), not by paging through
    every save of the project: one request to find it, one to export it."""
    stamps = [f"2024-01-0{day}T00:00:00Z" for day in range(1, 6)]
    for stamp in stamps:
        document = seed_save()
        document["timestamp"] = stamp
        assert client.post(
            f"/v1/projects/{project}/saves",
            content=python_indent2(document),
            headers={"Content-Type": "application/json"},
        ).is_success
    oldest = client.get(f"/v1/projects/{project}/saves", params={"limit": 500}).json()["items"][-1]
    expected = client.get(f"/v1/projects/{project}/saves/{oldest['id']}").content
    key = client.headers["Authorization"].removeprefix("Bearer ")
    caplog.set_level(logging.INFO, logger="context_store.access")
    caplog.clear()

    async def read(mcp: ClientSession) -> bytes:
        uri = f"context-store://{project}/mdan/{oldest['filename']}"
        (contents,) = (await mcp.read_resource(uri)).contents
        return _bytes(contents)

    assert session(app, key, read) == expected
    routes = [getattr(r, "route", None) for r in caplog.records if r.name == "context_store.access"]
    assert routes.count("/mcp") == 3  # initialize, its notification, the read
    assert [route for route in routes if route != "/mcp"] == [
        "/v1/projects/{project}/saves",
        "/v1/projects/{project}/saves/{save_id}",
    ]


def test_a_files_cursor_holds_for_its_own_project_only(app, client, tenant, project):
    """A listing's position names the project its files cursor belongs to: if that project is
    gone by the next page, the project listed instead starts at its first file, not at a
    stranger's place."""
    assert client.put(
        f"/v1/projects/{project}/memory/running-summary", json={"content": "x"}
    ).is_success
    first = client.get("/v1/projects", params={"limit": 1}).json()["items"][0]["name"]
    # Sealed as the archive's route seals its cursors, for this tenant's first project.
    seal = app.state.database.cursors
    past_every_path = encode_position(seal, MEMBER_LIST, (tenant, first), MEMBER_TYPES, ["~"])
    key = client.headers["Authorization"].removeprefix("Bearer ")

    def listed_after(owner: str) -> list[str]:
        """The first page of a listing resumed past every path of ``owner``'s files."""
        cursor = _Position(projects=None, project=owner, files=past_every_path).encode()

        async def page(mcp: ClientSession) -> list[str]:
            found = await mcp.list_resources(params=PaginatedRequestParams(cursor=cursor))
            return [str(resource.uri) for resource in found.resources]

        listed: list[str] = session(app, key, page)
        return listed

    assert listed_after(first) == []  # its own project: the cursor holds
    assert listed_after(f"{first}-gone")  # another's: the first project from its first file


def test_resources_are_listed_in_pages_without_building_the_archive(
    app, client, project, monkeypatch, caplog
):
    """A page holds at most PAGE_SIZE files of one project (the archive's members, listed
    without their contents); the pages together list every file."""
    populate(client, project)
    second = f"{project}-2"
    assert client.put(
        f"/v1/projects/{second}/memory/running-summary", json={"content": "x"}
    ).is_success
    monkeypatch.setattr(files, "PAGE_SIZE", 3)
    key = client.headers["Authorization"].removeprefix("Bearer ")
    caplog.set_level(logging.INFO, logger="context_store.access")

    async def pages(mcp: ClientSession) -> list[list[str]]:
        listed: list[list[str]] = []
        cursor: str | None = None
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await mcp.list_resources(params=params)
            listed.append([str(resource.uri) for resource in page.resources])
            if page.next_cursor is None:
                return listed
            cursor = page.next_cursor

    listed = session(app, key, pages)
    expected = {
        f"context-store://{name}/{path}"
        for name in (project, second)
        for path in untar(client.get(f"/v1/projects/{name}/archive").content)
    }
    assert sorted(uri for page in listed for uri in page) == sorted(expected)
    assert all(len(page) <= 3 for page in listed) and len(listed) >= 4
    for page in listed:  # one project a page
        assert len({uri.split("/")[2] for uri in page}) <= 1, page
    requested = [
        getattr(r, "route", None) for r in caplog.records if r.name == "context_store.access"
    ]
    assert "/v1/projects/{project}/archive/members" in requested
    assert requested.count("/v1/projects/{project}/archive") == 2  # this test's own two exports
