"""``trio-mcp run/gateway -t http --auth-…``: the served endpoint as an
OAuth 2.1 resource server (:mod:`trio_mcp.auth.resource`).

One way to check tokens:

* ``--auth-jwks URL --auth-issuer ISSUER``: JWT access tokens signed by a key
  of that JWKS, issued by ``ISSUER``;
* ``--auth-key FILE.pem --auth-issuer ISSUER``: JWTs signed with that one
  key (a PEM public key or certificate);
* ``--auth-introspect URL``: token introspection (RFC 7662), as the client
  ``--auth-client-id`` whose secret is in the environment variable named by
  ``--auth-client-secret-env`` (never on the command line).

``--resource URL`` is the server's public URL, which tokens must name as
their audience (default: the URL served); ``--auth-audience`` adds an
accepted audience, ``--auth-scope`` a scope every request needs,
``--auth-server`` an authorization server to name in the metadata (default:
the issuer).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import attrs

__all__ = ["AuthOptions", "auth_options"]


def auth_options(parser: argparse.ArgumentParser) -> None:
    """The ``--auth-…`` options of a serving command."""
    group = parser.add_argument_group(
        "authorization (http): the server as an OAuth 2.1 resource server (README: Authorization)"
    )
    group.add_argument(
        "--auth-jwks", metavar="URL", help="check JWT access tokens with the keys of this JWKS"
    )
    group.add_argument("--auth-key", metavar="FILE.pem", help="check JWT access tokens with this public key")
    group.add_argument(
        "--auth-introspect", metavar="URL", help="check tokens at this introspection endpoint (RFC 7662)"
    )
    group.add_argument("--auth-issuer", metavar="ISSUER", help="the issuer (iss) tokens must come from")
    group.add_argument(
        "--resource",
        metavar="URL",
        help="this server's canonical URL, the audience tokens must name (default: the URL served)",
    )
    group.add_argument(
        "--auth-audience",
        action="append",
        default=[],
        metavar="AUD",
        help="another audience to accept (repeatable)",
    )
    group.add_argument(
        "--auth-scope", action="append", default=[], metavar="SCOPE", help="a scope every request needs"
    )
    group.add_argument(
        "--auth-server",
        action="append",
        default=[],
        metavar="URL",
        help="an authorization server to name in the metadata (repeatable; default: the issuer)",
    )
    group.add_argument(
        "--auth-algorithm",
        action="append",
        default=[],
        metavar="ALG",
        help="a JWT signature algorithm to accept (repeatable; default: RS*, PS*, ES*, EdDSA)",
    )
    group.add_argument(
        "--auth-leeway", type=float, default=30.0, metavar="SECONDS", help="clock skew allowed (default 30)"
    )
    group.add_argument("--auth-client-id", metavar="ID", help="the client id used for introspection")
    group.add_argument(
        "--auth-client-secret-env",
        metavar="VAR",
        help="the environment variable holding the introspection client's secret",
    )


@attrs.frozen(kw_only=True)
class AuthOptions:
    """What :func:`auth_options` read (None from :meth:`from_args` without a verifier)."""

    jwks: str | None = None
    key: str | None = None
    introspect: str | None = None
    issuer: str | None = None
    resource: str | None = None
    audiences: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = ()
    leeway: float = 30.0
    client_id: str | None = None
    client_secret_env: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AuthOptions | None:
        sources = [s for s in (args.auth_jwks, args.auth_key, args.auth_introspect) if s]
        others = (args.resource, args.auth_issuer, args.auth_scope, args.auth_audience, args.auth_server)
        if not sources:
            if any(others) or args.auth_client_id or args.auth_client_secret_env:
                raise SystemExit(
                    "trio-mcp: the --auth-… options need --auth-jwks, --auth-key or --auth-introspect"
                )
            return None
        if len(sources) > 1:
            raise SystemExit("trio-mcp: give one of --auth-jwks, --auth-key and --auth-introspect")
        if (args.auth_jwks or args.auth_key) and not args.auth_issuer:
            raise SystemExit("trio-mcp: --auth-jwks and --auth-key need --auth-issuer")
        if args.auth_introspect and (args.auth_client_id is None) != (args.auth_client_secret_env is None):
            raise SystemExit("trio-mcp: give both --auth-client-id and --auth-client-secret-env, or neither")
        return cls(
            jwks=args.auth_jwks,
            key=args.auth_key,
            introspect=args.auth_introspect,
            issuer=args.auth_issuer,
            resource=args.resource,
            audiences=tuple(args.auth_audience),
            scopes=tuple(args.auth_scope),
            servers=tuple(args.auth_server),
            algorithms=tuple(args.auth_algorithm),
            leeway=args.auth_leeway,
            client_id=args.auth_client_id,
            client_secret_env=args.auth_client_secret_env,
        )

    def resource_server(self) -> Any:
        """The :class:`~trio_mcp.auth.resource.ResourceServer` these options describe."""
        from ..auth.resource import IntrospectionVerifier, JwtVerifier, ResourceServer

        verifier: Any
        if self.introspect is not None:
            secret = None
            if self.client_secret_env is not None:
                secret = os.environ.get(self.client_secret_env)
                if secret is None:
                    raise SystemExit(
                        f"trio-mcp: the environment variable {self.client_secret_env} is not set"
                    )
            verifier = IntrospectionVerifier(
                self.introspect, client_id=self.client_id, client_secret=secret, issuer=self.issuer
            )
        else:
            options: dict[str, Any] = {"leeway": self.leeway}
            if self.algorithms:
                options["algorithms"] = self.algorithms
            if self.jwks is not None:
                options["jwks_url"] = self.jwks
            else:
                assert self.key is not None
                options["key"] = Path(self.key).read_bytes()
            assert self.issuer is not None
            verifier = JwtVerifier(self.issuer, **options)
        servers = self.servers or ((self.issuer,) if self.issuer else ())
        if not servers:
            raise SystemExit("trio-mcp: name the authorization server with --auth-server or --auth-issuer")
        return ResourceServer(
            verifier=verifier,
            resource=self.resource,
            authorization_servers=servers,
            required_scopes=self.scopes,
            audiences=self.audiences,
        )

    def describe(self) -> str:
        """One line for the start-up report."""
        source = self.jwks or self.key or f"introspection at {self.introspect}"
        line = f"authorization: bearer tokens checked with {source}"
        if self.issuer:
            line += f", issued by {self.issuer}"
        if self.scopes:
            line += f", scopes required: {' '.join(self.scopes)}"
        return line
