// Records the wire fixtures of agent.mjs into fixtures/a2a/frameworks/a2a_js/.
// Usage (from this directory): node record.mjs
// Starts the peer twice (--versions 1.0, then --versions both for the v0_3/ fixtures),
// sends each request, and writes <name>.request.json (pretty) and the raw response body
// (<name>.sse for streams, <name>.json otherwise).

import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, '..', '..', '..', 'fixtures', 'a2a', 'frameworks', 'a2a_js');

function startPeer(versions) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'agent.mjs'), '--port', '0', '--versions', versions], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/^READY (\S+)\n/);
      if (m) resolve({ child, base: m[1] });
    });
    child.on('exit', (code) => reject(new Error(`peer exited ${code}`)));
  });
}

function makeRecorder(dir, base, headers) {
  mkdirSync(dir, { recursive: true });
  let id = 0;
  return async function rpc(name, method, params, { stream = false, extraHeaders = headers } = {}) {
    const body = { jsonrpc: '2.0', id: ++id, method, params };
    writeFileSync(join(dir, `${name}.request.json`), JSON.stringify(body, null, 2) + '\n');
    const res = await fetch(base, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...extraHeaders },
      body: JSON.stringify(body),
    });
    const raw = Buffer.from(await res.arrayBuffer());
    const isSse = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
    const file = `${name}.${isSse ? 'sse' : 'json'}`;
    writeFileSync(join(dir, file), raw);
    console.error(`${file}: HTTP ${res.status} ${res.headers.get('content-type')} ${raw.length} bytes`);
    const text = raw.toString('utf8');
    const events = isSse
      ? text
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => JSON.parse(l.slice(6)))
      : [JSON.parse(text)];
    return events;
  };
}

async function card(dir, base, file, headers) {
  const res = await fetch(new URL('.well-known/agent-card.json', base), { headers });
  const raw = Buffer.from(await res.arrayBuffer());
  writeFileSync(join(dir, file), raw);
  console.error(`${file}: HTTP ${res.status} ${raw.length} bytes`);
}

const text1 = (t) => [{ text: t }];
const text03 = (t) => [{ kind: 'text', text: t }];

async function recordV1() {
  const { child, base } = await startPeer('1.0');
  try {
    const H = { 'A2A-Version': '1.0' };
    const rpc = makeRecorder(OUT, base, H);
    await card(OUT, base, 'agent-card.json', H);
    const user = (id, text, extra = {}) => ({ message: { messageId: id, role: 'ROLE_USER', parts: text1(text), ...extra } });

    // hello: streaming and blocking, then GetTask of the streamed task
    const hello = await rpc('hello', 'SendStreamingMessage', user('msg-hello', 'hello'), { stream: true });
    await rpc('hello-send', 'SendMessage', user('msg-hello-send', 'hello'));
    await rpc('hello-get', 'GetTask', { id: hello[0].result.task.id });

    // chunks: artifact streamed in 3 chunks
    const chunks = await rpc('chunks', 'SendStreamingMessage', user('msg-chunks', 'chunks'), { stream: true });
    await rpc('chunks-send', 'SendMessage', user('msg-chunks-send', 'chunks'));
    await rpc('chunks-get', 'GetTask', { id: chunks[0].result.task.id });

    // approve: input-required, resume on the same task, get, second resume
    const approve = await rpc('approve', 'SendStreamingMessage', user('msg-approve', 'approve'), { stream: true });
    const task = approve[0].result.task;
    const ids = { taskId: task.id, contextId: task.contextId };
    await rpc('approve-resume', 'SendStreamingMessage', user('msg-approve-resume', 'yes, send it', ids), { stream: true });
    await rpc('approve-get', 'GetTask', { id: task.id });
    await rpc('approve-second-resume', 'SendStreamingMessage', user('msg-approve-second-resume', 'again', ids), {
      stream: true,
    });
    await rpc('approve-second-resume-send', 'SendMessage', user('msg-approve-second-resume-send', 'again', ids));

    // approve, resumed in the wrong shape: the answer names only the contextId, no taskId
    const wrong = await rpc('approve-wrong-start', 'SendStreamingMessage', user('msg-approve-wrong-start', 'approve'), {
      stream: true,
    });
    const wtask = wrong[0].result.task;
    await rpc('approve-wrong-resume', 'SendStreamingMessage', user('msg-approve-wrong-resume', 'yes, send it', { contextId: wtask.contextId }), {
      stream: true,
    });
    await rpc('approve-wrong-get', 'GetTask', { id: wtask.id });
    await rpc('approve-unknown-task', 'SendStreamingMessage', user('msg-approve-unknown-task', 'yes', { taskId: 'no-such-task', contextId: wtask.contextId }), {
      stream: true,
    });

    // approve, blocking (SendMessage) variant
    const sent = await rpc('approve-send', 'SendMessage', user('msg-approve-send', 'approve'));
    const stask = sent[0].result.task;
    await rpc('approve-send-resume', 'SendMessage', user('msg-approve-send-resume', 'yes, send it', { taskId: stask.id, contextId: stask.contextId }));

    // tool: not a scripted scenario (no tool-call convention in the SDK); falls back to hello
    // a 0.3 request (no A2A-Version header) to a 1.0-only server
    await rpc('no-version-header', 'message/stream', { message: { messageId: 'msg-no-version-header', role: 'user', kind: 'message', parts: text03('hello') } }, {
      stream: true,
      extraHeaders: {},
    });
    await rpc('v1-without-header', 'SendStreamingMessage', user('msg-v1-without-header', 'hello'), { stream: true, extraHeaders: {} });
  } finally {
    child.kill();
  }
}

async function recordV03() {
  const { child, base } = await startPeer('both');
  try {
    const dir = join(OUT, 'v0_3');
    const rpc = makeRecorder(dir, base, {});
    await card(dir, base, 'agent-card.json', {});
    await card(dir, base, 'agent-card-v1.json', { 'A2A-Version': '1.0' });
    const user = (id, text, extra = {}) => ({ message: { kind: 'message', messageId: id, role: 'user', parts: text03(text), ...extra } });

    const hello = await rpc('hello', 'message/stream', user('msg-hello', 'hello'), { stream: true });
    await rpc('hello-send', 'message/send', user('msg-hello-send', 'hello'));
    await rpc('hello-get', 'tasks/get', { id: hello[0].result.id });
    await rpc('chunks', 'message/stream', user('msg-chunks', 'chunks'), { stream: true });
    const approve = await rpc('approve', 'message/stream', user('msg-approve', 'approve'), { stream: true });
    const task = approve[0].result;
    const ids = { taskId: task.id, contextId: task.contextId };
    await rpc('approve-resume', 'message/stream', user('msg-approve-resume', 'yes, send it', ids), { stream: true });
    await rpc('approve-get', 'tasks/get', { id: task.id });
    await rpc('approve-second-resume', 'message/stream', user('msg-approve-second-resume', 'again', ids), { stream: true });
  } finally {
    child.kill();
  }
}

await recordV1();
await recordV03();
