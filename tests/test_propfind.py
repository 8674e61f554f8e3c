"""The PROPFIND Depth 1 fast path (dav_provider/propfind.py) answers what WsgiDAV's generic path
answers: the same hrefs, the same properties with the same values and statuses, dead properties
and lock discovery included. Each request is sent twice to the same server, once with the fast
path and once with it switched off, and the two multistatus bodies are compared as XML."""
from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from conftest import insert_notes
from dav_provider import propfind

LOCK_BODY = (b'<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>'
             b'<D:locktype><D:write/></D:locktype><D:owner><D:href>mailto:ada@example.com</D:href></D:owner>'
             b'</D:lockinfo>')
PROPPATCH = ('<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x-tags"><D:set><D:prop>'
             '<Z:colour>{}</Z:colour></D:prop></D:set></D:propertyupdate>')
BODIES = {
    "no body (allprop)": None,
    "allprop": b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>',
    "named live": (b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getcontentlength/>'
                   b'<D:getlastmodified/><D:resourcetype/><D:getetag/><D:getcontenttype/><D:displayname/>'
                   b'<D:creationdate/></D:prop></D:propfind>'),
    "named locks and dead": (b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:x-tags"><D:prop>'
                             b'<D:lockdiscovery/><D:supportedlock/><Z:colour/><Z:missing/></D:prop></D:propfind>'),
}


def _canon(el: ET.Element) -> Any:
    text = (el.text or "").strip()
    if el.tag == "{DAV:}timeout" and text.startswith("Second-"):
        text = "Second-N"  # the lock's remaining seconds tick between the two requests
    return (el.tag, text, tuple(sorted(_canon(c) for c in el)))


def _responses(body: bytes) -> dict[str, dict[str, dict[str, Any]]]:
    """{href: {status: {property: canonical value}}}"""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for resp in ET.fromstring(body).findall("{DAV:}response"):
        href = resp.findtext("{DAV:}href")
        assert href not in out
        stats: dict[str, dict[str, Any]] = {}
        for ps in resp.findall("{DAV:}propstat"):
            status = ps.findtext("{DAV:}status")
            props = {p.tag: _canon(p) for p in ps.find("{DAV:}prop")}
            stats.setdefault(status, {}).update(props)
        out[href] = stats
    return out


def _compare(operator: Any, monkeypatch: Any, urls: list[str]) -> None:
    for url in urls:
        for label, body in BODIES.items():
            fast = operator.request("PROPFIND", url, headers={"Depth": "1"}, data=body)
            with monkeypatch.context() as m:
                m.setattr(propfind, "answer", lambda *args: None)
                generic = operator.request("PROPFIND", url, headers={"Depth": "1"}, data=body)
            assert fast.status_code == generic.status_code == 207, (url, label)
            assert fast.content.startswith(b'<?xml version="1.0" encoding="utf-8" ?>\n<D:multistatus'), \
                "the fast path answered"
            got, want = _responses(fast.content), _responses(generic.content)
            assert list(got) == list(want), (url, label)  # same hrefs, same order
            assert got == want, (url, label)
            assert fast.headers["Content-Type"] == generic.headers["Content-Type"]


def test_fast_path_answers_as_wsgidav_does(server, operator, boot, monkeypatch) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(server.db, org, "guild", guild, [f"# note {i}\n" for i in range(1, 41)])
    base = f"{server.url}/dav/org/{org}/guilds/{guild}"
    for name, data in (("a b (draft).md", b"spaces"), ("naïve café.md", "accents".encode()), ("c&d.md", b"amp")):
        assert operator.put(f"{base}/{name}", data=data).status_code == 201
    assert operator.put(f"{base}/._c&d.md", data=b"side file").status_code == 201  # the user's scratch
    # No lock and no dead property anywhere: the plain member form.
    _compare(operator, monkeypatch, [base + "/"])
    assert operator.request("PROPPATCH", f"{base}/n1.md", data=PROPPATCH.format("red &amp; blue")).status_code == 207
    assert operator.request("PROPPATCH", f"{base}/", data=PROPPATCH.format("folder")).status_code == 207
    assert operator.request("LOCK", f"{base}/n2.md", data=LOCK_BODY).status_code == 200
    agent_folder = f"{server.url}/dav/org/{org}/agents/{boot['agent_id']}"
    assert operator.put(f"{agent_folder}/mine.md", data=b"x").status_code == 201

    # With locks and dead properties somewhere in the tree (each member's properties and locks).
    _compare(operator, monkeypatch, [base + "/", agent_folder + "/", f"{server.url}/dav/org/{org}/"])
    hrefs = list(_responses(operator.request("PROPFIND", base + "/", headers={"Depth": "1"}).content))
    assert f"/dav/org/{org}/guilds/{guild}/a%20b%20(draft).md" in hrefs
    assert f"/dav/org/{org}/guilds/{guild}/na%C3%AFve%20caf%C3%A9.md" in hrefs
    assert len(hrefs) == 1 + 40 + 3 + 1


def test_what_the_fast_path_does_not_take_is_answered_as_before(server, operator, boot) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    base = f"{server.url}/dav/org/{org}/guilds/{guild}"
    assert operator.put(f"{base}/a.md", data=b"x").status_code == 201
    names = operator.request("PROPFIND", base + "/", headers={"Depth": "1"},
                             data=b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>')
    assert names.status_code == 207 and b"<D:multistatus" not in names.content
    # propname: each response names its properties, empty, with 200 (RFC 4918 9.1.4).
    listed = _responses(names.content)
    assert len(listed) == 2
    for href, stats in listed.items():
        assert list(stats) == ["HTTP/1.1 200 OK"], (href, stats)
        assert {"{DAV:}resourcetype", "{DAV:}getlastmodified", "{DAV:}lockdiscovery"} <= set(stats["HTTP/1.1 200 OK"])
        assert all(v[1:] == ("", ()) for v in stats["HTTP/1.1 200 OK"].values()), stats
    assert "{DAV:}getcontentlength" in listed[f"/dav/org/{org}/guilds/{guild}/a.md"]["HTTP/1.1 200 OK"]
    one = operator.request("PROPFIND", f"{base}/a.md", headers={"Depth": "1"})
    assert one.status_code == 207 and list(_responses(one.content)) == [f"/dav/org/{org}/guilds/{guild}/a.md"]
    bad = operator.request("PROPFIND", base + "/", headers={"Depth": "1"}, data=b"<not xml")
    assert bad.status_code == 400
    missing = operator.request("PROPFIND", f"{base}/nothing/", headers={"Depth": "1"})
    assert missing.status_code == 404
    other_org = operator.request("PROPFIND", f"{server.url}/dav/org/{org + 1000}/", headers={"Depth": "1"})
    assert other_org.status_code == 404
