// Drives the review console (/console) in headless Chromium (Debian's /usr/bin/chromium,
// through playwright-core): with --key, see the console ask for a key (its keyless first try
// got a 401), enter it and connect; without, see it connect by itself, with no click. Then
// open the inbox, open the waiting thread, answer its interrupt through the generated form,
// and wait for the streamed completion. With --unreachable NAME, first check that the inbox
// and NAME's own list say that agent could not be reached. Fails on any console error, failed
// request or 4xx/5xx answer but the expected ones (the keyless first try's 401 on /agents,
// the unreachable agent's 502/504, the 404 of /threads/events on a gateway without the feed).
// Screenshots go to target/console-screenshots.
//
// The live inbox (docs/design.md#3-http-surface, GET /threads/events):
// - --feed: the console must follow the feed (a 200 on /threads/events) and never poll
//   GET /threads; without it, either way is fine (a gateway without the feed is polled).
// - --new-approval AGENT: once the inbox is shown, this script starts a run on AGENT that waits
//   for an approval (message "approve", a new thread) and checks that it appears in the inbox
//   without a reload (within LIVE_WITHIN_MS with --feed, POLL_WITHIN_MS without).
// - --restart: then prints the line "RESTART" on stdout and waits for "RESTARTED" on stdin
//   (the caller restarts the gateway on the same address meanwhile); the console must
//   reconnect by itself, without a reload, and show the same waiting threads again.
//
//   node tests/browser/console.test.mjs --gateway URL [--key KEY] [--thread ID] [--answer yes]
//        [--expect "Approved:"] [--unreachable NAME] [--feed] [--new-approval AGENT] [--restart]
//        [--shots DIR] [--doc-shot docs/console.png]
// (or GATEWAY_URL, GATEWAY_KEY, CONSOLE_THREAD, CONSOLE_ANSWER, CONSOLE_EXPECT,
//  CONSOLE_UNREACHABLE, CONSOLE_SHOTS, CONSOLE_DOC_SHOT, CHROMIUM). Prints one JSON line with
// what it saw.

import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createInterface } from "node:readline";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");

function arg(name, env, fallback) {
  const i = process.argv.indexOf("--" + name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  return process.env[env] ?? fallback;
}

const flag = (name) => process.argv.includes("--" + name);

const gateway = arg("gateway", "GATEWAY_URL");
const key = arg("key", "GATEWAY_KEY", "");
const thread = arg("thread", "CONSOLE_THREAD");
const answer = arg("answer", "CONSOLE_ANSWER", "yes");
const expect = arg("expect", "CONSOLE_EXPECT", "Approved:");
const shots = resolve(arg("shots", "CONSOLE_SHOTS", join(root, "target/console-screenshots")));
const docShot = arg("doc-shot", "CONSOLE_DOC_SHOT");
const unreachable = arg("unreachable", "CONSOLE_UNREACHABLE");
const executablePath = arg("chromium", "CHROMIUM", "/usr/bin/chromium");
// The upstream's URL is not needed by the browser; it is accepted (and reported) so the
// caller can pass one command line for every check.
const upstream = arg("upstream", "UPSTREAM_URL");
const feed = flag("feed");
const newApproval = arg("new-approval", "CONSOLE_NEW_APPROVAL");
const restart = flag("restart");
// Generous upper bounds of correctness: a change on the feed is shown at once; a poll every 4 s.
const LIVE_WITHIN_MS = 3000;
const POLL_WITHIN_MS = 10000;
// How long the console may take to reconnect after the gateway is back (its backoff is ≤ 8 s).
const RECONNECT_WITHIN_MS = 20000;
const FEED_PATH = "/threads/events";
if (!gateway) {
  console.error("usage: console.test.mjs --gateway URL [--key KEY] [--thread ID] [--unreachable NAME]");
  process.exit(2);
}

mkdirSync(shots, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), "console-chromium-"));
const problems = [];
const seen = { requests: 0, streamed: null, feedOpened: 0, polls: 0, reloads: 0 };
/** While the gateway restarts, its lost connections are expected. */
let restarting = false;

// A fresh profile (--user-data-dir): playwright-core takes it as the persistent context's dir.
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

/**
 * An error answer the console is meant to get: the 401 of its keyless first try on a gateway
 * with inbound auth, and the 502/504 of the unreachable agent's list.
 */
function expected(status, url, keyless) {
  const path = new URL(url, gateway).pathname;
  if (status === 401) return Boolean(key) && keyless && path === "/agents";
  if (status === 404) return !feed && path === FEED_PATH;
  const down = unreachable && path === `/agents/${encodeURIComponent(unreachable)}/threads`;
  return Boolean(down) && (status === 502 || status === 504);
}

let watching = true;
async function check() {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20000);
  page.on("console", (m) => {
    if (!watching || (m.type() !== "error" && m.type() !== "warning")) return;
    // Chromium reports every error answer as "Failed to load resource": the expected ones too.
    const failed = /Failed to load resource: the server responded with a status of (\d+)/.exec(m.text());
    if (failed && expected(Number(failed[1]), m.location().url, true)) return;
    if (restarting && /Failed to load resource: net::/.test(m.text())) return;
    problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => watching && problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => {
    // The feed is cut when the gateway goes away (and when the page closes).
    const path = new URL(r.url()).pathname;
    if (restarting || (path === FEED_PATH && !watching)) return;
    if (watching) problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on("framenavigated", (f) => {
    if (f === page.mainFrame()) seen.reloads += 1;
  });
  page.on("response", async (r) => {
    seen.requests += 1;
    const path = new URL(r.url()).pathname;
    if (path === FEED_PATH && r.status() === 200) seen.feedOpened += 1;
    if (path === "/threads" && r.request().method() === "GET") seen.polls += 1;
    if (!watching || r.status() < 400) return;
    let keyless = false;
    try {
      keyless = !(await r.request().allHeaders()).authorization;
    } catch {
      // The page went away meanwhile: count the answer as unexpected.
    }
    if (expected(r.status(), r.url(), keyless)) return;
    problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
  });

  await page.goto(new URL("/console", gateway).href);
  if (key) {
    // The console tried without a key, got a 401, and asks for one.
    await page.locator("#conn").getByText(/needs an API key/).waitFor();
    await page.getByLabel("API key").fill(key);
    await page.getByRole("button", { name: "Connect" }).click();
  }
  // Without inbound auth: connected with no click.
  await page.getByText(/^Connected:/).waitFor();
  seen.clicked = Boolean(key);

  if (unreachable) {
    // The inbox says the agent could not be reached, and so does its own list.
    const note = page.locator(`#inbox li.unreachable[data-agent="${unreachable}"]`);
    await note.waitFor();
    seen.inboxUnreachable = (await note.innerText()).trim();
    await page.screenshot({ path: join(shots, "00-unreachable.png") });
    const agent = page.locator("#agent");
    const before = await agent.inputValue();
    await agent.selectOption(unreachable);
    const listed = page.locator(`#agent-threads li.unreachable[data-agent="${unreachable}"]`);
    await listed.waitFor();
    seen.listUnreachable = (await listed.innerText()).trim();
    await page.screenshot({ path: join(shots, "00-unreachable-list.png") });
    await agent.selectOption(before);
    await listed.waitFor({ state: "detached" });
  }

  // The inbox lists the waiting thread (from the feed, or polled); open it.
  const inbox = page.locator("#inbox");
  const item = thread
    ? inbox.locator(`button[data-thread="${thread}"]`)
    : inbox.locator("button").first();
  await item.waitFor();
  await page.screenshot({ path: join(shots, "01-inbox.png") });
  const loaded = seen.reloads;
  if (newApproval) await liveApproval(page, inbox);
  if (restart) await restartGateway(page, inbox);
  if (seen.reloads !== loaded) throw new Error(`the page was reloaded (${seen.reloads - loaded} times)`);
  seen.mode = seen.feedOpened ? "feed" : "poll";
  if (feed && (seen.mode !== "feed" || seen.polls)) {
    throw new Error(`the console did not follow the feed: ${seen.feedOpened} feeds, ${seen.polls} polls`);
  }
  await item.click();

  // The thread: its question and the generated answer form.
  const form = page.locator("#pending form.interrupt").first();
  await form.waitFor();
  const question = (await form.locator(".question").textContent()).trim();
  await page.screenshot({ path: join(shots, "02-thread.png") });
  if (docShot) {
    // The README's picture: the top of the page at a laptop size.
    await page.setViewportSize({ width: 1200, height: 760 });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: resolve(root, docShot) });
    await page.setViewportSize({ width: 1280, height: 860 });
  }

  // Phone width: the same view, one column.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(shots, "03-phone.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 860 });

  // Answer: approve buttons when the schema asks for an approval, else the text field.
  const approve = form.getByRole("button", { name: "Approve" });
  if (await approve.count()) {
    await approve.click();
  } else {
    await form.getByLabel("Your answer").fill(answer);
    await form.getByRole("button", { name: "Send answer" }).click();
  }

  // The resumed run streams live; wait for its completion text and outcome.
  const live = page.locator("#live");
  await live.getByText(expect).waitFor({ timeout: 30000 });
  await page.locator("#outcome").getByText("Completed.").waitFor();
  seen.streamed = (await live.innerText()).trim();
  // The conversation is reloaded: nothing pending any more.
  await page.locator("#pending-box").waitFor({ state: "hidden" });
  await page.screenshot({ path: join(shots, "04-answered.png"), fullPage: true });
  seen.question = question;
  watching = false;
}

/** The threads the inbox lists now. */
async function inboxThreads(inbox) {
  return inbox.locator("button[data-thread]").evaluateAll((bs) => bs.map((b) => b.getAttribute("data-thread")).sort());
}

/** A run on `newApproval` that ends waiting for approval; it must show up without a reload. */
async function liveApproval(page, inbox) {
  const threadId = "console-live-" + randomBytes(6).toString("hex");
  const input = {
    threadId,
    runId: "console-live-run",
    protocolVersion: "1.0",
    messages: [{ id: "console-live-msg", role: "user", content: "approve" }],
    state: {},
    tools: [],
    context: [],
    forwardedProps: {},
  };
  const h = { "Content-Type": "application/json", Accept: "text/event-stream" };
  if (key) h.Authorization = "Bearer " + key;
  const resp = await fetch(new URL(`/agents/${encodeURIComponent(newApproval)}`, gateway), {
    method: "POST",
    headers: h,
    body: JSON.stringify(input),
    signal: AbortSignal.timeout(20000),
  });
  const body = await resp.text();
  if (resp.status !== 200 || !body.includes('"interrupt"')) {
    throw new Error(`the approval run did not wait for input: HTTP ${resp.status} ${body.slice(-300)}`);
  }
  const started = Date.now();
  const within = feed ? LIVE_WITHIN_MS : POLL_WITHIN_MS;
  await inbox.locator(`button[data-thread="${threadId}"]`).waitFor({ timeout: within });
  seen.liveApproval = { thread: threadId, ms: Date.now() - started };
  await page.screenshot({ path: join(shots, "01-live-approval.png") });
}

/** Asks the caller to restart the gateway; the console must reconnect and show the same inbox. */
async function restartGateway(page, inbox) {
  const before = await inboxThreads(inbox);
  const opened = seen.feedOpened;
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  restarting = true;
  process.stdout.write("RESTART\n");
  const answer = await Promise.race([
    lines.next(),
    new Promise((_, reject) => setTimeout(() => reject(new Error("no RESTARTED on stdin")), 60000)),
  ]);
  if (answer.done || answer.value.trim() !== "RESTARTED") throw new Error(`expected RESTARTED, got ${answer.value}`);
  const back = Date.now();
  // Reconnected: a new feed answered (or, without the feed, a poll), and the same threads wait.
  const polls = seen.polls;
  await page.waitForFunction(
    () => /live|updated/.test(document.getElementById("inbox-status").textContent),
    null,
    { timeout: RECONNECT_WITHIN_MS },
  );
  const deadline = Date.now() + RECONNECT_WITHIN_MS;
  while ((feed ? seen.feedOpened === opened : seen.polls === polls) && Date.now() < deadline) {
    await page.waitForTimeout(100);
  }
  if (feed ? seen.feedOpened === opened : seen.polls === polls) throw new Error("the console did not reconnect");
  let after = await inboxThreads(inbox);
  while (JSON.stringify(after) !== JSON.stringify(before) && Date.now() < deadline) {
    await page.waitForTimeout(100);
    after = await inboxThreads(inbox);
  }
  restarting = false;
  if (JSON.stringify(after) !== JSON.stringify(before)) {
    throw new Error(`after the restart the inbox shows ${after.join(", ")}, before ${before.join(", ")}`);
  }
  seen.reconnected = { ms: Date.now() - back, threads: after };
  await page.screenshot({ path: join(shots, "01-reconnected.png") });
}

let failure = null;
try {
  await check();
} catch (e) {
  failure = e.stack || String(e);
} finally {
  watching = false;
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
const ok = !failure && problems.length === 0;
console.log(JSON.stringify({ ok, failure, problems, upstream, ...seen }));
process.exit(ok ? 0 : 1);
