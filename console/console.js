// The review console (docs/design.md#3-http-surface, docs/design.md#7-human-in-the-loop): a plain client of the gateway's own HTTP API.
// On load it connects without a key; only a 401 (inbound auth) asks for one. The API key is
// typed once and kept in sessionStorage (this tab only); every call carries it as
// `Authorization: Bearer`. Nothing is loaded from anywhere but this gateway.
// An agent the gateway cannot read is said so ("could not be reached"), in the inbox
// (its `unavailable`) and in that agent's list (a 502/504): never an empty list in its place.
// The inbox follows the gateway's change feed `GET /threads/events` (docs/design.md#3-http-surface):
// read with fetch (EventSource cannot send the key), one snapshot then one change per thread,
// `Last-Event-ID` sent back on reconnect, reconnects with a bounded backoff. A gateway without
// the feed (404) is polled instead, every POLL_MS.

const KEY_STORE = "agui-a2a-gateway.console.key";
const POLL_MS = 4000;
const FEED_PATH = "/threads/events";
/** Waits before each reconnect of the feed; the last one repeats. */
const FEED_BACKOFF_MS = [250, 500, 1000, 2000, 4000, 8000];
/** Nothing at all (not even a keep-alive) for this long: the feed is taken as lost. */
const FEED_IDLE_MS = 60000;
/** The most an event, or an unfinished line, may hold; more ends the feed. */
const FEED_MAX_EVENT_CHARS = 1 << 20;

const $ = (id) => document.getElementById(id);

/** Mutable page state. */
const ui = {
  key: null,
  connected: false,
  agents: [],
  agent: null,
  /** The open conversation: {agent, threadId, detail}. */
  open: null,
  running: false,
  polling: null,
  polled: false,
  /** The feed while it is followed: {abort, lastId, tries, timer, idle, live}; null otherwise. */
  feed: null,
  /** The inbox the feed keeps: "agent\u0000threadId" -> item of `GET /threads`. */
  threads: new Map(),
  unavailable: [],
};

// ---------------------------------------------------------------------------------------
// Small helpers

/** An element with attributes and children (strings become text, never HTML). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** A random id; works outside secure contexts too (plain http on a LAN address). */
export function newId(prefix) {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return prefix + "-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (typeof p === "string" ? p : p?.text ?? "")).join("");
  }
  if (content === undefined || content === null) return "";
  return JSON.stringify(content, null, 2);
}

// ---------------------------------------------------------------------------------------
// Errors

/** An HTTP error answered before any stream: the gateway's `{"error": {code, message}}`. */
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function showError(err) {
  let text;
  if (err instanceof ApiError) {
    text = `HTTP ${err.status} ${err.code}: ${err.message}`;
    if (err.status === 401) text += " — check the API key.";
  } else if (err && err.runError) {
    text = `The run failed (RUN_ERROR ${err.code || "error"}): ${err.message}`;
  } else {
    text = `Could not reach the gateway: ${err && err.message ? err.message : err}`;
  }
  $("error-text").textContent = text;
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error-text").textContent = "";
}

async function apiError(resp) {
  let code = "http_" + resp.status;
  let message = resp.statusText || "request failed";
  try {
    const body = await resp.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiError(resp.status, code, message);
}

// ---------------------------------------------------------------------------------------
// The API

function headers(extra = {}) {
  const h = { Accept: "application/json", ...extra };
  if (ui.key) h.Authorization = "Bearer " + ui.key;
  return h;
}

async function getJson(path) {
  const resp = await fetch(path, { headers: headers(), cache: "no-store" });
  if (!resp.ok) throw await apiError(resp);
  return resp.json();
}

const enc = encodeURIComponent;

/**
 * POSTs a RunAgentInput to `/agents/{agent}` and calls `onEvent` for each AG-UI event of
 * the SSE answer as it arrives. Throws an ApiError for an HTTP error before the stream.
 */
async function runStream(agent, input, onEvent) {
  const resp = await fetch(`/agents/${enc(agent)}`, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(input),
    cache: "no-store",
  });
  if (!resp.ok) throw await apiError(resp);
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  const parser = sseParser(onEvent);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.push(decoder.decode(value, { stream: true }));
  }
  parser.push(decoder.decode());
  parser.end();
}

/**
 * An incremental SSE parser: the `data:` lines of each event, joined, parsed as JSON, handed to
 * `onEvent(data, {event, id})` (`event`: the event's name, "message" without one; `id`: the
 * last `id:` seen, as EventSource keeps it). With `maxChars`, an event or an unfinished line
 * longer than that throws.
 */
export function sseParser(onEvent, maxChars = Infinity) {
  let buffer = "";
  let data = [];
  let size = 0;
  let name = "";
  let lastId = "";
  const dispatch = () => {
    const event = name || "message";
    name = "";
    size = 0;
    if (data.length === 0) return;
    const text = data.join("\n");
    data = [];
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      return; // Not JSON: not an event of ours.
    }
    onEvent(parsed, { event, id: lastId });
  };
  const field = (l, f) => {
    let v = l.slice(f.length + 1);
    if (v.startsWith(" ")) v = v.slice(1);
    return v;
  };
  const line = (raw) => {
    const l = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (l === "") return dispatch();
    if (l.startsWith(":")) return; // A comment (keep-alive).
    if (l === "data" || l.startsWith("data:")) {
      const v = field(l, "data");
      size += v.length;
      if (size > maxChars) throw new Error("an event of the stream is too large");
      data.push(v);
    } else if (l.startsWith("event:")) {
      name = field(l, "event");
    } else if (l.startsWith("id:")) {
      const v = field(l, "id");
      if (!v.includes("\0")) lastId = v;
    }
  };
  return {
    push(chunk) {
      buffer += chunk;
      let i;
      while ((i = buffer.indexOf("\n")) >= 0) {
        line(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
      }
      if (buffer.length > maxChars) throw new Error("a line of the stream is too large");
    },
    end() {
      if (buffer) line(buffer);
      buffer = "";
      dispatch();
    },
  };
}

// ---------------------------------------------------------------------------------------
// Connecting

/**
 * Connects with `key` (none: without a key). `firstTry`: the keyless attempt made on load,
 * whose 401 only means the gateway wants a key: it asks for one, it is not an error.
 */
async function connect(key, firstTry = false) {
  ui.key = key || null;
  const conn = $("conn");
  conn.className = "conn";
  conn.textContent = "Connecting…";
  try {
    const { agents } = await getJson("/agents");
    ui.agents = agents || [];
  } catch (err) {
    ui.connected = false;
    const refused = err instanceof ApiError && err.status === 401;
    if (refused && firstTry) {
      conn.textContent = "This gateway needs an API key: enter it above.";
    } else {
      conn.className = "conn bad";
      conn.textContent = refused ? "The gateway refused this key." : "Not connected.";
      showError(err);
    }
    $("key").focus();
    return;
  }
  if (key) sessionStorage.setItem(KEY_STORE, key);
  else sessionStorage.removeItem(KEY_STORE);
  ui.connected = true;
  clearError();
  conn.className = "conn ok";
  conn.textContent = `Connected: ${ui.agents.length} agent${ui.agents.length === 1 ? "" : "s"}.`;
  $("forget").hidden = !key;
  $("key").value = "";
  $("key").placeholder = key ? "•••••• (kept for this tab)" : "";
  $("app").hidden = false;
  renderAgents();
  startLive();
}

function forget() {
  sessionStorage.removeItem(KEY_STORE);
  ui.key = null;
  ui.connected = false;
  stopLive();
  $("app").hidden = true;
  $("forget").hidden = true;
  $("key").placeholder = "";
  $("conn").className = "conn";
  $("conn").textContent = "Key forgotten. Not connected: enter a key to connect.";
  $("key").focus();
}

// ---------------------------------------------------------------------------------------
// Agents, inbox, thread lists (live status: the feed, else polled)

function renderAgents() {
  const select = $("agent");
  select.replaceChildren(
    ...ui.agents.map((a) =>
      el("option", { value: a.name, text: a.ready === false ? `${a.name} (not ready)` : a.name }),
    ),
  );
  if (!ui.agent || !ui.agents.some((a) => a.name === ui.agent)) {
    ui.agent = ui.agents[0]?.name ?? null;
  }
  if (ui.agent) select.value = ui.agent;
  renderAgentInfo();
}

function renderAgentInfo() {
  const a = ui.agents.find((x) => x.name === ui.agent);
  $("agent-info").textContent = a
    ? [a.description, a.protocolVersion && `A2A ${a.protocolVersion}`].filter(Boolean).join(" · ")
    : "No agent configured.";
}

function threadButton(t, agent) {
  const current = ui.open && ui.open.agent === agent && ui.open.threadId === t.threadId;
  return el(
    "li",
    {},
    el(
      "button",
      {
        type: "button",
        "aria-current": current ? "true" : null,
        "data-thread": t.threadId,
        "data-agent": agent,
        onclick: () => openThread(agent, t.threadId, true),
      },
      el("span", { class: "tid", text: t.threadId }),
      el(
        "span",
        { class: "meta" },
        `${agent} · ${t.status}${t.lastTask?.updatedAt ? " · " + when(t.lastTask.updatedAt) : ""}`,
      ),
    ),
  );
}

/** Replaces a list's items, keeping keyboard focus on the same thread if it had it. */
function replaceList(list, items) {
  const focused = list.contains(document.activeElement)
    ? document.activeElement.getAttribute("data-thread")
    : null;
  list.replaceChildren(...items);
  if (focused) {
    const again = [...list.querySelectorAll("button")].find(
      (b) => b.getAttribute("data-thread") === focused,
    );
    if (again) again.focus();
  }
}

/** The codes of an agent the gateway could not read (a 502 / 504, or the inbox's `unavailable`). */
const UNREACHABLE = { upstream_unavailable: "", upstream_timeout: " in time" };

/** The line that stands for an agent's threads when the gateway could not read them. */
function unreachableItem(agent, code, detail) {
  return el(
    "li",
    { class: "unreachable", "data-agent": agent },
    el("strong", { text: `Agent ${agent} could not be reached${UNREACHABLE[code] ?? ""}.` }),
    " ",
    el("span", { text: "Its conversations are not shown." }),
    detail ? el("span", { class: "detail", text: detail }) : null,
  );
}

/** The inbox: the threads waiting for a human, and the agents that could not be read. */
function renderInbox(threads, unavailable, note) {
  const items = threads.map((t) => threadButton(t, t.agent));
  const down = unavailable.map((u) => unreachableItem(u.agent, u.code));
    // "Nothing waits" only for agents that answered: an unreachable one says so instead.
  const nothing = down.length
    ? "Nothing waits for a human on the other agents."
    : "Nothing waits for a human.";
  const answered = down.length < ui.agents.length;
  replaceList($("inbox"), [
    ...down,
    ...(items.length ? items : answered ? [el("li", { class: "muted", text: nothing })] : []),
  ]);
  const downText = down.length
    ? ` · ${down.length} agent${down.length === 1 ? "" : "s"} could not be reached`
    : "";
  $("inbox-status").textContent =
    `${items.length} waiting${downText} · ${note} ${new Date().toLocaleTimeString()}`;
}

/** The lists now: the inbox from the feed (or one poll without it) and the agent's list. */
async function refreshLists() {
  if (!ui.connected) return;
  try {
    if (ui.feed) {
      if (ui.feed.live) renderFeedInbox();
    } else {
      const inbox = await getJson("/threads?status=input-required");
      renderInbox(inbox.threads || [], inbox.unavailable || [], "updated");
    }
    if (ui.agent) await refreshAgentThreads(ui.agent);
    ui.polled = true;
  } catch (err) {
    $("inbox-status").textContent = "Could not refresh.";
    showError(err);
    if (err instanceof ApiError && err.status === 401) stopLive();
  }
}

/** The agent's conversations; when the gateway cannot read the agent, that (not an empty list). */
async function refreshAgentThreads(agent) {
  let items;
  try {
    const mine = await getJson(`/agents/${enc(agent)}/threads?pageSize=20`);
    items = (mine.threads || []).map((t) => threadButton(t, agent));
    if (!items.length) items = [el("li", { class: "muted", text: "No conversations yet." })];
  } catch (err) {
    if (!(err instanceof ApiError && Object.hasOwn(UNREACHABLE, err.code))) throw err;
    items = [unreachableItem(agent, err.code, err.message)];
  }
  // The reviewer may have picked another agent meanwhile.
  if (agent === ui.agent) replaceList($("agent-threads"), items);
}

function startPolling() {
  stopPolling();
  ui.feed = null;
  refreshLists();
  ui.polling = setInterval(() => {
    if (!document.hidden) refreshLists();
  }, POLL_MS);
}

function stopPolling() {
  if (ui.polling) clearInterval(ui.polling);
  ui.polling = null;
}

// ---------------------------------------------------------------------------------------
// The change feed (GET /threads/events)

const threadKey = (t) => `${t.agent}\u0000${t.threadId}`;

/** Follows the feed; falls back to polling when the gateway has none (404). */
function startLive() {
  stopLive();
  ui.feed = { abort: null, lastId: "", tries: 0, timer: null, idle: null, live: false };
  followFeed(ui.feed);
  refreshLists();
}

function stopLive() {
  stopPolling();
  const feed = ui.feed;
  ui.feed = null;
  if (!feed) return;
  clearTimeout(feed.timer);
  clearTimeout(feed.idle);
  if (feed.abort) feed.abort.abort();
}

function renderFeedInbox() {
  const waiting = [...ui.threads.values()]
    .filter((t) => t.status === "input-required")
    .sort((a, b) => String(b.lastTask?.updatedAt ?? "").localeCompare(String(a.lastTask?.updatedAt ?? "")));
  renderInbox(waiting, ui.unavailable, "live, updated");
}

/** Reloads the agent's list and the open conversation soon after changes (once per burst). */
let changedSoon = null;
function afterChange(items) {
  const agentChanged = items.some((t) => t.agent === ui.agent);
  const openChanged =
    ui.open && items.some((t) => t.agent === ui.open.agent && t.threadId === ui.open.threadId);
  if (!agentChanged && !openChanged) return;
  clearTimeout(changedSoon);
  changedSoon = setTimeout(async () => {
    if (!ui.connected) return;
    if (agentChanged && ui.agent) {
      try {
        await refreshAgentThreads(ui.agent);
      } catch (err) {
        showError(err);
      }
    }
    if (openChanged && ui.open && !ui.running) openThread(ui.open.agent, ui.open.threadId, false, true);
  }, 200);
}

/** One feed event (docs/design.md#3-http-surface): a snapshot, a thread's change, or an error. */
function onFeedEvent(feed, data, { event, id }) {
  if (feed !== ui.feed || feed.ended) return;
  if (id) feed.lastId = id;
  if (event === "snapshot") {
    const again = feed.live;
    feed.tries = 0;
    feed.live = true;
    ui.threads = new Map((data.threads || []).map((t) => [threadKey(t), t]));
    ui.unavailable = data.unavailable || [];
    renderFeedInbox();
    // After a reconnect the agent's list may have changed too (it was loaded on connect).
    afterChange([...ui.threads.values(), ...(again && ui.agent ? [{ agent: ui.agent }] : [])]);
  } else if (event === "thread" && data && data.agent && data.threadId) {
    ui.threads.set(threadKey(data), data);
    // An agent that answers again is no longer unavailable.
    ui.unavailable = ui.unavailable.filter((u) => u.agent !== data.agent);
    if (feed.live) renderFeedInbox();
    afterChange([data]);
  } else if (event === "error") {
    // The gateway ends the feed after this event (a slow reader, a limit): read it to its end.
    feed.ended = data?.error?.message || data?.message || "the gateway ended the feed";
  }
}

async function followFeed(feed) {
  const abort = new AbortController();
  feed.abort = abort;
  feed.ended = null;
  let reading = false;
  const idle = () => {
    clearTimeout(feed.idle);
    feed.idle = setTimeout(() => abort.abort(), FEED_IDLE_MS);
  };
  let why;
  try {
    const h = headers({ Accept: "text/event-stream" });
    if (feed.lastId) h["Last-Event-ID"] = feed.lastId;
    idle();
    const resp = await fetch(FEED_PATH, { headers: h, cache: "no-store", signal: abort.signal });
    if (resp.status === 404) {
      // A gateway without the feed: poll it.
      await resp.text().catch(() => "");
      clearTimeout(feed.idle);
      if (feed === ui.feed) startPolling();
      return;
    }
    if (!resp.ok) {
      const err = await apiError(resp);
      if (err.status === 401) {
        clearTimeout(feed.idle);
        if (feed === ui.feed) {
          showError(err);
          stopLive();
        }
        return;
      }
      throw err;
    }
    reading = true;
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    const parser = sseParser((data, meta) => onFeedEvent(feed, data, meta), FEED_MAX_EVENT_CHARS);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      idle();
      parser.push(decoder.decode(value, { stream: true }));
    }
    parser.end();
    reading = false;
    why = feed.ended || "the feed ended";
  } catch (err) {
    why = err && err.message ? err.message : String(err);
    if (abort.signal.aborted && feed !== ui.feed) return;
  } finally {
    clearTimeout(feed.idle);
    // A stream still open (too large an event, no data for too long): cut it.
    if (reading) abort.abort();
  }
  if (feed !== ui.feed) return;
  // Lost: reconnect after a bounded backoff, asking to resume where it stopped.
  const wait = FEED_BACKOFF_MS[Math.min(feed.tries, FEED_BACKOFF_MS.length - 1)];
  feed.tries += 1;
  $("inbox-status").textContent = `Reconnecting… (${why}); the list may be out of date.`;
  feed.timer = setTimeout(() => {
    if (feed === ui.feed) followFeed(feed);
  }, wait);
}

// ---------------------------------------------------------------------------------------
// One conversation

async function openThread(agent, threadId, focus, keepError = false) {
  let detail;
  try {
    detail = await getJson(`/agents/${enc(agent)}/threads/${enc(threadId)}`);
  } catch (err) {
    showError(err);
    return;
  }
  if (!keepError) clearError();
  const same = ui.open && ui.open.agent === agent && ui.open.threadId === threadId;
  ui.open = { agent, threadId, detail };
  if (!same && !ui.running) resetLive();
  renderThread();
  for (const b of document.querySelectorAll(".threads button")) {
    const cur = b.getAttribute("data-agent") === agent && b.getAttribute("data-thread") === threadId;
    if (cur) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
  if (focus) {
    const first = document.querySelector("#pending input, #pending textarea, #pending select, #pending button");
    (first || $("thread")).focus();
    $("thread").scrollIntoView({ block: "start" });
  }
}

function renderThread() {
  const { agent, threadId, detail } = ui.open;
  $("thread-h").textContent = threadId;
  const badge = $("thread-status");
  badge.hidden = false;
  badge.className = "badge " + (detail.status || "");
  badge.textContent = detail.status || "unknown";
  const last = detail.lastTask;
  $("thread-meta").textContent = [
    `Agent ${agent}`,
    last?.id && `task ${last.id} (${last.state})`,
    last?.updatedAt && when(last.updatedAt),
  ].filter(Boolean).join(" · ");

  // Pending interrupts, each with its form.
  const pending = Array.isArray(detail.pendingInterrupts) ? detail.pendingInterrupts : [];
  $("pending-box").hidden = pending.length === 0;
  $("pending").replaceChildren(...pending.map((p) => interruptForm(p)));

  // Messages.
  const messages = (detail.messages || []).filter((m) => m.role !== "activity");
  $("messages-box").hidden = messages.length === 0;
  $("messages").replaceChildren(...messages.map(messageItem));

  // Artifacts from state.view.artifacts.
  const artifacts = Object.values(detail.state?.view?.artifacts || {});
  $("artifacts-box").hidden = artifacts.length === 0;
  $("artifacts").replaceChildren(...artifacts.map(artifactItem));

  $("reply-form").hidden = false;
}

function messageItem(m) {
  let body = textOf(m.content);
  if (!body && Array.isArray(m.toolCalls)) {
    body = m.toolCalls
      .map((c) => `→ ${c.function?.name ?? "tool"}(${c.function?.arguments ?? ""})`)
      .join("\n");
  }
  return el(
    "li",
    { class: "msg " + (m.role || "") },
    el("span", { class: "role", text: m.role || "message" }),
    el("p", { text: body }),
  );
}

function artifactItem(a) {
  const parts = Array.isArray(a.parts) ? a.parts : [];
  const shown = parts.map((p) => {
    if (p.type === "text") return el("pre", { text: p.text ?? "" });
    if (p.type === "data") return el("pre", { text: JSON.stringify(p.data, null, 2) });
    if (p.type === "file") {
      return el("p", { text: `File ${p.filename || p.url || ""} ${p.mediaType || ""}`.trim() });
    }
    return el("pre", { text: JSON.stringify(p) });
  });
  return el(
    "li",
    {},
    el("strong", { text: a.name || a.artifactId }),
    a.description ? el("span", { class: "muted", text: " — " + a.description }) : null,
    a.complete === false ? el("span", { class: "muted", text: " (still arriving)" }) : null,
    shown.length ? shown : el("pre", { text: a.text ?? "" }),
  );
}

// ---------------------------------------------------------------------------------------
// Answer forms, generated from the interrupt's responseSchema (docs/design.md#7-human-in-the-loop)

/** The schema an answer should follow: `responseSchema`, or the schema of the request. */
export function schemaOf(p) {
  if (p.responseSchema && typeof p.responseSchema === "object") return p.responseSchema;
  const reqs = Array.isArray(p.request) ? p.request : [p.request];
  for (const r of reqs) {
    if (r && typeof r === "object" && r.schema && typeof r.schema === "object") return r.schema;
  }
  return null;
}

let fieldSeq = 0;

function fieldFor(name, prop, required) {
  const id = `f${++fieldSeq}`;
  const title = prop.title || name;
  const help = prop.description ? el("p", { class: "help", id: id + "-h", text: prop.description }) : null;
  const described = help ? id + "-h" : null;
  let input;
  let read;
  if (prop.type === "boolean") {
    input = el("input", { id, type: "checkbox", "aria-describedby": described });
    if (prop.default === true) input.checked = true;
    read = () => input.checked;
    return {
      node: el("div", { class: "field check" }, input, el("label", { for: id, text: title }), help),
      read,
    };
  }
  if (Array.isArray(prop.enum)) {
    input = el(
      "select",
      { id, required, "aria-describedby": described },
      required ? null : el("option", { value: "", text: "—" }),
      prop.enum.map((v, i) => el("option", { value: String(i), text: String(v) })),
    );
    read = () => (input.value === "" ? undefined : prop.enum[Number(input.value)]);
  } else if (prop.type === "number" || prop.type === "integer") {
    input = el("input", {
      id, type: "number", required, "aria-describedby": described,
      step: prop.type === "integer" ? "1" : "any", min: prop.minimum, max: prop.maximum,
    });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (prop.type === "object" || prop.type === "array") {
    input = el("textarea", { id, rows: 3, required, "aria-describedby": described, placeholder: "JSON" });
    read = () => {
      if (input.value.trim() === "") return undefined;
      try {
        return JSON.parse(input.value);
      } catch {
        throw new Error(`${title}: not valid JSON`);
      }
    };
  } else {
    const long = (prop.maxLength ?? 0) > 200 || prop.format === "textarea";
    input = el(long ? "textarea" : "input", {
      id, type: long ? null : "text", required, "aria-describedby": described,
      maxlength: prop.maxLength, rows: long ? 3 : null,
    });
    read = () => (input.value === "" ? undefined : input.value);
  }
  return {
    node: el("div", { class: "field" }, el("label", { for: id, text: title + (required ? " (required)" : "") }), input, help),
    read,
  };
}

/** An approval key: a boolean property named approved / approve. */
function approvalKey(schema) {
  const props = schema?.properties || {};
  return ["approved", "approve"].find((k) => props[k]?.type === "boolean") ?? null;
}

function interruptForm(p) {
  const schema = schemaOf(p);
  const question = p.message || (p.reason === "a2a:auth_required"
    ? "The agent needs authentication."
    : "The agent waits for input.");
  const form = el("form", { class: "interrupt", "aria-label": "Answer: " + question });
  const buttons = el("div", { class: "actions" });
  form.append(
    el("p", { class: "question", text: question }),
    el("p", { class: "muted", text: `${p.reason === "a2a:auth_required" ? "Authentication" : "Input"} required · task ${p.taskId ?? "?"}` }),
  );

  /** Sends the answer: `payload()` builds it (may throw a validation message). */
  const send = (status, payload) => async (ev) => {
    if (ev) ev.preventDefault();
    let value;
    if (status === "resolved") {
      try {
        value = payload();
      } catch (err) {
        showError(new Error(err.message));
        return;
      }
    }
    await resume(p, status, value, form);
  };

  const type = schema?.type;
  const props = schema?.properties && typeof schema.properties === "object" ? schema.properties : null;

  if (type === "boolean") {
    buttons.append(
      el("button", { type: "button", onclick: send("resolved", () => true) }, "Approve"),
      el("button", { type: "button", class: "reject", onclick: send("resolved", () => false) }, "Reject"),
    );
  } else if (props && Object.keys(props).length) {
    const approval = approvalKey(schema);
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(props)
      .filter(([k]) => k !== approval)
      .map(([k, prop]) => [k, fieldFor(k, prop || {}, required.has(k) && k !== approval)]);
    const fs = el("fieldset", {}, el("legend", { class: "muted", text: schema.title || "Your answer" }));
    for (const [, f] of fields) fs.append(f.node);
    if (fields.length) form.append(fs);
    const collect = (extra) => () => {
      const out = { ...extra };
      for (const [k, f] of fields) {
        const v = f.read();
        if (v !== undefined) out[k] = v;
      }
      return out;
    };
    if (approval) {
      buttons.append(
        el("button", { type: "submit" }, "Approve"),
        el("button", { type: "button", class: "reject", onclick: (ev) => {
          if (form.reportValidity()) send("resolved", collect({ [approval]: false }))(ev);
        } }, "Reject"),
      );
      form.addEventListener("submit", send("resolved", collect({ [approval]: true })));
    } else {
      buttons.append(el("button", { type: "submit" }, "Send answer"));
      form.addEventListener("submit", send("resolved", collect({})));
    }
  } else if (type === "string" || type === "number" || type === "integer") {
    const f = fieldFor("answer", { ...schema, title: "Your answer" }, true);
    form.append(f.node);
    buttons.append(el("button", { type: "submit" }, "Send answer"));
    form.addEventListener("submit", send("resolved", () => f.read()));
  } else {
    // No schema (or any JSON): free text, sent as a string.
    const id = `f${++fieldSeq}`;
    const area = el("textarea", { id, rows: 2, required: true });
    form.append(el("div", { class: "field" }, el("label", { for: id, text: "Your answer" }), area));
    buttons.append(el("button", { type: "submit" }, "Send answer"));
    form.addEventListener("submit", send("resolved", () => area.value));
  }
  buttons.append(
    el("button", { type: "button", class: "danger", onclick: send("cancelled") }, "Cancel the task"),
  );
  form.append(buttons);
  return form;
}

// ---------------------------------------------------------------------------------------
// Runs: resume, new conversation, follow-up; the live stream

function setBusy(busy) {
  ui.running = busy;
  for (const b of document.querySelectorAll("#pending button, #reply-form button, #new-form button")) {
    b.disabled = busy;
  }
}

function resetLive() {
  $("live").replaceChildren();
  const out = $("outcome");
  out.textContent = "";
  out.className = "outcome";
  $("live-box").hidden = true;
}

/** Renders one run's events into the live panel; resolves with the terminal event. */
function liveRenderer() {
  resetLive();
  $("live-box").hidden = false;
  const live = $("live");
  const texts = new Map();
  const tools = new Map();
  let terminal = null;
  const note = (t) => live.append(el("p", { class: "event", text: t }));
  const bubble = (id, role) => {
    let b = texts.get(id);
    if (!b) {
      const p = el("p", {});
      const node = el("div", { class: "msg " + (role || "assistant") }, el("span", { class: "role", text: role || "assistant" }), p);
      live.append(node);
      b = { p };
      texts.set(id, b);
    }
    return b;
  };
  const onEvent = (e) => {
    switch (e.type) {
      case "RUN_STARTED":
        note("Run started.");
        break;
      case "TEXT_MESSAGE_START":
        bubble(e.messageId, e.role);
        break;
      case "TEXT_MESSAGE_CONTENT":
        bubble(e.messageId).p.append(document.createTextNode(e.delta ?? ""));
        break;
      case "TEXT_MESSAGE_CHUNK":
        bubble(e.messageId, e.role).p.append(document.createTextNode(e.delta ?? ""));
        break;
      case "TOOL_CALL_START":
        tools.set(e.toolCallId, el("pre", { text: `→ ${e.toolCallName}(` }));
        live.append(tools.get(e.toolCallId));
        break;
      case "TOOL_CALL_ARGS":
        tools.get(e.toolCallId)?.append(document.createTextNode(e.delta ?? ""));
        break;
      case "TOOL_CALL_END":
        tools.get(e.toolCallId)?.append(document.createTextNode(")"));
        break;
      case "TOOL_CALL_RESULT":
        live.append(el("pre", { text: `← ${textOf(e.content)}` }));
        break;
      case "ACTIVITY_SNAPSHOT":
        if (e.activityType === "INPUT_REQUIRED" && e.content?.stage === "awaiting_input") {
          note("The agent asks: " + (e.content.message || "for input"));
        }
        break;
      case "ACTIVITY_DELTA":
        if ((e.patch || []).some((op) => op.path === "/stage" && op.value === "resolved")) {
          note("Answer accepted by the agent.");
        }
        break;
      case "RUN_FINISHED":
      case "RUN_ERROR":
        terminal = e;
        break;
      default:
        break;
    }
  };
  return { onEvent, terminal: () => terminal };
}

function showOutcome(terminal) {
  const out = $("outcome");
  if (!terminal) {
    out.className = "outcome bad";
    out.textContent = "The stream ended without a terminal event.";
    return;
  }
  if (terminal.type === "RUN_ERROR") {
    out.className = "outcome bad";
    out.textContent = `Run error (${terminal.code || "error"}): ${terminal.message || ""}`;
    showError({ runError: true, code: terminal.code, message: terminal.message || "" });
    return;
  }
  const outcome = terminal.outcome?.type ?? "success";
  if (outcome === "interrupt") {
    const asks = (terminal.outcome.interrupts || []).map((i) => i.message).filter(Boolean);
    out.className = "outcome wait";
    out.textContent = "Waiting for input" + (asks.length ? ": " + asks.join(" / ") : ".");
  } else if (outcome === "cancelled") {
    out.className = "outcome";
    out.textContent = "Cancelled.";
  } else {
    out.className = "outcome ok";
    out.textContent = "Completed.";
  }
}

/** Runs `input` on `agent`, streaming it live; then reloads the conversation and lists. */
async function run(agent, input) {
  clearError();
  setBusy(true);
  const view = liveRenderer();
  try {
    await runStream(agent, input, view.onEvent);
    showOutcome(view.terminal());
  } catch (err) {
    const out = $("outcome");
    out.className = "outcome bad";
    out.textContent = "The run was not started.";
    showError(err);
  } finally {
    setBusy(false);
  }
  // Reload the conversation (messages, artifacts, what is still pending); a run error stays shown.
  await openThread(agent, input.threadId, false, true);
  refreshLists();
}

function baseInput(threadId) {
  return {
    threadId,
    runId: newId("console-run"),
    protocolVersion: "1.0",
    tools: [],
    context: [],
    forwardedProps: {},
  };
}

async function resume(p, status, payload, form) {
  if (ui.running || !ui.open) return;
  const { agent, threadId, detail } = ui.open;
  const entry = { interruptId: p.id, status };
  if (status === "resolved") entry.payload = payload;
  const input = {
    ...baseInput(threadId),
    messages: detail.messages || [],
    state: detail.state || {},
    resume: [entry],
  };
  form.setAttribute("aria-busy", "true");
  $("live-box").scrollIntoView({ block: "nearest" });
  await run(agent, input);
}

async function startConversation(text) {
  if (!ui.agent || ui.running) return;
  const threadId = newId("console");
  const input = {
    ...baseInput(threadId),
    messages: [{ id: newId("console-msg"), role: "user", content: text }],
    state: {},
  };
  ui.open = { agent: ui.agent, threadId, detail: { messages: [], state: {} } };
  $("thread-h").textContent = threadId;
  $("thread-meta").textContent = `Agent ${ui.agent} · new conversation`;
  $("pending-box").hidden = true;
  $("messages-box").hidden = true;
  $("artifacts-box").hidden = true;
  $("thread").focus();
  await run(ui.agent, input);
}

async function reply(text) {
  if (!ui.open || ui.running) return;
  const { agent, threadId, detail } = ui.open;
  const input = {
    ...baseInput(threadId),
    messages: [...(detail.messages || []), { id: newId("console-msg"), role: "user", content: text }],
    state: detail.state || {},
  };
  await run(agent, input);
}

// ---------------------------------------------------------------------------------------
// Wiring

function init() {
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    connect($("key").value.trim());
  });
  $("forget").addEventListener("click", forget);
  $("error-close").addEventListener("click", clearError);
  $("refresh").addEventListener("click", refreshLists);
  $("agent").addEventListener("change", (ev) => {
    ui.agent = ev.target.value;
    renderAgentInfo();
    refreshLists();
  });
  // A text form: its trimmed text, if any, handed to `act` and the field cleared.
  const onText = (formId, fieldId, act) =>
    $(formId).addEventListener("submit", (ev) => {
      ev.preventDefault();
      const text = $(fieldId).value.trim();
      if (!text) return;
      $(fieldId).value = "";
      act(text);
    });
  onText("new-form", "new-text", startConversation);
  onText("reply-form", "reply-text", reply);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && ui.connected) refreshLists();
  });
  // A key kept for this tab, else none: an open gateway needs no click; one with inbound
  // auth answers 401 and the console asks for a key.
  const saved = sessionStorage.getItem(KEY_STORE);
  connect(saved, !saved);
}

init();
