// Drives the review console (/console) in headless Chromium (Debian's /usr/bin/chromium,
// through playwright-core): with --key, see the console ask for a key (its keyless first try
// got a 401), enter it and connect; without, see it connect by itself, with no click. Then
// open the inbox, open the waiting thread, answer its interrupt through the generated form,
// and wait for the streamed completion. With --unreachable NAME, first check that the inbox
// and NAME's own list say that agent could not be reached. Fails on any console error, failed
// request or 4xx/5xx answer but the expected ones (the keyless first try's 401 on /agents,
// the unreachable agent's 502/504). Screenshots go to target/console-screenshots.
//
//   node tests/browser/console.test.mjs --gateway URL [--key KEY] [--thread ID] [--answer yes]
//        [--expect "Approved:"] [--unreachable NAME] [--shots DIR] [--doc-shot docs/console.png]
// (or GATEWAY_URL, GATEWAY_KEY, CONSOLE_THREAD, CONSOLE_ANSWER, CONSOLE_EXPECT,
//  CONSOLE_UNREACHABLE, CONSOLE_SHOTS, CONSOLE_DOC_SHOT, CHROMIUM). Prints one JSON line with
// what it saw.

import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
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
if (!gateway) {
  console.error("usage: console.test.mjs --gateway URL [--key KEY] [--thread ID] [--unreachable NAME]");
  process.exit(2);
}

mkdirSync(shots, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), "console-chromium-"));
const problems = [];
const seen = { requests: 0, streamed: null };

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
    problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => watching && problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => {
    if (watching) problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on("response", async (r) => {
    seen.requests += 1;
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

  // The inbox lists the waiting thread (polled); open it.
  const inbox = page.locator("#inbox");
  const item = thread
    ? inbox.locator(`button[data-thread="${thread}"]`)
    : inbox.locator("button").first();
  await item.waitFor();
  await page.screenshot({ path: join(shots, "01-inbox.png") });
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
