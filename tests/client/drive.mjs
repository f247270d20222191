// Drives the gateway with @ag-ui/client's HttpAgent, which validates every event (schema,
// order, open/close discipline, JSON Patch application). Usage:
//   node drive.mjs '<json script>'
// Script: {"url": "...", "threadId": "...", "initialState": {...}?, "initialMessages": [...]?,
//          "headers": {...}?, "accept": "media type"?,
//          "steps": [Step]}
// `accept` replaces HttpAgent's `Accept: text/event-stream` (the client reads the response
// as its Content-Type says: SSE, or AG-UI's protobuf encoding).
// Step:   {"system": "text"?, "message": "text" | ContentPart[]?, "messageId": "id"?, "resume": {"status": "resolved"|"cancelled",
//          "payload": any}?, "toolResult": {"content": any}?, "forwardedProps": {...}?,
//          "tools": [...]?, "context": [...]?, "state": {...}?, "abortAfterMs": n?,
//          "abortOnEvent": "EVENT_TYPE"?}
// A `resume` answers every pending interrupt of the previous step; a `toolResult` answers
// every tool call of the transcript that has no result yet (as the app would after running
// the frontend tool); `state` merges into the agent's state before the run. Prints one JSON object:
// {"steps": [{events, failed, runErrors, warnings, messages, state, pendingInterrupts,
//   contentType}]}.
import { HttpAgent } from "@ag-ui/client";
import { captureWarnings } from "./warnings.mjs";

const script = JSON.parse(process.argv[2]);
const warnings = captureWarnings();

class Agent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    if (script.accept) init.headers = { ...init.headers, Accept: script.accept };
    return init;
  }
}

// The Content-Type of each step's response.
const contentTypes = [];
const agent = new Agent({
  url: script.url,
  fetch: async (url, init) => {
    const response = await fetch(url, init);
    contentTypes.push(response.headers.get("content-type"));
    return response;
  },
  threadId: script.threadId,
  initialState: script.initialState ?? {},
  initialMessages: script.initialMessages ?? [],
  headers: script.headers ?? {},
});

const results = [];
let n = 0;
for (const step of script.steps) {
  n += 1;
  warnings.length = 0;
  contentTypes.length = 0;
  const events = [];
  const runErrors = [];
  let failed = null;
  if (step.system !== undefined) {
    agent.addMessage({ id: `${script.threadId}-system-${n}`, role: "system", content: step.system });
  }
  if (step.message !== undefined) {
    agent.addMessage({ id: step.messageId ?? `${script.threadId}-user-${n}`, role: "user", content: step.message });
  }
  if (step.toolResult) {
    const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
    for (const m of agent.messages) {
      for (const call of m.toolCalls ?? []) {
        if (answered.has(call.id)) continue;
        agent.addMessage({ id: `${script.threadId}-tool-${call.id}`, role: "tool", toolCallId: call.id, content: step.toolResult.content });
      }
    }
  }
  if (step.state) agent.setState({ ...agent.state, ...step.state });
  const params = { runId: `${script.threadId}-run-${n}` };
  if (step.forwardedProps) params.forwardedProps = step.forwardedProps;
  if (step.tools) params.tools = step.tools;
  if (step.context) params.context = step.context;
  if (step.resume) {
    params.resume = agent.pendingInterrupts.map((i) => {
      const entry = { interruptId: i.id, status: step.resume.status };
      if (step.resume.payload !== undefined) entry.payload = step.resume.payload;
      return entry;
    });
  }
  const subscriber = {
    onEvent: ({ event }) => {
      events.push(event);
      if (step.abortOnEvent === event.type) setTimeout(() => agent.abortRun(), 0);
    },
    onRunErrorEvent: ({ event }) => {
      runErrors.push({ message: event.message, code: event.code });
    },
    onRunFailed: ({ error }) => {
      failed = String(error?.message ?? error);
    },
  };
  let timer;
  if (step.abortAfterMs) timer = setTimeout(() => agent.abortRun(), step.abortAfterMs);
  try {
    await agent.runAgent(params, subscriber);
  } catch (e) {
    failed = failed ?? String(e?.message ?? e);
  }
  clearTimeout(timer);
  results.push({
    events,
    failed,
    runErrors,
    warnings: [...warnings],
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts,
    contentType: contentTypes[0] ?? null,
  });
}
process.stdout.write(JSON.stringify({ steps: results }));
