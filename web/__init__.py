"""The operator's web app: server-rendered pages on the store, served by the gateway at / (WebDAV
stays under /dav/, the JSON API under /api/).

A front end like dav_provider/ and fuse_mount/: it calls store/ and never runs SQL or imports
another front end. Pages work without JavaScript; web/static/app.js only enhances them. Nothing
happens at import; ``create_app`` wires the store in.
"""
from __future__ import annotations

import importlib

from flask import Flask, redirect

from store.access import Door
from store.db import Database

# One blueprint per area, each a module exposing ``bp``.
BLUEPRINTS = ("web.auth", "web.databases", "web.notes", "web.agents", "web.guilds", "web.runs")


def create_app(db: Database, *, door: Door | None = None) -> Flask:
    from web import errors, forms, security, templating

    app = Flask("hostfinder.web", root_path=__path__[0], static_folder="static", static_url_path="/static",
                template_folder="templates")
    app.extensions["hostfinder.db"] = db
    app.extensions["hostfinder.door"] = door or Door(db)
    # Templates are read once; static files may be cached briefly (they carry no secrets).
    app.config["SEND_FILE_MAX_AGE_DEFAULT"] = 300
    security.register(app)
    forms.register(app)  # (after the session's hook: a refused form's page shows who is signed in)
    errors.register(app)
    templating.register(app)
    # Browsers ask for /favicon.ico on pages without an icon link (a download, an error page).
    app.add_url_rule("/favicon.ico", "favicon", lambda: redirect("/static/favicon.svg", 301))
    for name in BLUEPRINTS:
        app.register_blueprint(importlib.import_module(name).bp)
    return app
