// A CopilotKit React app (@copilotkit/react-core 1.74, v2 API) as a user writes one: a
// provider pointed at a runtime by `runtimeUrl`, CopilotKit's own chat, and the hooks an app
// reads. Its settings come from the page's query, so each test drives a scenario:
//   runtimeUrl  the CopilotKit runtime (the gateway's /copilotkit)
//   agentId     the agent to talk to; absent: the app names none (CopilotKit asks `default`)
//   threadId    the thread; absent: CopilotKit makes one up and connects nothing
//   key         an API key, sent as `Authorization: Bearer <key>`
//   transport   `rest` (default) or `single` (the single-route envelope)
//   provider    `CopilotKit` (default; the agent named by its `agent` prop) or
//               `CopilotKitProvider` (named by `agentId`)
//   threads     `1`: also a thread list of the app's own, from `useThreads` (CopilotKit's
//               drawer component is licence-gated): each thread with Open, Rename (to the
//               text of #rename-to), Archive, Unarchive and Delete; Open switches the chat
//   archived    `1`: the list includes archived threads (`includeArchived`)
// What the app sees is also put where a test can read it: `useCapabilities` rendered as JSON
// in #capabilities, and `window.__app` (the runtime's status, every AG-UI event the agent
// received, the agent's messages, errors CopilotKit reported).
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  CopilotChat,
  CopilotKit,
  CopilotKitProvider,
  useAgent,
  useCapabilities,
  useCopilotKit,
  useThreads,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";

const query = new URLSearchParams(location.search);
const settings = {
  runtimeUrl: query.get("runtimeUrl") ?? "/copilotkit",
  agentId: query.get("agentId") || undefined,
  threadId: query.get("threadId") || undefined,
  key: query.get("key") || undefined,
  transport: query.get("transport") === "single" ? "single" : "rest",
  provider: query.get("provider") === "CopilotKitProvider" ? "CopilotKitProvider" : "CopilotKit",
  threads: query.get("threads") === "1",
  archived: query.get("archived") === "1",
};

// What a test reads. Events carry the time they arrived (`at`, ms since the page loaded).
const seen = (window.__app = {
  settings,
  runtime: "Disconnected",
  agentReady: false,
  running: false,
  runsFinished: 0,
  events: [],
  errors: [],
  messages: [],
  // The thread list as `useThreads` returned it, and each mutation's outcome.
  threads: null,
  threadOps: [],
});

/** The agent's messages as the app holds them: id, role and text (reasoning included). */
function messagesOf(agent) {
  return (agent.messages ?? []).map((m) => ({
    id: m.id,
    role: m.role,
    content: typeof m.content === "string" ? m.content : m.content == null ? null : JSON.stringify(m.content),
    toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function?.name })),
  }));
}

/** Watches the runtime and the agent the chat talks to, and shows `useCapabilities`. */
function Probe() {
  const { copilotkit } = useCopilotKit();
  const { agent, isReady } = useAgent(settings.agentId ? { agentId: settings.agentId } : undefined);
  const capabilities = useCapabilities(settings.agentId);
  const [runtime, setRuntime] = useState(copilotkit.runtimeConnectionStatus);

  useEffect(() => {
    const sub = copilotkit.subscribe({
      onRuntimeConnectionStatusChanged: ({ status }) => {
        seen.runtime = status;
        setRuntime(status);
      },
      onError: ({ error, code }) => seen.errors.push(`${code}: ${error?.message ?? error}`),
    });
    seen.runtime = copilotkit.runtimeConnectionStatus;
    setRuntime(copilotkit.runtimeConnectionStatus);
    return () => sub.unsubscribe();
  }, [copilotkit]);

  useEffect(() => {
    seen.agentReady = isReady;
    if (!isReady) return;
    seen.messages = messagesOf(agent);
    const sub = agent.subscribe({
      onEvent: ({ event }) => {
        seen.events.push({ ...event, at: Math.round(performance.now()) });
      },
      onMessagesChanged: () => {
        seen.messages = messagesOf(agent);
      },
      onRunInitialized: () => {
        seen.running = true;
      },
      onRunFinalized: () => {
        seen.running = false;
        seen.runsFinished += 1;
        seen.messages = messagesOf(agent);
      },
      onRunFailed: ({ error }) => {
        seen.running = false;
        seen.runsFinished += 1;
        seen.errors.push(`run failed: ${error?.message ?? error}`);
      },
    });
    return () => sub.unsubscribe();
  }, [agent, isReady]);

  return (
    <aside className="probe">
      <p id="runtime" data-status={runtime}>
        Runtime: {runtime}
      </p>
      <pre id="capabilities" data-ready={String(capabilities !== undefined)}>
        {JSON.stringify(capabilities ?? null, null, 2)}
      </pre>
    </aside>
  );
}

/** The app's own thread list over `useThreads`; `onOpen` switches the chat to a thread. */
function ThreadList({ current, onOpen }) {
  const { threads, isLoading, error, renameThread, archiveThread, unarchiveThread, deleteThread } = useThreads({
    agentId: settings.agentId ?? "default",
    includeArchived: settings.archived,
  });
  const [renameTo, setRenameTo] = useState("");
  useEffect(() => {
    seen.threads = isLoading ? null : threads.map(({ id, name, archived, agentId }) => ({ id, name, archived, agentId }));
    seen.threadsError = error ? String(error.message ?? error) : null;
  }, [threads, isLoading, error]);
  const op = (what, id, call) => () => {
    call().then(
      () => seen.threadOps.push({ what, id, ok: true }),
      (e) => seen.threadOps.push({ what, id, ok: false, error: String(e?.message ?? e) }),
    );
  };
  return (
    <nav className="threads">
      <input id="rename-to" value={renameTo} onChange={(e) => setRenameTo(e.target.value)} />
      <ul id="threads" data-loading={String(isLoading)}>
        {threads.map((t) => (
          <li key={t.id} data-thread-id={t.id} data-archived={String(!!t.archived)} data-current={String(t.id === current)}>
            <span className="name">{t.name ?? "Untitled"}</span>
            <button data-action="open" onClick={() => onOpen(t.id)}>Open</button>
            <button data-action="rename" onClick={op("rename", t.id, () => renameThread(t.id, renameTo))}>Rename</button>
            <button data-action="archive" onClick={op("archive", t.id, () => archiveThread(t.id))}>Archive</button>
            <button data-action="unarchive" onClick={op("unarchive", t.id, () => unarchiveThread(t.id))}>Unarchive</button>
            <button data-action="delete" onClick={op("delete", t.id, () => deleteThread(t.id))}>Delete</button>
          </li>
        ))}
      </ul>
    </nav>
  );
}

function App() {
  const Provider = settings.provider === "CopilotKitProvider" ? CopilotKitProvider : CopilotKit;
  // Memoized: a new object each render would make CopilotKit re-apply its headers (and its
  // thread list refetch) on every render.
  const [headers] = useState(() => (settings.key ? { Authorization: `Bearer ${settings.key}` } : undefined));
  // The chat's thread: the page's, until the thread list opens another.
  const [threadId, setThreadId] = useState(settings.threadId);
  useEffect(() => {
    seen.threadId = threadId;
  }, [threadId]);
  // How each provider names the agent: `<CopilotKit agent>` (its chat configuration says
  // `agent ?? "default"`, so an `agentId` given to `<CopilotKit>` never reaches the chat),
  // `<CopilotKitProvider agentId>`.
  const naming = !settings.agentId
    ? {}
    : settings.provider === "CopilotKitProvider"
      ? { agentId: settings.agentId }
      : { agent: settings.agentId };
  return (
    <Provider
      runtimeUrl={settings.runtimeUrl}
      headers={headers}
      useSingleEndpoint={settings.transport === "single"}
      {...naming}
    >
      <main className="app">
        {settings.threads && <ThreadList current={threadId} onOpen={setThreadId} />}
        <section className="chat">
          <CopilotChat threadId={threadId} />
        </section>
        <Probe />
      </main>
    </Provider>
  );
}

createRoot(document.getElementById("root")).render(<App />);
