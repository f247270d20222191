// Drives the CopilotKit React app (app.jsx, bundled by build.mjs) in headless Chromium
// (Debian's /usr/bin/chromium, through tests/browser's playwright-core), as a user does: the
// page is served from its own origin (http://127.0.0.1:PORT, a tiny static server here) and
// talks to the gateway cross-origin, as a deployed app talks to its runtime. Usage:
//   node tests/react/app.test.mjs '<json script>'
// Script: {"runtimeUrl": "http://127.0.0.1:GW/copilotkit", "agentId": "..."?, "threadId": "..."?,
//          "key": "..."?, "transport": "rest" | "single"?, "provider": "CopilotKit" |
//          "CopilotKitProvider"?, "port": PORT? (0: any), "app": DIR? (the bundle; default
//          target/react-app, built first when missing), "shots": DIR?, "steps": [Step]}
// Step:   {"send": "text"}        type `text` into CopilotKit's chat, send it, wait for the run
//                                 to end and the reply to be shown
//         {"reload": true, "messages": N?}
//                                 reload the page; wait for the runtime, CopilotKit's connect
//                                 and (when given) N rendered messages, then for quiet
//         {"goto": {"threadId": "...", ...}, "messages": N?}
//                                 open the page anew with these settings changed (another
//                                 thread, agent, key; null removes one), then as a reload
//         {"expand": true}        click the header of every collapsed reasoning block (a user
//                                 opening the thoughts), then wait for quiet
//         {"wait": MS}            just wait
//         {"threads": N?}         wait for the app's thread list (`threads: "1"` in the script)
//                                 to load (and hold N threads, when given), then for quiet
//         {"thread": {"open": ID}, "messages": N?}
//                                 click the thread's Open: the chat switches to it; wait for
//                                 CopilotKit's connect and N rendered messages, then quiet
//         {"thread": {"rename": ID, "to": "name"}} | {"thread": {"archive" | "unarchive" |
//                                 "delete": ID}}
//                                 click the thread's button; wait for the mutation's outcome
//                                 (useThreads' promise), then for quiet
// Prints one JSON line: {ok, failure, origin, steps: [StepReport], console: [...], external:
// [...]}. StepReport: {step, elapsedMs, runtime, capabilities (what useCapabilities returned,
// as the page rendered it), messages (every message the chat rendered, in order: {kind: "user"
// | "assistant" | "reasoning" | "other", id, text, and for reasoning label (the header's
// text), expanded (the header's aria-expanded) and visible (its text panel takes room)}),
// appMessages (the agent's own list: {id, role, content}), events (the AG-UI events the agent
// received during the step), errors (CopilotKit's onError and failed runs), console (console
// errors and page errors during the step), warnings (console warnings), threads (the app's
// thread list: {id, name, archived, agentId}, null while loading), threadOps (each mutation's
// outcome: {what, id, ok, error?}), threadId (the chat's thread)}. `console` at the top collects every console error of
// the whole session; `external` every request the page made to another host than 127.0.0.1.
// Exits 1 when a step could not be completed (the report says where).
import { createReadStream, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
// playwright-core is tests/browser's (one copy for both browser peers).
const { chromium } = createRequire(join(root, "tests/browser/package.json"))("playwright-core");

const script = JSON.parse(process.argv[2] ?? "{}");
const WAIT_MS = script.waitMs ?? 20_000;
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
// The bundle: the one given, else build.mjs's cached build under target/react-app.
const app = script.app
  ? resolve(script.app)
  : JSON.parse(
      execFileSync(process.execPath, [join(here, "build.mjs"), "--cache", join(root, "target/react-app")], {
        stdio: ["ignore", "pipe", "inherit"],
      }),
    ).out;
if (!existsSync(join(app, "app.js"))) throw new Error(`no app.js in ${app}`);

// The page's own origin: the bundle, served as files.
const types = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};
const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  const file = normalize(join(app, path === "/" ? "index.html" : path));
  if (!file.startsWith(app + sep) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" });
  createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(script.port ?? 0, "127.0.0.1", ok));
const origin = `http://127.0.0.1:${server.address().port}`;

const settings = Object.fromEntries(
  ["runtimeUrl", "agentId", "threadId", "key", "transport", "provider", "threads", "archived"].map((k) => [k, script[k]]),
);
/** The page's URL for `settings` (null or absent values left out). */
function pageUrl() {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(settings)) if (v) query.set(k, v);
  return `${origin}/?${query}`;
}

const consoleAll = [];
const external = [];
const httpErrors = [];
let current = null; // the report of the step under way

const profile = mkdtempSync(join(tmpdir(), "react-app-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  viewport: { width: 1280, height: 860 },
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const page = context.pages()[0] ?? (await context.newPage());
page.setDefaultTimeout(WAIT_MS);
page.on("console", (m) => {
  const line = `console ${m.type()}: ${m.text()}`;
  if (m.type() === "error") {
    consoleAll.push(line);
    current?.console.push(line);
  } else if (m.type() === "warning") {
    current?.warnings.push(line);
  }
});
page.on("pageerror", (e) => {
  const line = `page error: ${e.message}`;
  consoleAll.push(line);
  current?.console.push(line);
});
page.on("response", (r) => {
  if (r.status() < 400) return;
  const line = `HTTP ${r.status()}: ${r.request().method()} ${r.url()}`;
  httpErrors.push(line);
  current?.http.push(line);
});
page.on("request", (r) => {
  const url = new URL(r.url());
  if (url.origin !== origin && url.protocol.startsWith("http")) current?.requests.push(`${r.method()} ${url.pathname}`);
  const host = url.hostname;
  if (!["127.0.0.1", "localhost"].includes(host) && !r.url().startsWith("data:")) external.push(r.url());
});

/** What the page shows and holds now. */
async function snapshot() {
  return page.evaluate(() => {
    const list = document.querySelector('[data-testid="copilot-message-list"]');
    const messages = [];
    for (const el of list ? list.querySelectorAll("[data-message-id]") : []) {
      const testid = el.getAttribute("data-testid");
      const header = el.querySelector(":scope > button");
      let kind = "other";
      if (testid === "copilot-user-message") kind = "user";
      else if (testid === "copilot-assistant-message") kind = "assistant";
      // CopilotChatReasoningMessage: a header button ("Thinking…", "Thought for …") and the
      // reasoning text in a collapsible panel, apart from the answer.
      else if (header && /^(Thinking|Thought)/.test(header.textContent.trim())) kind = "reasoning";
      const copy = el.cloneNode(true);
      for (const x of copy.querySelectorAll('[data-testid$="-toolbar"], :scope > button')) x.remove();
      const m = { kind, id: el.getAttribute("data-message-id"), text: copy.textContent.trim() };
      if (kind === "reasoning") {
        m.label = header.textContent.trim();
        m.expanded = header.getAttribute("aria-expanded") === "true";
        // The panel after the header: open when it takes room on the page.
        m.visible = (header.nextElementSibling?.getBoundingClientRect().height ?? 0) > 1;
      }
      messages.push(m);
    }
    let capabilities = null;
    try {
      capabilities = JSON.parse(document.querySelector("#capabilities")?.textContent ?? "null");
    } catch {
      capabilities = "unparsable";
    }
    const a = window.__app ?? {};
    return {
      runtime: a.runtime,
      agentReady: a.agentReady,
      running: a.running,
      runsFinished: a.runsFinished ?? 0,
      eventCount: (a.events ?? []).length,
      capabilities,
      messages,
      appMessages: a.messages ?? [],
      threads: a.threads ?? null,
      threadsError: a.threadsError ?? null,
      threadOps: a.threadOps ?? [],
      threadId: a.threadId ?? null,
    };
  });
}

/** Waits until `test(snapshot)` holds, polling; `what` names it in the timeout error. */
async function until(what, test) {
  const deadline = Date.now() + WAIT_MS;
  let last;
  while (Date.now() < deadline) {
    last = await snapshot();
    if (test(last)) return last;
    await page.waitForTimeout(100);
  }
  throw new Error(`${what}: not within ${WAIT_MS} ms; last seen ${JSON.stringify(last)}`);
}

/** Waits until nothing changed (events, rendered messages) for `ms`. */
async function quiet(ms = 600) {
  let before = JSON.stringify(await snapshot());
  let since = Date.now();
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() - since < ms) {
    if (Date.now() > deadline) throw new Error("the page never settled");
    await page.waitForTimeout(100);
    const now = JSON.stringify(await snapshot());
    if (now !== before) {
      before = now;
      since = Date.now();
    }
  }
}

const connected = (s) => String(s.runtime).toLowerCase() === "connected" && s.agentReady;
/** Every message of the agent that the chat shows (user, assistant, reasoning) is rendered. */
const shown = (s) =>
  s.appMessages.filter((m) => ["user", "assistant", "reasoning"].includes(m.role) && m.content).every((m) =>
    s.messages.some((r) => r.id === m.id),
  );

async function openPage() {
  await page.goto(pageUrl());
  await until("the runtime connects", connected);
}

/** After a page load: the runtime, CopilotKit's connect, `messages` shown (when given), quiet. */
async function loaded(messages) {
  await until("the runtime connects", connected);
  if (messages != null) {
    await until(`${messages} messages shown`, (s) => s.messages.length >= messages && !s.running);
  }
  await quiet();
}

async function runStep(step) {
  if (step.reload) {
    await page.reload();
    await loaded(step.messages);
  } else if (step.goto) {
    Object.assign(settings, step.goto);
    await page.goto(pageUrl());
    await loaded(step.messages);
  } else if (step.send != null) {
    const before = await snapshot();
    const input = page.getByTestId("copilot-chat-textarea");
    await input.fill(step.send);
    await page.getByTestId("copilot-send-button").click();
    await until("the run ends", (s) => s.runsFinished > before.runsFinished && !s.running);
    await until("the reply is shown", shown);
    await quiet(300);
  } else if (step.expand) {
    const headers = page.locator('[data-testid="copilot-message-list"] [data-message-id] > button[aria-expanded="false"]');
    for (let n = await headers.count(); n > 0; n--) await headers.first().click();
    await quiet();
  } else if (step.wait) {
    await page.waitForTimeout(step.wait);
  } else if (step.threads !== undefined) {
    const n = typeof step.threads === "number" ? step.threads : null;
    await until(`the thread list${n == null ? "" : ` of ${n}`}`, (s) => s.threads && (n == null || s.threads.length === n));
    await quiet();
  } else if (step.thread) {
    const [action, id] = Object.entries(step.thread).find(([k]) => k !== "to");
    const item = page.locator(`#threads li[data-thread-id="${id}"]`);
    if (action === "open") {
      await item.locator('button[data-action="open"]').click();
      await until(`the chat on ${id}`, (s) => s.threadId === id && connected(s));
      await loaded(step.messages);
    } else {
      if (action === "rename") await page.locator("#rename-to").fill(step.thread.to);
      const before = (await snapshot()).threadOps.length;
      await item.locator(`button[data-action="${action}"]`).click();
      await until(`the ${action} of ${id}`, (s) => s.threadOps.length > before);
      await quiet();
    }
  }
}

const steps = [];
let failure = null;
try {
  await openPage();
  let n = 0;
  for (const step of script.steps ?? []) {
    const started = Date.now();
    const fromEvent = (await snapshot()).eventCount;
    current = { step: n++, console: [], warnings: [], http: [], requests: [] };
    try {
      await runStep(step);
    } finally {
      const s = await snapshot();
      const events = await page.evaluate((from) => (window.__app?.events ?? []).slice(from), step.reload || step.goto ? 0 : fromEvent);
      const errors = await page.evaluate(() => [...(window.__app?.errors ?? [])]);
      await page.evaluate(() => window.__app && (window.__app.errors.length = 0));
      if (script.shots) {
        mkdirSync(script.shots, { recursive: true });
        await page.screenshot({ path: join(script.shots, `step-${current.step}.png`) });
      }
      steps.push({
        ...current,
        elapsedMs: Date.now() - started,
        runtime: s.runtime,
        capabilities: s.capabilities,
        messages: s.messages,
        appMessages: s.appMessages,
        threads: s.threads,
        threadsError: s.threadsError,
        threadOps: s.threadOps,
        threadId: s.threadId,
        events,
        errors,
      });
      current = null;
    }
  }
} catch (e) {
  failure = e.stack || String(e);
}
// What the page shows at the end (also when there were no steps).
let final = null;
try {
  final = await snapshot();
} catch (e) {
  failure ??= e.stack || String(e);
} finally {
  await context.close();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
const ok = !failure;
process.stdout.write(JSON.stringify({ ok, failure, origin, final, steps, console: consoleAll, http: httpErrors, external }) + "\n", () =>
  process.exit(ok ? 0 : 1),
);
