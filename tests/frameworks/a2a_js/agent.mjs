// A scripted A2A test peer built on the JavaScript A2A SDK (@a2a-js/sdk 1.3.0), wired the
// way the SDK's README and its sample-agent show: AgentExecutor + DefaultRequestHandler +
// InMemoryTaskStore behind the express `jsonRpcHandler` (or `restHandler`) and
// `agentCardHandler`. There is no model: the executor plays a typical a2a-js agent from a script.
//
// Usage: node agent.mjs --port 0 [--versions 1.0|both] [--binding jsonrpc|rest] [--push] [--parent-pid PID]
// Prints exactly one line "READY <base-url>" on stdout once it listens on 127.0.0.1;
// everything else (the SDK's own console output included) goes to stderr.
//
//   --versions 1.0   (default) A2A 1.0 JSON-RPC only, as in the SDK's sample-agent.
//   --versions both  also the SDK's opt-in v0.3 compatibility layer (legacyCompat) on the
//                    same URL; the card lists both interfaces (duplicateInterfacesForLegacy).
//   --binding jsonrpc (default) JSON-RPC at the base URL.
//   --binding rest   the SDK's HTTP+JSON handler only (`restHandler`), mounted under
//                    REST_PREFIX as the SDK's multi-transport-agent sample mounts it; the card
//                    lists one HTTP+JSON 1.0 interface and no JSON-RPC (1.0 only).
//   --push           the card declares capabilities.pushNotifications and the handler gets the
//                    SDK's own InMemoryPushNotificationStore and DefaultPushNotificationSender
//                    (with --versions both: the compat layer's createLegacyAwarePushNotificationSender,
//                    the same sender with the v0.3 body for webhooks registered over v0.3). The
//                    SDK screens no push URL (it has no SSRF filter): 127.0.0.1 needs no change.
//                    Facts: docs/research/push-senders.md. Without --push nothing changes.
//
// Scripted by the FIRST WORD of the latest user message text (case-insensitive), unless
// the message continues a task that waits in input-required (then it is the answer):
//   hello (default, any other word): Task, then `working` status updates whose message keeps
//        ONE messageId and re-sends the cumulative text, then `completed` (no message).
//   chunks: Task, `working`, one artifact streamed in 3 chunks (append/lastChunk), `completed`.
//   approve: Task, `working`, `input-required` with "Approve sending the report?"; the
//        follow-up message on the same taskId gets `completed` with "Done: <answer>.".
//   tool: not scripted (the SDK has no tool-call convention); handled like hello.
//   slow (only with --push): Task, `working` every 100 ms for SLOW_TICKS ticks, then `completed`
//        with "slow done"; for "a task finishing while no stream is open" push tests.
// Cancel: a running task ends `canceled` at its next step; a task waiting in input-required
// is ended `canceled` by cancelTask itself (the SDK's cancel waits for that event).

import http from 'node:http';
import { parseArgs } from 'node:util';

import express from 'express';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultExecutionEventBusManager,
  DefaultPushNotificationSender,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';
import { createLegacyAwarePushNotificationSender } from '@a2a-js/sdk/compat/v0_3/server';

// stdout carries only the READY line.
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const FW = 'a2a_js';
const HELLO_CHUNKS = [`Hello`, ` from ${FW}.`, ` This reply arrives in chunks.`];
const ARTIFACT_CHUNKS = [`Hello from ${FW}.`, ` This reply`, ` arrives in chunks.`];
const QUESTION = 'Approve sending the report?';
const PAUSE_MS = 20;
// Where `--binding rest` mounts the SDK's HTTP+JSON routes (as its multi-transport-agent sample).
const REST_PREFIX = 'a2a/rest';
// `slow` (--push only): this many 100 ms working ticks before completing (~1.5 s).
const SLOW_TICKS = 15;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => new Date().toISOString();

function textPart(text) {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

function agentMessage(text, taskId, contextId, messageId = crypto.randomUUID()) {
  return {
    role: Role.ROLE_AGENT,
    messageId,
    parts: [textPart(text)],
    taskId,
    contextId,
    extensions: [],
    metadata: {},
    referenceTaskIds: [],
  };
}

function textOf(message) {
  return (message?.parts ?? [])
    .filter((part) => part.content?.$case === 'text')
    .map((part) => part.content.value)
    .join('');
}

class ScriptedExecutor {
  constructor(push = false) {
    this.push = push;
  }
  cancelled = new Set();
  // Tasks waiting in input-required: taskId -> contextId. No execute() runs for them.
  parked = new Map();

  // A running task sees the flag at its next step (the SDK samples' pattern). A parked task
  // has no execute() to see it, and the SDK's cancel waits for a terminal event on the
  // task's bus (kept alive in input-required), so it is published here (README: Cancel).
  cancelTask = async (taskId, eventBus) => {
    const contextId = this.parked.get(taskId);
    if (contextId === undefined) {
      this.cancelled.add(taskId);
      return;
    }
    this.parked.delete(taskId);
    eventBus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_CANCELED, timestamp: now(), message: undefined },
        metadata: {},
      })
    );
  };

  async execute(requestContext, eventBus) {
    const userMessage = requestContext.userMessage;
    const existingTask = requestContext.task;
    const { taskId, contextId } = requestContext;
    this.parked.delete(taskId);
    const status = (state, message) =>
      eventBus.publish(
        AgentEvent.statusUpdate({ taskId, contextId, status: { state, message, timestamp: now() }, metadata: {} })
      );

    // 1. Every streaming turn must begin with a Task (or Message) event: the SDK's
    //    DefaultRequestHandler refuses anything else first. As in the SDK samples, a
    //    follow-up turn re-publishes the stored task as it is.
    eventBus.publish(
      AgentEvent.task(
        existingTask ?? {
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined },
          artifacts: [],
          history: [userMessage],
          metadata: userMessage.metadata,
        }
      )
    );

    try {
      const text = textOf(userMessage).trim();
      if (existingTask?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
        status(TaskState.TASK_STATE_WORKING, undefined);
        await sleep(PAUSE_MS);
        status(TaskState.TASK_STATE_COMPLETED, agentMessage(`Done: ${text}.`, taskId, contextId));
        return;
      }

      const command = (text.split(/\s+/)[0] ?? '').toLowerCase();
      if (command === 'approve') {
        status(TaskState.TASK_STATE_WORKING, undefined);
        await sleep(PAUSE_MS);
        status(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(QUESTION, taskId, contextId));
        this.parked.set(taskId, contextId);
        return;
      }

      if (command === 'slow' && this.push) {
        for (let i = 1; i <= SLOW_TICKS; i++) {
          if (this.cancelled.has(taskId)) {
            status(TaskState.TASK_STATE_CANCELED, undefined);
            return;
          }
          status(TaskState.TASK_STATE_WORKING, agentMessage(`tick ${i}/${SLOW_TICKS}`, taskId, contextId));
          await sleep(100);
        }
        status(TaskState.TASK_STATE_COMPLETED, agentMessage('slow done', taskId, contextId));
        return;
      }

      if (command === 'chunks') {
        status(TaskState.TASK_STATE_WORKING, undefined);
        const artifactId = `${taskId}-reply`;
        for (const [i, chunk] of ARTIFACT_CHUNKS.entries()) {
          await sleep(PAUSE_MS);
          eventBus.publish(
            AgentEvent.artifactUpdate({
              taskId,
              contextId,
              artifact: {
                artifactId,
                name: 'reply',
                description: '',
                parts: [textPart(chunk)],
                metadata: undefined,
                extensions: [],
              },
              append: i > 0,
              lastChunk: i === ARTIFACT_CHUNKS.length - 1,
              metadata: undefined,
            })
          );
        }
        status(TaskState.TASK_STATE_COMPLETED, undefined);
        return;
      }

      // hello (and every other word, `tool` included)
      const messageId = crypto.randomUUID();
      let soFar = '';
      for (const chunk of HELLO_CHUNKS) {
        if (this.cancelled.has(taskId)) {
          status(TaskState.TASK_STATE_CANCELED, undefined);
          return;
        }
        soFar += chunk;
        status(TaskState.TASK_STATE_WORKING, agentMessage(soFar, taskId, contextId, messageId));
        await sleep(PAUSE_MS);
      }
      status(TaskState.TASK_STATE_COMPLETED, undefined);
    } finally {
      this.cancelled.delete(taskId);
    }
  }
}

function buildCard(base, versions, binding, push) {
  const v1 =
    binding === 'rest'
      ? [{ url: `${base}${REST_PREFIX}`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' }]
      : [{ url: base, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }];
  return {
    name: `Scripted ${FW} peer`,
    description: 'Scripted @a2a-js/sdk 1.3.0 agent (no model) for gateway tests.',
    supportedInterfaces: versions === 'both' ? duplicateInterfacesForLegacy(v1, ['JSONRPC']) : v1,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: push, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text'],
    defaultOutputModes: ['text', 'task-status'],
    skills: [
      {
        id: 'scripted',
        name: 'Scripted scenarios',
        description: 'hello | chunks | approve (first word of the message)',
        tags: ['test'],
        examples: ['hello', 'chunks', 'approve'],
        inputModes: ['text'],
        outputModes: ['text', 'task-status'],
        securityRequirements: [],
      },
    ],
    documentationUrl: '',
    signatures: [],
  };
}

// --push: the SDK's own push store and sender (the handler would build the same 1.0 ones
// itself from the card's capability; they are passed to choose the v0.3-aware sender).
function pushHandler(card, versions) {
  const store = new InMemoryPushNotificationStore();
  const sender =
    versions === 'both' ? createLegacyAwarePushNotificationSender(store) : new DefaultPushNotificationSender(store);
  return new DefaultRequestHandler(
    card,
    new InMemoryTaskStore(),
    new ScriptedExecutor(true),
    new DefaultExecutionEventBusManager(),
    store,
    sender
  );
}

function main() {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      versions: { type: 'string', default: '1.0' },
      binding: { type: 'string', default: 'jsonrpc' },
      'parent-pid': { type: 'string', default: '0' },
      push: { type: 'boolean', default: false },
    },
  });
  if (!['1.0', 'both'].includes(values.versions)) {
    console.error(`--versions must be 1.0 or both, not ${values.versions}`);
    process.exit(2);
  }
  if (!['jsonrpc', 'rest'].includes(values.binding) || (values.binding === 'rest' && values.versions !== '1.0')) {
    console.error(`--binding must be jsonrpc, or rest with --versions 1.0; not ${values.binding} ${values.versions}`);
    process.exit(2);
  }
  const server = http.createServer();
  server.listen(Number(values.port), '127.0.0.1', () => {
    const base = `http://127.0.0.1:${server.address().port}/`;
    const card = buildCard(base, values.versions, values.binding, values.push);
    const requestHandler = values.push
      ? pushHandler(card, values.versions)
      : new DefaultRequestHandler(card, new InMemoryTaskStore(), new ScriptedExecutor());
    const legacyCompat = { enabled: values.versions === 'both' };
    const app = express();
    app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
    if (values.binding === 'rest') {
      app.use(`/${REST_PREFIX}`, restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
    } else {
      app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
    }
    server.on('request', app);
    process.stdout.write(`READY ${base}\n`);
  });

  const parentPid = Number(values['parent-pid']);
  if (parentPid) {
    setInterval(() => {
      try {
        process.kill(parentPid, 0);
      } catch {
        process.exit(0);
      }
    }, 500).unref();
  }
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));
}

main();
