"""Accept-Encoding read as RFC 9110 reads it; a gzip representation has an ETag of its own."""

import pytest

from tests.helpers import import_save, python_indent2, seed_save


def _many_saves(client, project: str) -> str:
    for day in range(1, 10):
        document = seed_save()
        document["timestamp"] = f"2024-01-0{day}T00:00:00Z"
        import_save(client, project, document)
    return f"/v1/projects/{project}/saves"


@pytest.mark.parametrize(
    "accept", ["gzip;q=0", "gzip;Q=0", "x-gzip;q=0", "*;q=0", "identity", "br", "gzip;q=0, *"]
)
def test_gzip_refused_by_the_client_is_not_sent(client, project, accept):
    url = _many_saves(client, project)
    response = client.get(url, headers={"Accept-Encoding": accept})
    assert response.status_code == 200
    assert "content-encoding" not in response.headers


@pytest.mark.parametrize("accept", ["gzip", "GZIP", "gzip;q=0.5", "br, gzip;q=0.1", "*", "x-gzip"])
def test_gzip_accepted_by_the_client_is_sent(client, project, accept):
    url = _many_saves(client, project)
    response = client.get(url, headers={"Accept-Encoding": accept})
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["vary"] == "Accept-Encoding"


def test_each_coding_has_its_own_etag_and_both_validate(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    url = f"/v1/projects/{project}/saves/{save_id}"
    # Big enough for the gzip layer to compress it.
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    zipped = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert plain.headers["etag"] != zipped.headers["etag"]
    assert zipped.headers["etag"] == plain.headers["etag"][:-1] + '-gzip"'
    assert zipped.headers["vary"] == "Accept-Encoding"
    for etag in (plain.headers["etag"], zipped.headers["etag"]):
        assert client.get(url, headers={"If-None-Match": etag}).status_code == 304
    resumed = client.post(f"{url}/resume", headers={"If-Match": zipped.headers["etag"]})
    assert resumed.status_code == 200


def test_a_stored_gzip_file_is_decompressed_for_an_identity_client(client, project):
    document = seed_save()
    document["context"]["artifacts"]["big"] = {"file": "b", "content": "x1y2z3" * 400_000}
    save_id = import_save(client, project, document).json()["id"]
    plain = client.get(f"/v1/projects/{project}/saves/{save_id}")
    assert "content-encoding" not in plain.headers
    assert plain.content == python_indent2(document)


def test_an_identity_response_long_enough_to_be_compressed_says_it_varies(client, project):
    """A cache must not hand a gzip client's representation to this one, or this one's to a
    gzip client: both name Accept-Encoding in Vary. A response too short to be compressed is
    the same for both, and does not."""
    url = _many_saves(client, project)
    listing = client.get(url, headers={"Accept-Encoding": "identity"})
    assert len(listing.content) >= 1024  # the gzip layer's minimum (the default settings)
    assert "content-encoding" not in listing.headers
    assert listing.headers["vary"] == "Accept-Encoding"
    short = client.get("/healthz", headers={"Accept-Encoding": "identity"})
    assert len(short.content) < 1024
    assert "vary" not in short.headers


def test_accept_encoding_sent_on_several_lines_is_one_list(client, project):
    url = _many_saves(client, project)
    lines = [("Accept-Encoding", "br"), ("Accept-Encoding", "gzip")]
    assert client.get(url, headers=lines).headers["content-encoding"] == "gzip"
    refused = [("Accept-Encoding", "br"), ("Accept-Encoding", "gzip;q=0")]
    assert "content-encoding" not in client.get(url, headers=refused).headers
