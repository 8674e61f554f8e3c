"""WsgiDAV's own refusals carry a sentence too (a door review found them bare): a 405 names the
methods that are answered and has the Allow header RFC 9110 requires; a refusal that names a
precondition (RFC 4918's DAV:error body) says in words what it means and what would work, in an
element of Host Finder's own that clients which do not know it ignore."""
from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

import pytest
import requests

from tests.test_dav import Dav

NS = {"d": "DAV:", "hf": "urn:x-hostfinder"}
METHODS = "OPTIONS, GET, HEAD, PUT, DELETE, PROPFIND, PROPPATCH, MKCOL, COPY, MOVE, LOCK, UNLOCK"


@pytest.fixture
def dav(server: Any, operator: requests.Session, boot: dict[str, Any]) -> Dav:
    return Dav(server, operator, boot)


def message(r: requests.Response, condition: str) -> str:
    """The sentence of a DAV:error body naming ``condition``."""
    error = ET.fromstring(r.content)
    assert error.tag == "{DAV:}error" and error.find(f"d:{condition}", NS) is not None, r.text
    return error.findtext("hf:message", namespaces=NS) or ""


@pytest.mark.parametrize("method", ["FOO", "PATCH", "TRACE", "SEARCH", "REPORT"])
def test_a_method_not_answered_is_a_405_naming_those_that_are(dav: Dav, method: str) -> None:
    dav.put(f"{dav.g}/m.md", "x")
    r = dav.req(method, f"{dav.g}/m.md")
    assert r.status_code == 405
    assert r.headers["Allow"] == METHODS
    assert f"{method} is not a method this WebDAV server answers; it answers {METHODS}" in r.text


def test_mkcol_where_something_is_says_so_with_allow(dav: Dav) -> None:
    r = dav.req("MKCOL", f"{dav.g}/")
    assert r.status_code == 405 and r.headers["Allow"] == METHODS
    assert "MKCOL can only be executed on an unmapped URL" in r.text   # (WsgiDAV's own sentence, kept)


def test_propfind_of_infinite_depth_says_to_list_a_folder_at_a_time(dav: Dav) -> None:
    for headers in ({"Depth": "infinity"}, {}):
        r = dav.req("PROPFIND", f"{dav.g}/", headers=headers)
        assert r.status_code == 403
        assert message(r, "propfind-finite-depth") == ("PROPFIND with Depth: infinity is not supported; list one"
                                                       " folder at a time with Depth: 1")


def test_unlock_with_a_token_of_no_lock_here_says_which_token_works(dav: Dav) -> None:
    dav.put(f"{dav.g}/u.md", "x")
    r = dav.req("UNLOCK", f"{dav.g}/u.md", headers={"Lock-Token": "<opaquelocktoken:not-a-lock>"})
    assert r.status_code == 409
    assert message(r, "lock-token-matches-request-uri").startswith(
        "the Lock-Token header names no lock on this resource: UNLOCK the URL the lock is on")
