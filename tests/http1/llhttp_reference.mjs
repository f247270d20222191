// Reference runner: replays every case of an HTTP/1.1 corpus against Node's
// own HTTP server (llhttp, default options, strict parsing) and reports, per
// case, which requests the server handler completed and whether it answered
// with a 400.
//
// Usage: node tests/http1/llhttp_reference.mjs tests/http1/corpus.txt > /tmp/llhttp.json
//        (add --statuses to also list the status codes seen in the raw reply)
//
// No dependencies: only node: built-ins. Requires Node >= 18 (tested on 20).

import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import process from 'node:process';
import { pathToFileURL } from 'node:url';

const IDLE_MS = 300; // stop reading after this long without bytes
const BATCH = 20; // cases run concurrently
const HARD_LIMIT_MS = 60_000; // failsafe: never hang

// ---------------------------------------------------------------- corpus

const HEX = /^[0-9a-fA-F]{2}$/;

/** Unescape `\r \n \t \\ \xHH`; everything else must be printable ASCII. */
export function unescapeCase(text, where = '') {
  const out = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) {
      const n = text[i + 1];
      if (n === 'r') { out.push(0x0d); i += 1; }
      else if (n === 'n') { out.push(0x0a); i += 1; }
      else if (n === 't') { out.push(0x09); i += 1; }
      else if (n === '\\') { out.push(0x5c); i += 1; }
      else if (n === 'x') {
        const h = text.slice(i + 2, i + 4);
        if (!HEX.test(h)) throw new Error(`${where}: bad \\x escape at column ${i}`);
        out.push(parseInt(h, 16));
        i += 3;
      } else {
        throw new Error(`${where}: unknown escape \\${n ?? '<end>'} at column ${i}`);
      }
    } else if (c >= 0x20 && c <= 0x7e) {
      out.push(c);
    } else {
      throw new Error(`${where}: raw byte 0x${c.toString(16)} at column ${i} (must be escaped)`);
    }
  }
  return Buffer.from(out);
}

export function parseCorpus(text) {
  const cases = [];
  const seen = new Set();
  const lines = text.split('\n');
  for (let ln = 0; ln < lines.length; ln++) {
    let line = lines[ln];
    if (line.endsWith('\r')) line = line.slice(0, -1); // tolerate a CRLF file
    if (line.length === 0 || line.startsWith('#')) continue;
    if (line.trim() === '') continue;
    const tab = line.indexOf('\t');
    if (tab < 0) throw new Error(`line ${ln + 1}: missing TAB between name and bytes`);
    const name = line.slice(0, tab);
    if (!/^[a-z0-9_.-]+$/.test(name)) throw new Error(`line ${ln + 1}: bad case name ${JSON.stringify(name)}`);
    if (seen.has(name)) throw new Error(`line ${ln + 1}: duplicate case name ${name}`);
    seen.add(name);
    cases.push({ name, bytes: unescapeCase(line.slice(tab + 1), `line ${ln + 1} (${name})`) });
  }
  return cases;
}

// ---------------------------------------------------------------- server

const LOG = Symbol('caseLog');
const logsByPort = new Map(); // client local port -> log

function startServer() {
  const server = http.createServer({
    requestTimeout: 2000,
    headersTimeout: 2000,
    keepAliveTimeout: 2000,
    connectionsCheckingInterval: 500,
  }, (req, res) => {
    const log = req.socket[LOG];
    const slot = log ? log.next++ : -1;
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (log) {
        log.done.set(slot, {
          method: req.method,
          url: req.url,
          body_hex: Buffer.concat(chunks).toString('hex'),
        });
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      res.end('ok');
    });
    req.on('error', () => {});
  });
  server.on('connection', (socket) => {
    const log = { next: 0, done: new Map() };
    socket[LOG] = log;
    logsByPort.set(socket.remotePort, log);
  });
  // No 'clientError' handler: Node's default answers 400 (or 431/408) and closes.
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// ---------------------------------------------------------------- client

function runCase(port, c) {
  return new Promise((resolve) => {
    const received = [];
    let localPort = null;
    let finished = false;
    let idle = null;
    const sock = net.connect({ port, host: '127.0.0.1' });
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(idle);
      sock.destroy();
      resolve({ localPort, reply: Buffer.concat(received) });
    };
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(finish, IDLE_MS);
    };
    sock.setNoDelay(true);
    sock.on('connect', () => {
      localPort = sock.localPort;
      sock.write(c.bytes);
      arm();
    });
    sock.on('data', (d) => { received.push(d); arm(); });
    sock.on('end', finish);
    sock.on('close', finish);
    sock.on('error', finish);
  });
}

const STATUS_RE = /HTTP\/\d\.\d (\d{3})[^\r\n]*\r?\n/g;

async function main() {
  const argv = process.argv.slice(2);
  const withStatuses = argv.includes('--statuses');
  const file = argv.find((a) => !a.startsWith('--'));
  if (!file) {
    process.stderr.write('usage: node llhttp_reference.mjs <corpus.txt> [--statuses]\n');
    process.exit(2);
  }
  const cases = parseCorpus(readFileSync(file, 'latin1'));
  const failsafe = setTimeout(() => {
    process.stderr.write('llhttp_reference: hard time limit hit\n');
    process.exit(3);
  }, HARD_LIMIT_MS);
  failsafe.unref();

  const server = await startServer();
  const { port } = server.address();
  const results = {};

  for (let i = 0; i < cases.length; i += BATCH) {
    const batch = cases.slice(i, i + BATCH);
    const outs = await Promise.all(batch.map((c) => runCase(port, c)));
    // Let the server side see the close and flush any pending 'end' events.
    await new Promise((r) => setTimeout(r, 20));
    batch.forEach((c, k) => {
      const { localPort, reply } = outs[k];
      const log = localPort != null ? logsByPort.get(localPort) : undefined;
      if (localPort != null) logsByPort.delete(localPort);
      const requests = log
        ? [...log.done.keys()].sort((a, b) => a - b).map((s) => log.done.get(s))
        : [];
      const text = reply.toString('latin1');
      const statuses = [...text.matchAll(STATUS_RE)].map((m) => Number(m[1]));
      const entry = { requests, refused: statuses.includes(400) };
      if (withStatuses) entry.statuses = statuses;
      results[c.name] = entry;
    });
  }

  server.closeAllConnections();
  await new Promise((r) => server.close(() => r()));
  clearTimeout(failsafe);
  process.stdout.write(JSON.stringify(results, null, 1) + '\n');
}

// Run only when executed directly, so parseCorpus/unescapeCase can be imported.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e) => {
    process.stderr.write(`llhttp_reference: ${e.stack || e}\n`);
    process.exit(1);
  });
}
