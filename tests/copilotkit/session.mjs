// Drives the gateway's CopilotKit routes with CopilotKit's own client (@copilotkitnext/core,
// the core under @copilotkit/react-core v2): a page's CopilotKitCore pointed at the gateway by
// `runtimeUrl` only, as a React app would be. Usage:
//   node session.mjs '<json script>'
// Script: {"runtimeUrl": "...", "agentId": "...", "threadId": "...", "headers": {...}?,
//          "transport": "rest" | "single"?, "steps": [Step]}
// Step:   {"run": "text"}          the current page sends a user message and runs the agent
//         {"reload": true}         a new page (new CopilotKitCore): connectAgent on the thread
//         {"stopAfter": "text", "onEvent": "EVENT_TYPE"}
//                                  run `text`, call copilotkit.stopAgent on the first
//                                  `onEvent`, then wait for the run to end
// Prints one JSON object: {"steps": [{messages, events, errors, warnings, elapsedMs,
// connection}]}, where messages are what the agent holds after the step.
import { register } from "node:module";
import { captureWarnings } from "../client/warnings.mjs";

// Resolve packages as a bundler would (bundler-resolve.mjs says why), before loading them.
register("./bundler-resolve.mjs", import.meta.url);
const { CopilotKitCore, CopilotKitCoreRuntimeConnectionStatus } = await import("@copilotkitnext/core");

// CopilotKitCore reads the runtime's agents only in a browser (`typeof window`); this page
// has no DOM, and the core needs none.
globalThis.window ??= globalThis;

const script = JSON.parse(process.argv[2]);
const WAIT_MS = 20_000;
const warnings = captureWarnings();

function within(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${WAIT_MS} ms`)), WAIT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** A page: a CopilotKitCore on the runtime, connected, and its agent on the thread. */
async function openPage() {
  const errors = [];
  const core = new CopilotKitCore({
    runtimeUrl: script.runtimeUrl,
    runtimeTransport: script.transport ?? "rest",
    headers: script.headers ?? {},
  });
  const connected = new Promise((resolve) => {
    core.subscribe({
      onRuntimeConnectionStatusChanged: ({ status }) => {
        if (
          status === CopilotKitCoreRuntimeConnectionStatus.Connected ||
          status === CopilotKitCoreRuntimeConnectionStatus.Error
        ) {
          resolve(status);
        }
      },
      onError: ({ error, code }) => errors.push(`${code}: ${error?.message ?? error}`),
    });
  });
  const status =
    core.runtimeConnectionStatus === CopilotKitCoreRuntimeConnectionStatus.Connected
      ? core.runtimeConnectionStatus
      : await within(connected, "runtime info");
  const agent = core.getAgent(script.agentId);
  if (!agent) throw new Error(`agent ${script.agentId} not in ${Object.keys(core.agents)} (${status})`);
  agent.threadId = script.threadId;
  return { core, agent, errors, status };
}

function messages(agent) {
  return agent.messages.map((m) => ({
    id: m.id,
    role: m.role,
    content: typeof m.content === "string" ? m.content : m.content ?? null,
    toolCalls: m.toolCalls ?? [],
  }));
}

let page = await openPage();
const results = [];
let n = 0;
for (const step of script.steps) {
  n += 1;
  warnings.length = 0;
  page.errors.length = 0;
  const events = [];
  const started = Date.now();
  if (step.reload) page = await openPage();
  const listener = page.agent.subscribe({ onEvent: ({ event }) => events.push(event) });
  try {
    if (step.reload) {
      await within(page.core.connectAgent({ agent: page.agent }), "connectAgent");
    } else {
      const text = step.run ?? step.stopAfter;
      page.agent.addMessage({ id: `${script.threadId}-user-${n}`, role: "user", content: text });
      const running = page.core.runAgent({ agent: page.agent });
      if (step.stopAfter) {
        await within(
          new Promise((resolve) => {
            const watch = page.agent.subscribe({
              onEvent: ({ event }) => {
                if (event.type === step.onEvent) {
                  watch.unsubscribe();
                  resolve();
                }
              },
            });
          }),
          `a ${step.onEvent} event`,
        );
        page.core.stopAgent({ agent: page.agent });
      }
      await within(running, "runAgent");
    }
  } catch (e) {
    page.errors.push(`thrown: ${e?.message ?? e}`);
  } finally {
    listener.unsubscribe();
  }
  results.push({
    messages: messages(page.agent),
    events,
    errors: [...page.errors],
    warnings: [...warnings],
    elapsedMs: Date.now() - started,
    connection: page.status,
  });
}
// Exit once the output is flushed (a pipe takes 64 KiB at a time): the page's fetch
// connections would keep Node alive.
process.stdout.write(JSON.stringify({ steps: results }), () => process.exit(0));
