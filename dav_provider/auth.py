"""HTTP Basic login for /dav/ over the store's users (passwords or member tokens).

Basic only: the store keeps argon2 hashes, from which no digest response can be computed. The
authenticated principal goes into the WSGI environ for the provider."""
from __future__ import annotations

from typing import Any

from wsgidav.dav_error import ERROR_DESCRIPTIONS, DAVError
from wsgidav.dc.base_dc import BaseDomainController

from store.access import PRINCIPAL_KEY, Door
from store.errors import TooManyAttempts

# WsgiDAV knows no reason phrase for 429 and would send "429 Status".
ERROR_DESCRIPTIONS.setdefault(429, "429 Too Many Requests")


class StoreDomainController(BaseDomainController):
    def __init__(self, wsgidav_app: Any, config: dict[str, Any]) -> None:
        super().__init__(wsgidav_app, config)
        self.door: Door = config["hostfinder"]["door"]

    def __str__(self) -> str:
        return "StoreDomainController"

    def get_domain_realm(self, path_info: str, environ: dict[str, Any]) -> str:
        return "Host Finder"

    def require_authentication(self, realm: str, environ: dict[str, Any]) -> bool:
        return True

    def basic_auth_user(self, realm: str, user_name: str, password: str, environ: dict[str, Any]) -> bool:
        try:
            principal = self.door.basic(user_name, password, client=environ.get("REMOTE_ADDR"))
        except TooManyAttempts as exc:
            # Raised from inside WsgiDAV's authenticator, whose error printer answers it with the
            # sentence and the header; a 401 here would make clients ask for the password again.
            raise DAVError(429, context_info=exc.message,
                           add_headers=[("Retry-After", str(exc.retry_after))]) from None
        if principal is None or principal.kind != "user":
            return False
        environ[PRINCIPAL_KEY] = principal
        return True

    def supports_http_digest_auth(self) -> bool:
        return False
