"""GET <note>?view=html: a note rendered for a phone's browser.

markdown-it-py with raw HTML disabled, so a note cannot inject markup; ![[display-path]] embeds are
shown as links to the embedded file's own view, not inlined."""
from __future__ import annotations

import html
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.token import Token

_md = MarkdownIt("commonmark", {"html": False})


def _split_embeds(token: Token, mount: str) -> list[Token]:
    out: list[Token] = []
    rest = token.content
    while (i := rest.find("![[")) >= 0 and (j := rest.find("]]", i + 3)) >= 0:
        target = rest[i + 3:j].strip().strip("/")
        if i:
            out.append(_text(rest[:i]))
        link = Token("link_open", "a", 1)
        link.attrs = {"href": f"{mount}/{quote(target)}?view=html", "class": "embed"}
        out += [link, _text(f"⧉ {target}"), Token("link_close", "a", -1)]
        rest = rest[j + 2:]
    if rest:
        out.append(_text(rest))
    return out


def _text(content: str) -> Token:
    t = Token("text", "", 0)
    t.content = content
    return t


def render_note(markdown: str, *, title: str, mount: str) -> bytes:
    """A standalone, mobile-friendly HTML page for one note."""
    tokens = _md.parse(markdown)
    for token in tokens:
        if token.type == "inline" and token.children:
            children: list[Token] = []
            for child in token.children:
                children += _split_embeds(child, mount) if child.type == "text" and "![[" in child.content else [child]
            token.children = children
    body = _md.renderer.render(tokens, _md.options, {})
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:46em;margin:1em auto;padding:0 1em;line-height:1.5}}
pre{{overflow:auto;background:#f4f4f4;padding:.5em}} a.embed{{font-weight:600}}</style></head>
<body><p><small>{html.escape(title)}</small></p>
{body}</body></html>
"""
    return page.encode("utf-8")
