"""Bearer-token authentication: the service as an OAuth 2.0 resource server for one OpenID
issuer (docs/auth.md). keys.py fetches and caches the issuer's signing keys, verifier.py checks
a token's signature and claims, dependencies.py is what a route declares
(``dependencies=[require_scopes("items:write")]``)."""

from .dependencies import require_scopes
from .verifier import Principal

__all__ = ["Principal", "require_scopes"]
