"""The verifying front of the reference agent (tests/upstream/ref_agent.py) for the identity
end-to-end tests (tests/identity/README.md): an ASGI middleware that lets an A2A request
through only with valid credentials, and the test routes that show what reached the agent.

Stdlib + `cryptography` (already pinned in requirements.lock through a2a-sdk) only: JWTs are
verified here (RFC 7515 / 7519) rather than with a JWT library the venv does not have.

- JWT mode (`AuthGuard(jwt=JwtCheck(...))`): `Authorization: Bearer <JWT>`; the signature is
  checked against the JWKS fetched from its URL (cached; fetched again, at most once a second,
  for a kid it does not know, so a restarted issuer with a new key is picked up), `alg` from
  an allow-list (never `none` or HMAC), `exp` required and in the future, `nbf` if present,
  `aud` must hold the configured audience, `iss` and `scope` if configured. No leeway: a token
  is refused from its `exp` second on.
- Bearer-file mode: `Authorization: Bearer <the content of FILE>`, the file read again on
  every request (stripped of surrounding whitespace), so a rotated file is honoured at once.
- API-key-file mode: header `X-API-Key: <the content of FILE>`, read the same way.
A refusal is 401 with a JSON body {"error", "error_description"} and `WWW-Authenticate:
Bearer realm="ref-agent"` (RFC 6750 3: plus `error="invalid_token"` when a token was given
but is not valid; no error code when none was given).

Open paths: the agent card (GET /.well-known/agent-card.json, /.well-known/agent.json) and
the test routes under /_test/ (never behind auth):
- POST /_test/unauthorize?n=N: the next N guarded requests that would have passed are
  refused 401 ("forced"), as by an agent that revoked the token;
- GET /_test/seen: every request seen except /_test/ ones, oldest first, as JSON objects
  {"method", "path", "rpc" (the JSON-RPC method, or null), "status" (200 when let through,
  else 401), "reason" (why refused, or null), "auth" ("bearer", "api-key" or null), "token"
  (the bearer or key as sent, or null), "sub", "aud", "scope", "act" (claims of a valid JWT,
  else null)};
- DELETE /_test/seen: forgets them.
With a valid JWT the request's Starlette user is its `sub`, so the a2a-sdk's call context
(and its owner-scoped task store) sees the end user.
"""

import base64
import hmac
import json
import threading
import time
import urllib.parse
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from starlette.authentication import AuthCredentials, SimpleUser

# The paths anyone may read: the card (A2A 1.0 and the 0.3 legacy name).
OPEN_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
TEST_PREFIX = "/_test/"
API_KEY_HEADER = "X-API-Key"
REALM = "ref-agent"
# How much of a request body is read to name its JSON-RPC method in /_test/seen.
MAX_PEEK_BYTES = 1 << 20
# The most requests /_test/seen keeps (the oldest dropped).
SEEN_LIMIT = 10_000
# A JWKS response larger than this is refused; the fetch gives up after this many seconds.
MAX_JWKS_BYTES = 1 << 20
JWKS_TIMEOUT_S = 5
# A kid the cached JWKS does not know triggers a new fetch at most this often.
JWKS_REFETCH_S = 1.0

_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
ALLOWED_ALGS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


class InvalidToken(Exception):
    """A token that is not accepted; the message says why (no secret in it)."""


def b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def _int(data: str) -> int:
    return int.from_bytes(b64url(data), "big")


def public_key(jwk: dict):
    """The cryptography public key of an RSA or EC JWK."""
    if jwk.get("kty") == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
        curve = _CURVES[jwk["crv"]]()
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curve).public_key()
    raise InvalidToken(f"unsupported key type {jwk.get('kty')}")


def verify_signature(alg: str, key, signed: bytes, signature: bytes) -> None:
    digest = _HASHES[alg[2:]]()
    try:
        if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PKCS1v15(), digest)
        elif alg.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PSS(padding.MGF1(digest), digest.digest_size), digest)
        elif alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            # RFC 7518 3.4: r || s, each the curve's size.
            half = len(signature) // 2
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(digest))
        else:
            raise InvalidToken(f"alg {alg} does not fit the key")
    except InvalidSignature:
        raise InvalidToken("bad signature") from None


class Jwks:
    """The JWKS at a loopback URL, fetched on first use and again for an unknown kid."""

    def __init__(self, url: str):
        host = urllib.parse.urlsplit(url).hostname
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the JWKS must be on this machine, not {host}")
        self.url = url
        self.keys: list[dict] = []
        self.fetched_at = 0.0
        self.lock = threading.Lock()

    def _fetch(self) -> None:
        with urllib.request.urlopen(self.url, timeout=JWKS_TIMEOUT_S) as resp:
            body = resp.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise InvalidToken("JWKS too large")
        self.keys = json.loads(body).get("keys", [])
        self.fetched_at = time.monotonic()

    def candidates(self, kid: str | None) -> list[dict]:
        with self.lock:
            def matching():
                return [k for k in self.keys if kid is None or k.get("kid") == kid]

            found = matching()
            if not found and time.monotonic() - self.fetched_at >= JWKS_REFETCH_S:
                try:
                    self._fetch()
                except OSError as e:
                    raise InvalidToken(f"JWKS unavailable: {e.__class__.__name__}") from None
                found = matching()
            return found


class JwtCheck:
    """What a JWT must satisfy: signed by a key of `jwks`, for `audience`, unexpired."""

    def __init__(self, jwks: Jwks, audience: str, issuer: str | None = None, scope: str | None = None):
        self.jwks, self.audience, self.issuer, self.scope = jwks, audience, issuer, scope

    def verify(self, token: str) -> dict:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidToken("not a JWS compact token")
        try:
            header = json.loads(b64url(parts[0]))
            claims = json.loads(b64url(parts[1]))
            signature = b64url(parts[2])
        except ValueError:
            raise InvalidToken("malformed token") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise InvalidToken("malformed token")
        alg = header.get("alg")
        if alg not in ALLOWED_ALGS:
            raise InvalidToken(f"alg {alg} refused")
        keys = self.jwks.candidates(header.get("kid"))
        if not keys:
            raise InvalidToken("no key for this kid")
        signed = f"{parts[0]}.{parts[1]}".encode()
        last = None
        for jwk in keys:
            try:
                verify_signature(alg, public_key(jwk), signed, signature)
                break
            except InvalidToken as e:
                last = e
        else:
            raise last
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            raise InvalidToken("no exp")
        if now >= exp:
            raise InvalidToken("expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, (int, float)) and now < nbf:
            raise InvalidToken("not yet valid")
        aud = claims.get("aud")
        auds = aud if isinstance(aud, list) else [aud]
        if self.audience not in auds:
            raise InvalidToken("wrong audience")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise InvalidToken("wrong issuer")
        if self.scope is not None and self.scope not in str(claims.get("scope", "")).split():
            raise InvalidToken("insufficient scope")
        return claims


def read_secret(path: str) -> str:
    """The current content of a secret file (read on every request: it may be rotated)."""
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


async def _send_json(send, status: int, body, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            + (headers or []),
        }
    )
    await send({"type": "http.response.body", "body": data})


class AuthGuard:
    """ASGI middleware: the checks of the module docstring in front of `app`."""

    def __init__(self, app, jwt: JwtCheck | None = None, bearer_file: str | None = None, api_key_file: str | None = None):
        self.app = app
        self.jwt, self.bearer_file, self.api_key_file = jwt, bearer_file, api_key_file
        self.forced = 0
        self.seen: list[dict] = []

    def _remember(self, entry: dict) -> None:
        self.seen.append(entry)
        if len(self.seen) > SEEN_LIMIT:
            del self.seen[0]

    async def _test_route(self, scope, send) -> None:
        path, method = scope["path"], scope["method"]
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode())
        if path == "/_test/unauthorize" and method == "POST":
            self.forced += int(query.get("n", ["1"])[0])
            return await _send_json(send, 200, {"pending": self.forced})
        if path == "/_test/seen" and method == "GET":
            return await _send_json(send, 200, self.seen)
        if path == "/_test/seen" and method == "DELETE":
            self.seen.clear()
            return await _send_json(send, 200, [])
        return await _send_json(send, 404, {"error": "no such test route"})

    def _check(self, headers: dict) -> tuple[str | None, str | None, dict | None, str | None]:
        """(auth kind, token, JWT claims, refusal reason or None) of a request's headers."""
        authz = headers.get("authorization", "")
        scheme, _, token = authz.partition(" ")
        bearer = token.strip() if scheme.lower() == "bearer" and token.strip() else None
        if self.api_key_file is not None:
            key = headers.get(API_KEY_HEADER.lower())
            if key is None:
                return None, None, None, "missing"
            ok = hmac.compare_digest(key.encode(), read_secret(self.api_key_file).encode())
            return "api-key", key, None, None if ok else "wrong api key"
        if self.jwt is None and self.bearer_file is None:
            # No check configured (a TLS-only agent): everything passes, and is recorded.
            return ("bearer" if bearer else None), bearer, None, None
        if bearer is None:
            return None, None, None, "missing"
        if self.jwt is not None:
            try:
                return "bearer", bearer, self.jwt.verify(bearer), None
            except InvalidToken as e:
                return "bearer", bearer, None, str(e)
        ok = hmac.compare_digest(bearer.encode(), read_secret(self.bearer_file).encode())
        return "bearer", bearer, None, None if ok else "wrong bearer"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path.startswith(TEST_PREFIX):
            return await self._test_route(scope, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        receive, rpc = await _peek_rpc(scope, receive)
        entry = {"method": scope["method"], "path": path, "rpc": rpc}
        if path in OPEN_PATHS:
            auth, token, claims, reason = None, None, None, None
        else:
            auth, token, claims, reason = self._check(headers)
            if reason is None and self.forced > 0:
                self.forced -= 1
                reason = "forced"
        claims = claims or {}
        entry |= {
            "status": 401 if reason else 200,
            "reason": reason,
            "auth": auth,
            "token": token,
            "sub": claims.get("sub"),
            "aud": claims.get("aud"),
            "scope": claims.get("scope"),
            "act": claims.get("act"),
        }
        self._remember(entry)
        if reason:
            challenge = f'Bearer realm="{REALM}"'
            if reason != "missing":
                challenge += ', error="invalid_token"'
            return await _send_json(
                send,
                401,
                {"error": "invalid_token" if reason != "missing" else "unauthorized", "error_description": reason},
                [(b"www-authenticate", challenge.encode())],
            )
        if claims.get("sub"):
            scope = dict(scope, user=SimpleUser(claims["sub"]), auth=AuthCredentials(["authenticated"]))
        return await self.app(scope, receive, send)


async def _peek_rpc(scope, receive):
    """For a POST: the JSON-RPC method of its body (or None) and a `receive` replaying it."""
    if scope["method"] != "POST":
        return receive, None
    body, more = b"", True
    while more and len(body) <= MAX_PEEK_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return receive, None
        body += message.get("body", b"")
        more = message.get("more_body", False)
    rpc = None
    if not more:
        try:
            parsed = json.loads(body)
            rpc = parsed.get("method") if isinstance(parsed, dict) else None
        except ValueError:
            pass
    replayed = False

    async def replay():
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": more}

    return replay, rpc
