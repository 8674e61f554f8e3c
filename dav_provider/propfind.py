"""PROPFIND Depth: 1 of a folder, answered without WsgiDAV's generic property path.

A client listing a folder of 10 000 notes spent most of its time in WsgiDAV building an element
tree (ten properties per member, each through get_property_value, get_ref_url and a quote) and
then serialising it. Here the same answer is written as text from the folder's one listing
(HostTree.list, which keeps the tree's rules: layout, hidden files, side files), the folder's dead
properties (one query, PgPropertyManager: the shared ones, and this user's own side files' only)
and the locks on it and its members (one query, PgLockStorage), with the same properties and
values WsgiDAV gives, in the same order.

Only the common case is taken: Depth 1 on an existing folder, no If headers, a body that is empty,
<allprop/>, or <prop> naming only properties listed in LIVE or dead (non-DAV:) properties.
Anything else (<propname/>, <include>, quota properties, a file, Depth 0, a malformed body)
returns None, and WsgiDAV's own path answers it exactly as before, errors included."""
from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from xml.sax.saxutils import escape

from wsgidav import util, xml_tools

from dav_provider.resources import FolderResource

if TYPE_CHECKING:
    from dav_provider.provider import HostDAVProvider

# WsgiDAV's get_href leaves these unquoted (Nautilus chokes on '%28').
HREF_SAFE = "/" + "!*'()," + "$-_|."
# The live properties answered here, in WsgiDAV's allprop order.
LIVE = ("{DAV:}resourcetype", "{DAV:}creationdate", "{DAV:}getcontentlength", "{DAV:}getcontenttype",
        "{DAV:}getlastmodified", "{DAV:}displayname", "{DAV:}getetag", "{DAV:}lockdiscovery",
        "{DAV:}supportedlock")
LOCK_PROPS = ("{DAV:}lockdiscovery", "{DAV:}supportedlock")
MAX_BODY = 64 * 1024
SUPPORTED_LOCK = ("<D:supportedlock><D:lockentry><D:lockscope><D:exclusive /></D:lockscope><D:locktype>"
                  "<D:write /></D:locktype></D:lockentry><D:lockentry><D:lockscope><D:shared /></D:lockscope>"
                  "<D:locktype><D:write /></D:locktype></D:lockentry></D:supportedlock>")
OK, NOT_FOUND = "200 OK", "404 Not Found"


def answer(provider: HostDAVProvider, environ: dict[str, Any],
           start_response: Callable[..., Any]) -> Iterable[bytes] | None:
    """The multistatus for a Depth 1 PROPFIND of a folder, or None to let WsgiDAV answer."""
    if environ.get("HTTP_DEPTH", "").strip() != "1" or any(
            k in environ for k in ("HTTP_IF", "HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH",
                                   "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_UNMODIFIED_SINCE")):
        return None
    body = _read_body(environ)
    if body is None:
        return None
    names = _requested(body)  # () for allprop, None when not ours
    if names is None:
        return None
    folder = provider.get_resource_inst(environ["PATH_INFO"], environ)
    if not isinstance(folder, FolderResource):
        return None
    members = folder.get_member_list()  # one listing; StoreError -> DAVError as on WsgiDAV's path
    writer = _Writer(provider, environ, folder)
    parts = ['<?xml version="1.0" encoding="utf-8" ?>\n<D:multistatus xmlns:D="DAV:">']
    folder_href = folder.get_href()
    parts.append(writer.response(folder, folder_href, names))
    for res in members:
        href = folder_href + quote(res.name, safe=HREF_SAFE) + ("/" if res.is_collection else "")
        parts.append(writer.response(res, href, names))
    parts.append("</D:multistatus>")
    data = "".join(parts).encode("utf-8")
    start_response("207 Multi-Status", [("Content-Type", "application/xml; charset=utf-8"),
                                        ("Date", util.get_rfc1123_time()),
                                        ("Content-Length", str(len(data)))])
    return [data]


_NAME_REQUEST = b'<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:name/></D:propfind>'


def propname_for_wsgidav(environ: dict[str, Any]) -> None:
    """A <D:propname/> PROPFIND, as WsgiDAV 4.4 reads it: it looks for <D:name/> (request_server.
    do_PROPFIND), so a propname request otherwise got responses with no properties and no status
    (RFC 4918 9.1.4 and 14.24). Hand it the element it reads; its answer is then the names."""
    body = _read_body(environ)
    if not body or b"propname" not in body:
        return
    try:
        root = xml_tools.string_to_xml(body)
    except Exception:  # WsgiDAV answers a malformed body with its own 400
        return
    if root is not None and root.tag == "{DAV:}propfind" and [c.tag for c in root] == ["{DAV:}propname"]:
        environ["wsgi.input"] = io.BytesIO(_NAME_REQUEST)
        environ["CONTENT_LENGTH"] = str(len(_NAME_REQUEST))


def _read_body(environ: dict[str, Any]) -> bytes | None:
    """The request body, put back for WsgiDAV should it answer after all; None when too large
    or of unknown length (WsgiDAV's path handles those)."""
    length = environ.get("CONTENT_LENGTH", "").strip()
    if not length:
        if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
            return None
        return b""
    if not length.isdigit() or int(length) > MAX_BODY:
        return None
    body = environ["wsgi.input"].read(int(length)) if int(length) else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _requested(body: bytes) -> tuple[str, ...] | None:
    """() for allprop, the property names of a <prop> request, or None for anything else."""
    if not body.strip():
        return ()
    try:
        root = xml_tools.string_to_xml(body)
    except Exception:  # WsgiDAV answers a malformed body with its own 400
        return None
    if root is None or root.tag != "{DAV:}propfind" or len(root) != 1:
        return None
    mode = root[0]
    if mode.tag == "{DAV:}allprop" and len(mode) == 0:
        return ()
    if mode.tag != "{DAV:}prop" or len(mode) == 0:
        return None
    names = tuple(child.tag for child in mode)
    if any(not isinstance(n, str) or (n.startswith("{DAV:}") and n not in LIVE) for n in names):
        return None
    return names


class _Writer:
    """One <D:response> per resource, as util.add_property_response would build it."""

    def __init__(self, provider: HostDAVProvider, environ: dict[str, Any], folder: FolderResource) -> None:
        self.provider = provider
        self.environ = environ
        self.folder = folder
        self.locks = provider.lock_manager
        self.props = provider.prop_manager
        # The leases on the folder and its members are read once (PgLockStorage: the request's
        # focus), not the whole organisation's; with none, no member needs a lock lookup of its own.
        self.any_locks = bool(self.locks) and self.locks.storage.listing_has_locks(folder.get_ref_url())

    def response(self, res: Any, href: str, names: tuple[str, ...]) -> str:
        ref = res.get_ref_url()
        dead = self.props.get_properties(ref, self.environ) if self.props else []
        if not names:
            if not dead and not self.any_locks and not res.is_collection and self.locks \
                    and not res.prevent_locking() and res.get_etag() is not None:
                return self._plain_file(res, href)  # the common member, written in one go
            names = self._allprop_names(res, dead)
        groups: dict[str, list[str]] = {}
        for name in names:
            status, xml = self._property(res, ref, name)
            groups.setdefault(status, []).append(xml)
        out = [f"<D:response><D:href>{escape(href)}</D:href>"]
        for status, props in groups.items():
            out.append(f"<D:propstat><D:prop>{''.join(props)}</D:prop>"
                       f"<D:status>HTTP/1.1 {status}</D:status></D:propstat>")
        out.append("</D:response>")
        return "".join(out)

    def _plain_file(self, res: Any, href: str) -> str:
        """allprop of a lockable file with no lock and no dead property: the same elements as
        _allprop_names then _property give, in the same order."""
        return (f"<D:response><D:href>{escape(href)}</D:href><D:propstat><D:prop><D:resourcetype />"
                f"<D:creationdate>{util.get_rfc3339_time(res.get_creation_date())}</D:creationdate>"
                f"<D:getcontentlength>{res.get_content_length()}</D:getcontentlength>"
                f"<D:getcontenttype>{escape(res.get_content_type())}</D:getcontenttype>"
                f"<D:getlastmodified>{util.get_rfc1123_time(res.get_last_modified())}</D:getlastmodified>"
                f"{_text('displayname', res.get_display_name())}"
                f"{_text('getetag', res.get_property_value('{DAV:}getetag'))}"
                f"<D:lockdiscovery />{SUPPORTED_LOCK}</D:prop><D:status>HTTP/1.1 200 OK</D:status>"
                "</D:propstat></D:response>")

    def _allprop_names(self, res: Any, dead: list[str]) -> tuple[str, ...]:
        # DAVResource.get_property_names(is_allprop=True) for a Node-backed resource.
        names = ["{DAV:}resourcetype", "{DAV:}creationdate"]
        if not res.is_collection:
            names += ["{DAV:}getcontentlength", "{DAV:}getcontenttype"]
        names += ["{DAV:}getlastmodified", "{DAV:}displayname"]
        if res.get_etag() is not None:
            names.append("{DAV:}getetag")
        if self.locks and not res.prevent_locking():
            names += LOCK_PROPS
        return tuple(names + dead)

    def _property(self, res: Any, ref: str, name: str) -> tuple[str, str]:
        """(status, the property's XML) as DAVResource.get_property_value decides it."""
        if name == "{DAV:}resourcetype":
            return OK, ("<D:resourcetype><D:collection /></D:resourcetype>" if res.is_collection
                        else "<D:resourcetype />")
        if name == "{DAV:}lockdiscovery" and self.locks:
            return OK, self._lockdiscovery(ref) if self.any_locks else "<D:lockdiscovery />"
        if name == "{DAV:}supportedlock" and self.locks:
            return OK, SUPPORTED_LOCK
        if name.startswith("{DAV:}"):
            value = self._live(res, name)
            if value is None:
                return NOT_FOUND, f"<D:{name[6:]} />"
            return OK, _text(name[6:], value)
        stored = self.props.get_property(ref, name, self.environ) if self.props else None
        if stored is None:
            return NOT_FOUND, _empty(name)
        return OK, _fragment(xml_tools.string_to_xml(stored))

    @staticmethod
    def _live(res: Any, name: str) -> str | None:
        if name == "{DAV:}creationdate":
            created = res.get_creation_date()
            return None if created is None else util.get_rfc3339_time(created)
        if name == "{DAV:}getlastmodified":
            modified = res.get_last_modified()
            return None if modified is None else util.get_rfc1123_time(modified)
        if name == "{DAV:}getcontentlength":
            return None if res.is_collection else str(res.get_content_length())
        if name == "{DAV:}getcontenttype":
            return None if res.is_collection else res.get_content_type()
        if name == "{DAV:}getetag":  # the resource's own answer: the quoted ETag header value
            return res.get_property_value(name) if res.get_etag() is not None else None
        if name == "{DAV:}displayname":
            return res.get_display_name()
        return None

    def _lockdiscovery(self, ref: str) -> str:
        locks = self.locks.get_url_lock_list(ref)
        if not locks:
            return "<D:lockdiscovery />"
        out = ["<D:lockdiscovery>"]
        for lock in locks:
            timeout = "Infinite" if lock["timeout"] < 0 else f"Second-{int(lock['expire'] - time.time())}"
            owner = _fragment(xml_tools.string_to_xml(lock["owner"])) if lock["owner"] else ""
            root = self.provider.get_resource_inst(self.provider.ref_url_to_path(lock["root"]), self.environ)
            out.append(f"<D:activelock><D:locktype><D:{lock['type']} /></D:locktype>"
                       f"<D:lockscope><D:{lock['scope']} /></D:lockscope><D:depth>{escape(lock['depth'])}</D:depth>"
                       f"{owner}<D:timeout>{timeout}</D:timeout>"
                       f"<D:locktoken><D:href>{escape(lock['token'])}</D:href></D:locktoken>"
                       f"<D:lockroot><D:href>{escape(root.get_href())}</D:href></D:lockroot></D:activelock>")
        out.append("</D:lockdiscovery>")
        return "".join(out)


def _text(local: str, value: str) -> str:
    """A DAV: element holding text; empty text is an empty element, as ElementTree writes it."""
    return f"<D:{local}>{escape(value)}</D:{local}>" if value else f"<D:{local} />"


def _empty(clark: str) -> str:
    """An empty element for a property in any namespace, declaring it locally."""
    if not clark.startswith("{"):
        return f"<{clark} />"
    ns, _, local = clark[1:].partition("}")
    return f'<X:{local} xmlns:X="{escape(ns, {chr(34): "&quot;"})}" />'


def _fragment(element: Any) -> str:
    """An element (as xml_tools parsed it: lxml or ElementTree) as self-contained XML text, its
    namespaces declared on it."""
    return xml_tools.etree.tostring(element, encoding="unicode")
