// The OAuth2 authorization server of the identity end-to-end tests (tests/identity/README.md):
// oauth2-mock-server 9.3.0 (its issuer, key store, JWKS, discovery and token endpoint) behind a
// small front that adds what a real server does and the mock leaves out:
// - client authentication on every token request (RFC 6749 section 2.3.1: client_secret_basic,
//   client_secret_post; RFC 7523 section 2.2 / OIDC Core section 9: private_key_jwt), a wrong
//   client answered 401 `invalid_client` (RFC 6749 section 5.2);
// - access tokens with a short, configurable lifetime, `aud` from `audience` / `resource`
//   (RFC 8693 section 2.1, RFC 8707), set through the mock's own hooks (BeforeTokenSigning,
//   BeforeResponse) on its client_credentials and password grants;
// - RFC 8693 token exchange (the mock has no such grant): the subject token's signature and
//   expiry verified against this server's own keys plus `--subject-jwks-file`, the minted token
//   carries the subject's `sub` and an `act` claim naming the client (section 4.1);
// - test controls: GET /stats (token requests per grant), POST /admin/down (the token endpoint
//   refuses), POST /admin/mint (a signed token with any claims), a signing key kept in
//   `--key-file` across restarts on the same `--port`.
//
// Usage: node oauth_server.mjs [--port 0] [--parent-pid PID] [--key-file FILE]
//   [--expires-in SECONDS] [--client-id ID] [--client-secret SECRET]
//   [--client-public-key FILE] [--subject-jwks-file FILE]
// Prints exactly one line "READY <issuer>" on stdout once it listens on 127.0.0.1 (the
// convention of tests/peer_serve.py); the issuer is "http://127.0.0.1:<port>".
// Nothing secret (secrets, assertions, tokens) is printed or put into /stats.

import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';

import { createLocalJWKSet, decodeProtectedHeader, importJWK, importSPKI, jwtVerify } from 'jose';
import { Events, OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';

const GRANT_CLIENT_CREDENTIALS = 'client_credentials';
const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
// RFC 8693 section 3: the token types a subject token may be given as here.
const SUBJECT_TOKEN_TYPES = new Set([
  'urn:ietf:params:oauth:token-type:jwt',
  'urn:ietf:params:oauth:token-type:access_token',
  'urn:ietf:params:oauth:token-type:id_token',
]);
const ISSUED_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const ASYMMETRIC_ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
/** A token request body larger than this is refused (413). */
const MAX_BODY_BYTES = 64 * 1024;
/** How many token requests GET /stats lists (the oldest dropped). */
const LOG_LIMIT = 500;
/** The body of the `huge` outage mode: larger than any sane token response bound. */
const HUGE_BYTES = 8 * 1024 * 1024;

const { values: opts } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'parent-pid': { type: 'string', default: '0' },
    'key-file': { type: 'string' },
    'expires-in': { type: 'string', default: '60' },
    'client-id': { type: 'string', default: 'agui-gateway' },
    'client-secret': { type: 'string' },
    'client-public-key': { type: 'string' },
    'subject-jwks-file': { type: 'string' },
  },
});

let expiresIn = Number(opts['expires-in']);
const clientId = opts['client-id'];
const clientSecret = opts['client-secret'];
const clientKeyText = opts['client-public-key'] ? readFileSync(opts['client-public-key'], 'utf8') : undefined;
const subjectJwks = opts['subject-jwks-file'] ? JSON.parse(readFileSync(opts['subject-jwks-file'], 'utf8')).keys : [];

const issuer = new OAuth2Issuer();
const service = new OAuth2Service(issuer);

// The signing key: kept in --key-file so that a restarted server signs with the same key (the
// agent's cached JWKS stays right); generated and written there on the first start.
const keyFile = opts['key-file'];
if (keyFile && existsSync(keyFile)) {
  await issuer.keys.add(JSON.parse(readFileSync(keyFile, 'utf8')));
} else {
  const jwk = await issuer.keys.generate('RS256');
  if (keyFile) writeFileSync(keyFile, JSON.stringify(jwk), { mode: 0o600 });
}

// ---- statistics (GET /stats) ----
const stats = { total: 0, requests: {}, issued: {}, refused: {}, log: [] };
function resetStats() {
  Object.assign(stats, { total: 0, requests: {}, issued: {}, refused: {}, log: [] });
}
function bump(map, key) {
  map[key] = (map[key] ?? 0) + 1;
}
/** Records one token request, what it asked for and how it ended; never a secret. */
function record(entry) {
  stats.log.push({ at: new Date().toISOString(), ...entry });
  if (stats.log.length > LOG_LIMIT) stats.log.shift();
  if (entry.status === 200) bump(stats.issued, entry.grant_type);
  else bump(stats.refused, entry.error ?? String(entry.status));
}

// ---- outages (POST /admin/down) ----
let down = null; // { mode, until (ms epoch or Infinity) }
function outage() {
  if (down && Date.now() >= down.until) down = null;
  return down;
}

// ---- helpers ----
class OAuthError extends Error {
  constructor(status, error, description, headers = {}) {
    super(description);
    Object.assign(this, { status, error, headers });
  }
}

function sendJson(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    Pragma: 'no-cache',
    ...headers,
  });
  res.end(text);
}

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new OAuthError(413, 'invalid_request', 'request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** A form body as name -> value, or name -> [values] for a repeated name (resource, audience). */
function parseForm(raw) {
  const out = {};
  for (const [k, v] of new URLSearchParams(raw.toString('utf8'))) {
    if (k in out) out[k] = [].concat(out[k], v);
    else out[k] = v;
  }
  return out;
}

function single(body, name) {
  const v = body[name];
  if (Array.isArray(v)) throw new OAuthError(400, 'invalid_request', `${name} given more than once`);
  return v;
}

function list(v) {
  return v === undefined ? [] : [].concat(v);
}

/** `aud` for a token asked for with `audience` and/or `resource` (RFC 8693 2.1, RFC 8707 2). */
function audienceOf(body) {
  const all = [...list(body.audience), ...list(body.resource)];
  if (all.length === 0) return undefined;
  return all.length === 1 ? all[0] : all;
}

function sameSecret(given, expected) {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** RFC 6749 2.3.1: the client id and secret are form-encoded before the Basic encoding. */
function parseBasic(header) {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!m) return undefined;
  const text = Buffer.from(m[1], 'base64').toString('utf8');
  const at = text.indexOf(':');
  if (at < 0) return undefined;
  const decode = (s) => decodeURIComponent(s.replace(/\+/g, ' '));
  try {
    return { id: decode(text.slice(0, at)), secret: decode(text.slice(at + 1)) };
  } catch {
    return undefined;
  }
}

const tokenEndpoint = () => `${issuer.url}/token`;

/** jti values of client assertions seen, until their exp (RFC 7523 3: replay refused). */
const seenJtis = new Map();

async function verifyClientAssertion(assertion) {
  if (!clientKeyText) throw new OAuthError(401, 'invalid_client', 'private_key_jwt is not configured');
  let alg;
  try {
    alg = decodeProtectedHeader(assertion).alg;
  } catch {
    throw new OAuthError(401, 'invalid_client', 'client_assertion is not a JWT');
  }
  if (!ASYMMETRIC_ALGS.includes(alg)) throw new OAuthError(401, 'invalid_client', `client_assertion alg ${alg} refused`);
  let key;
  try {
    key = clientKeyText.trimStart().startsWith('{')
      ? await importJWK(JSON.parse(clientKeyText), alg)
      : await importSPKI(clientKeyText, alg);
  } catch {
    throw new OAuthError(401, 'invalid_client', `client_assertion alg ${alg} does not fit the client's key`);
  }
  let payload;
  try {
    // RFC 7523 3: iss and sub are the client id, aud identifies this server (its token
    // endpoint, or its issuer), exp is required; OIDC Core 9 requires jti too.
    ({ payload } = await jwtVerify(assertion, key, {
      algorithms: [alg],
      issuer: clientId,
      subject: clientId,
      audience: [tokenEndpoint(), issuer.url],
      requiredClaims: ['exp', 'jti'],
    }));
  } catch (e) {
    throw new OAuthError(401, 'invalid_client', `client_assertion refused: ${e.code ?? 'invalid'}`);
  }
  const now = Date.now() / 1000;
  for (const [jti, exp] of seenJtis) if (exp < now) seenJtis.delete(jti);
  if (seenJtis.has(payload.jti)) throw new OAuthError(401, 'invalid_client', 'client_assertion replayed (jti seen)');
  seenJtis.set(payload.jti, payload.exp);
}

/**
 * Authenticates the client of a token request; returns how. Exactly one method may be used
 * (RFC 6749 2.3); a failure is 401 invalid_client, with a Basic challenge when the client
 * tried Basic (RFC 6749 5.2).
 */
async function authenticateClient(req, body) {
  const basic = parseBasic(req.headers.authorization);
  const methods = [basic, body.client_secret, body.client_assertion].filter((m) => m !== undefined);
  if (methods.length > 1) throw new OAuthError(400, 'invalid_request', 'more than one client authentication method');
  const bodyId = single(body, 'client_id');
  if (basic) {
    const challenge = { 'WWW-Authenticate': 'Basic realm="oauth_server"' };
    if (basic.id !== clientId || !clientSecret || !sameSecret(basic.secret, clientSecret)) {
      throw new OAuthError(401, 'invalid_client', 'client authentication failed', challenge);
    }
    return { client_id: clientId, auth_method: 'client_secret_basic' };
  }
  if (body.client_assertion !== undefined) {
    if (single(body, 'client_assertion_type') !== ASSERTION_TYPE) {
      throw new OAuthError(401, 'invalid_client', 'unsupported client_assertion_type');
    }
    if (bodyId !== undefined && bodyId !== clientId) throw new OAuthError(401, 'invalid_client', 'unknown client');
    await verifyClientAssertion(single(body, 'client_assertion'));
    return { client_id: clientId, auth_method: 'private_key_jwt' };
  }
  if (body.client_secret !== undefined) {
    if (bodyId !== clientId || !clientSecret || !sameSecret(single(body, 'client_secret'), clientSecret)) {
      throw new OAuthError(401, 'invalid_client', 'client authentication failed');
    }
    return { client_id: clientId, auth_method: 'client_secret_post' };
  }
  throw new OAuthError(401, 'invalid_client', 'client authentication required');
}

/** The keys a subject token may be signed with: this server's own, and --subject-jwks-file's. */
function subjectKeys() {
  return createLocalJWKSet({ keys: [...issuer.keys.toJSON(), ...subjectJwks] });
}

/** RFC 8693 2.1-2.2: the exchange itself, minted here with the mock's issuer. */
async function exchange(body, client) {
  const subjectToken = single(body, 'subject_token');
  const subjectType = single(body, 'subject_token_type');
  if (!subjectToken || !subjectType) throw new OAuthError(400, 'invalid_request', 'subject_token and subject_token_type are required');
  if (!SUBJECT_TOKEN_TYPES.has(subjectType)) throw new OAuthError(400, 'invalid_request', `subject_token_type ${subjectType} not supported`);
  const requested = single(body, 'requested_token_type');
  if (requested !== undefined && requested !== ISSUED_TOKEN_TYPE && requested !== 'urn:ietf:params:oauth:token-type:jwt') {
    throw new OAuthError(400, 'invalid_request', `requested_token_type ${requested} not supported`);
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(subjectToken, subjectKeys(), {
      algorithms: ASYMMETRIC_ALGS,
      requiredClaims: ['sub', 'exp'],
    }));
  } catch (e) {
    // RFC 8693 2.2.2: an invalid subject token is invalid_request.
    throw new OAuthError(400, 'invalid_request', `subject_token refused: ${e.code ?? 'invalid'}`);
  }
  const aud = audienceOf(body);
  const scope = single(body, 'scope') ?? subject.scope;
  const token = await issuer.buildToken({
    expiresIn,
    scopesOrTransform: (_header, payload) => {
      Object.assign(payload, {
        sub: subject.sub,
        client_id: client.client_id,
        jti: randomUUID(),
        // RFC 8693 4.1: the acting party (this client), nesting any earlier actor.
        act: subject.act ? { sub: client.client_id, act: subject.act } : { sub: client.client_id },
      });
      if (aud !== undefined) payload.aud = aud;
      if (scope !== undefined) payload.scope = scope;
    },
  });
  const res = { access_token: token, issued_token_type: ISSUED_TOKEN_TYPE, token_type: 'Bearer', expires_in: expiresIn };
  if (scope !== undefined) res.scope = scope;
  return { res, subject_sub: subject.sub, aud };
}

// The mock's own grants (client_credentials, password, ...) get the lifetime, audience and
// client of the request through its documented hooks.
service.on(Events.BeforeTokenSigning, (token, req) => {
  const body = req.body;
  const p = token.payload;
  p.exp = p.iat + expiresIn;
  p.jti = randomUUID();
  p.client_id = req.client.client_id;
  if (body.grant_type === GRANT_CLIENT_CREDENTIALS) p.sub = req.client.client_id;
  const aud = audienceOf(body);
  if (aud === undefined) delete p.aud;
  else p.aud = aud;
  if (p.scope === undefined) delete p.scope;
});
service.on(Events.BeforeResponse, (response, _req) => {
  if (response.statusCode === 200) {
    response.body.expires_in = expiresIn;
    if (response.body.scope === undefined) delete response.body.scope;
  }
});
service.on(Events.BeforeWellKnownOpenIdConfiguration, (response) => {
  Object.assign(response.body, {
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: ASYMMETRIC_ALGS,
    grant_types_supported: [...response.body.grant_types_supported, GRANT_TOKEN_EXCHANGE],
  });
});

/** Hands a token request whose body was read here to the mock's own handler. */
function passToMock(req, res, raw, client) {
  const replay = Readable.from([raw]);
  Object.assign(replay, { method: req.method, url: req.url, headers: req.headers, client });
  service.requestHandler(replay, res);
}

/** What a response of the mock said, for /stats: its status (and error code). */
function watchMock(res, done) {
  const write = res.end.bind(res);
  res.end = (chunk, ...rest) => {
    let error;
    if (res.statusCode !== 200 && chunk) {
      try {
        const b = JSON.parse(chunk.toString());
        error = b.error ?? b.title;
      } catch {
        // not JSON: the status says enough
      }
    }
    done(res.statusCode, error);
    return write(chunk, ...rest);
  };
}

async function tokenRoute(req, res) {
  stats.total += 1;
  let entry = { grant_type: 'unknown' };
  try {
    const raw = await readBody(req);
    const body = parseForm(raw);
    const grant = typeof body.grant_type === 'string' ? body.grant_type : 'unknown';
    entry = { grant_type: grant, audience: body.audience, resource: body.resource, scope: body.scope };
    bump(stats.requests, grant);
    const out = outage();
    if (out) {
      record({ ...entry, status: 0, error: `down:${out.mode}` });
      return refuse(req, res, out);
    }
    if (!req.headers['content-type']?.includes('application/x-www-form-urlencoded')) {
      throw new OAuthError(400, 'invalid_request', 'the body must be application/x-www-form-urlencoded');
    }
    const client = await authenticateClient(req, body);
    Object.assign(entry, client);
    if (grant === GRANT_TOKEN_EXCHANGE) {
      const { res: answer, subject_sub, aud } = await exchange(body, client);
      record({ ...entry, subject_sub, aud, status: 200 });
      return sendJson(res, 200, answer);
    }
    if (grant === 'unknown') throw new OAuthError(400, 'invalid_request', 'grant_type is required');
    if (!['client_credentials', 'password', 'refresh_token', 'authorization_code'].includes(grant)) {
      throw new OAuthError(400, 'unsupported_grant_type', `grant_type ${grant} is not supported`);
    }
    watchMock(res, (status, error) => record({ ...entry, status, error }));
    passToMock(req, res, raw, client);
  } catch (e) {
    if (!(e instanceof OAuthError)) throw e;
    record({ ...entry, status: e.status, error: e.error });
    sendJson(res, e.status, { error: e.error, error_description: e.message }, e.headers);
  }
}

/** The token endpoint while it is down. */
function refuse(req, res, out) {
  switch (out.mode) {
    case '503':
      return sendJson(res, 503, { error: 'temporarily_unavailable', error_description: 'the token endpoint is down' }, { 'Retry-After': '1' });
    case 'hang': {
      // Holds the request until the outage ends (or the client gives up), then drops it.
      const timer = setTimeout(() => req.socket.destroy(), Math.min(out.until - Date.now(), 600_000));
      req.socket.on('close', () => clearTimeout(timer));
      return;
    }
    case 'huge':
      // A 200 whose body never fits a sane token response bound.
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(`{"access_token":"${'x'.repeat(HUGE_BYTES)}","token_type":"Bearer","expires_in":60}`);
    default:
      req.socket.destroy();
  }
}

function query(req) {
  return new URL(req.url, 'http://127.0.0.1').searchParams;
}

async function adminRoute(req, res, path) {
  const q = query(req);
  if (req.method === 'GET' && path === '/stats') return sendJson(res, 200, stats);
  if (req.method === 'POST' && path === '/admin/reset') {
    resetStats();
    return sendJson(res, 200, stats);
  }
  if (req.method === 'POST' && path === '/admin/down') {
    const mode = q.get('mode') ?? 'close';
    if (!['close', '503', 'hang', 'huge'].includes(mode)) return sendJson(res, 400, { error: `unknown mode ${mode}` });
    const seconds = q.has('seconds') ? Number(q.get('seconds')) : Infinity;
    down = { mode, until: Date.now() + seconds * 1000 };
    return sendJson(res, 200, { down: mode, seconds });
  }
  if (req.method === 'POST' && path === '/admin/up') {
    down = null;
    return sendJson(res, 200, { down: null });
  }
  if (req.method === 'POST' && path === '/admin/expires-in') {
    expiresIn = Number(q.get('seconds'));
    return sendJson(res, 200, { expires_in: expiresIn });
  }
  if (req.method === 'POST' && path === '/admin/mint') {
    // A token signed with this server's key, with the given claims on top of iss/iat/nbf/exp
    // (`expires_in` in the body sets exp, negative for an expired one).
    const claims = JSON.parse((await readBody(req)).toString('utf8') || '{}');
    const { expires_in: ttl = expiresIn, ...rest } = claims;
    const token = await issuer.buildToken({
      expiresIn: ttl,
      scopesOrTransform: (_header, payload) => Object.assign(payload, rest),
    });
    return sendJson(res, 200, { access_token: token, token_type: 'Bearer', expires_in: ttl });
  }
  return false;
}

const server = createServer((req, res) => {
  const path = new URL(req.url, 'http://127.0.0.1').pathname.replace(/\/+$/, '') || '/';
  const handle = async () => {
    if (req.method === 'POST' && path === '/token') return tokenRoute(req, res);
    if (path === '/stats' || path.startsWith('/admin/')) {
      if ((await adminRoute(req, res, path)) !== false) return;
      return sendJson(res, 404, { error: 'not_found' });
    }
    return service.requestHandler(req, res);
  };
  handle().catch((e) => {
    if (e instanceof OAuthError) return sendJson(res, e.status, { error: e.error, error_description: e.message });
    console.error('oauth_server:', e);
    if (!res.headersSent) sendJson(res, 500, { error: 'server_error' });
    else res.destroy();
  });
});

server.listen(Number(opts.port), '127.0.0.1', () => {
  issuer.url = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(`READY ${issuer.url}\n`);
});

const parent = Number(opts['parent-pid']);
if (parent) {
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      process.exit(0);
    }
  }, 500).unref();
}
