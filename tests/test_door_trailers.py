"""Trailer fields after a chunked body (RFC 9112 7.1.2) are read and dropped: the body is stored,
and the next request on the same connection is answered. Left unread, the first trailer line was
taken for the next request line (a 400 "Malformed Request-Line"), and that request got no answer."""
from __future__ import annotations

import socket

import requests

from tests.test_gateway_door import AUTH, _read_answers, address, status_of


def _answers(answer: bytes) -> list[tuple[int, bytes]]:
    """Each answer on the connection as (status, body), in order."""
    out = []
    rest = answer
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        out.append((status_of(head), rest[:length]))
        rest = rest[length:]
    return out


def test_a_chunked_put_with_trailers_is_stored_and_the_next_request_answered(server, boot) -> None:
    path = f"/dav/org/{boot['org_id']}/tr.md"
    put = (f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nTransfer-Encoding: chunked\r\n"
           "Trailer: X-Checksum\r\n\r\n").encode() + b"5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
    get = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(address(server), timeout=10) as s:
        s.sendall(put + get)   # pipelined: the GET right behind the trailers
        answers = _answers(_read_answers(s, 2))
    assert [status for status, _ in answers] == [201, 200], answers
    assert answers[1][1] == b"hello"
    r = requests.get(server.url + path, auth=(boot["email"], boot["password"]), timeout=10)
    assert r.status_code == 200 and r.content == b"hello"
    # Without trailers, as before: the empty line ending the body is read with it.
    put = (f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nTransfer-Encoding: chunked\r\n\r\n"
           ).encode() + b"3\r\nabc\r\n0\r\n\r\n"
    with socket.create_connection(address(server), timeout=10) as s:
        s.sendall(put + get)
        answers = _answers(_read_answers(s, 2))
    assert [status for status, _ in answers] == [204, 200] and answers[1][1] == b"abc", answers


def test_trailers_after_a_chunked_body_on_an_api_route_leave_the_connection_usable(server, boot) -> None:
    """The API's bodies go through the same guard: a task saved by a chunked PUT with trailers,
    then a GET of it on the same kept connection."""
    path = f"/api/agents/{boot['agent_id']}/task"
    body = b"# Sell\n"
    put = (f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nContent-Type: text/markdown\r\n"
           "Transfer-Encoding: chunked\r\n\r\n").encode() + b"%x\r\n%s\r\n0\r\nX-Checksum: abc\r\n\r\n" % (
               len(body), body)
    get = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\n\r\n".encode()
    with socket.create_connection(address(server), timeout=10) as s:
        s.sendall(put)
        first = _answers(_read_answers(s, 1))
        s.sendall(get)   # the same connection, once the PUT is answered
        second = _answers(_read_answers(s, 1))
    assert first[0][0] == 200, first
    assert second[0][0] == 200, second
    assert b"# Sell" in second[0][1]


def test_malformed_trailers_are_a_400_with_a_sentence_and_nothing_is_stored(server, boot) -> None:
    path = f"/dav/org/{boot['org_id']}/bad-trailer.md"
    put = (f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nTransfer-Encoding: chunked\r\n\r\n"
           ).encode() + b"5\r\nhello\r\n0\r\nX-Checksum: abc\nX-Other: 1\r\n\r\n"
    with socket.create_connection(address(server), timeout=10) as s:
        s.sendall(put)
        answer = _read_answers(s, 1)
    assert status_of(answer) == 400 and b"trailer fields" in answer, answer[:400]
    r = requests.get(server.url + path, auth=(boot["email"], boot["password"]), timeout=10)
    assert r.status_code == 404
