//! The gateway against REAL agent frameworks (`tests/frameworks/<fw>/`, each README describes
//! the peer and its wire shapes): Google ADK (`to_a2a`, A2A 1.0, model streaming `sse` and
//! `none`, and its new executor `v2`), strands-agents (A2A 0.3, `default` and `compliant`
//! streaming), pydantic-ai through fasta2a (1.0 shapes) and the A2A JS SDK (1.0), the last
//! over both of its bindings: JSON-RPC (`jsonrpc`) and its own HTTP+JSON handler (`rest`: a
//! card with one HTTP+JSON interface, no JSON-RPC), each a2a_js scenario run on both from
//! one test body. Each peer is a scripted agent (no model key, no network) started once per
//! test binary and shared; every test starts its own gateway naming that peer, checks the
//! binding the gateway selected, and drives it with the real AG-UI client (`@ag-ui/client`).
//!
//! Scripts (first word of the latest user message): `hello` streams "Hello from <fw>. This
//! reply arrives in chunks."; `tool` calls get_weather(city=Paris) then says "It is sunny in
//! Paris."; `approve` asks "Approve sending the report?" in the framework's own HITL shape
//! and then says "Done: <answer>."; `think` (ADK, and kagent-adk 0.10.4, whose peer knows only
//! `hello` and `think`) thinks, calls get_weather, thinks again and says "It is sunny in
//! Paris.", reporting Gemini-style usage on every model response. A kagent parent and child
//! (`tests/frameworks/kagent/delegation.py`) show delegation. Peers are installed by
//! `scripts/test`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use agui_a2a_gateway::a2a::card::Binding;
use agui_a2a_gateway::a2a::client::CallContext;
use agui_a2a_gateway::a2a::TaskId;

use crate::ready_line::{read_ready, READY_WITHIN};
use crate::support::*;

const HELLO: &str = "This reply arrives in chunks.";
pub const SUNNY: &str = "It is sunny in Paris.";
const QUESTION: &str = "Approve sending the report?";
const ANSWER: &str = "yes, send it";
const DONE: &str = "Done: yes, send it.";

/// How long one drive (one Node client process, all its steps) may take.
const DRIVE_WITHIN: Duration = Duration::from_secs(90);

/// Every peer this file starts: (framework, mode, A2A version it speaks, the binding its
/// card offers).
const PEERS: [(&str, &str, &str, Binding); 9] = [
    ("adk", "sse", "1.0", Binding::JsonRpc),
    ("adk", "none", "1.0", Binding::JsonRpc),
    // ADK's new executor (model streaming `sse`): text and tool calls travel in artifacts.
    ("adk", "v2", "1.0", Binding::JsonRpc),
    ("strands", "default", "0.3", Binding::JsonRpc),
    ("strands", "compliant", "0.3", Binding::JsonRpc),
    ("pydantic_ai", "default", "1.0", Binding::JsonRpc),
    ("a2a_js", "jsonrpc", "1.0", Binding::JsonRpc),
    // `agent.mjs --binding rest`: the SDK's `restHandler` under a path prefix.
    ("a2a_js", "rest", "1.0", Binding::HttpJson),
    // kagent-adk 0.10.4's own KAgentApp (in-memory sessions), model not streamed: `think` only.
    ("kagent", "default", "0.3", Binding::JsonRpc),
];

/// A running framework peer; lives for the whole test binary (it exits with it:
/// `--parent-pid`).
pub struct Peer {
    pub url: String,
    /// The A2A version its tasks are read back with (`tasks/get` or `GetTask`).
    protocol: &'static str,
    /// The binding its card offers.
    binding: Binding,
    /// Where its stderr goes.
    log: PathBuf,
    _child: Child,
}

/// The shared peer of `fw` in `mode`, started on first use.
pub fn peer(fw: &str, mode: &str) -> &'static Peer {
    static CELLS: [OnceLock<Peer>; PEERS.len()] = [const { OnceLock::new() }; PEERS.len()];
    let at = PEERS
        .iter()
        .position(|(f, m, _, _)| *f == fw && *m == mode)
        .unwrap_or_else(|| panic!("no peer {fw} {mode}"));
    let (fw, mode, protocol, binding) = PEERS[at];
    CELLS[at].get_or_init(|| start_peer(fw, mode, protocol, binding))
}

fn start_peer(
    fw: &'static str,
    mode: &'static str,
    protocol: &'static str,
    binding: Binding,
) -> Peer {
    let dir = root().join("tests/frameworks").join(fw);
    let mut cmd = if fw == "a2a_js" {
        let modules = dir.join("node_modules/@a2a-js/sdk");
        assert!(
            modules.exists(),
            "{} is missing: run `bash scripts/test` (it installs the framework peers)",
            modules.display()
        );
        let mut c = Command::new("node");
        c.arg(dir.join("agent.mjs"));
        if mode == "rest" {
            c.args(["--binding", "rest"]);
        }
        c
    } else {
        let python = dir.join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run `bash scripts/test` (it installs the framework peers)",
            python.display()
        );
        let mut c = Command::new(python);
        c.arg(dir.join("agent.py"));
        match (fw, mode) {
            ("adk", "v2") => c.args(["--executor", "v2"]),
            ("adk", _) => c.args(["--streaming", mode]),
            ("strands", _) => c.args(["--mode", mode]),
            _ => &mut c,
        };
        c
    };
    let (url, log, child) = spawn_ready(cmd.current_dir(&dir), &format!("{fw}-{mode}"));
    Peer {
        url,
        protocol,
        binding,
        log,
        _child: child,
    }
}

/// Starts a peer (`--port 0 --parent-pid <this test binary>` added) and waits for its
/// `READY <url>`; its stderr goes to `peer-<label>.log`. Returns the URL, the log, the child.
fn spawn_ready(cmd: &mut Command, label: &str) -> (String, PathBuf, Child) {
    let parent = std::process::id().to_string();
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("peer-{label}.log"));
    let log_file = std::fs::File::create(&log).expect("create the peer log");
    let mut child = cmd
        .args(["--port", "0", "--parent-pid", &parent])
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|e| panic!("start the {label} peer: {e}"));
    let url = read_ready(child.stdout.take().unwrap(), READY_WITHIN).unwrap_or_else(|| {
        let _ = child.kill();
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        panic!(
            "the {label} peer printed no READY within {READY_WITHIN:?}; its log ({}):\n{}",
            log.display(),
            tail(&logged, 3000)
        )
    });
    (url, log, child)
}

/// A gateway naming the peer as agent `fw`, ready, and calling it over the binding its card
/// offers (as `GET /agents/{fw}` shows); returns the gateway (keep it) and the run URL.
async fn gateway_for(fw: &str, peer: &Peer) -> (Gateway, String) {
    let config = json!({"agents": [{"name": fw, "url": peer.url}]});
    let gw = Gateway::start(&config.to_string(), false).await;
    wait_ready(&gw).await;
    let url = gw.agent_url(fw);
    let view = get_json(&url).await;
    assert_eq!(
        view["binding"],
        peer.binding.as_str(),
        "{fw}: the binding the gateway selected from the card at {}: {view}",
        peer.url
    );
    (gw, url)
}

/// How long one plain request (to the gateway or a peer) may take.
const REQUEST_WITHIN: Duration = Duration::from_secs(10);

/// `GET url` as JSON, within [`REQUEST_WITHIN`].
async fn get_json(url: &str) -> Value {
    reqwest::Client::new()
        .get(url)
        .header("A2A-Version", "1.0")
        .timeout(REQUEST_WITHIN)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// A thread id unique to this test binary's run.
pub fn thread(name: &str) -> String {
    format!("fw-{name}-{}", std::process::id())
}

/// Drives the AG-UI client with a deadline (a stuck run fails the test instead of hanging it).
async fn drive_steps(url: &str, thread: &str, steps: Value) -> Vec<Value> {
    tokio::time::timeout(DRIVE_WITHIN, drive(url, thread, steps))
        .await
        .unwrap_or_else(|_| panic!("the AG-UI client did not finish within {DRIVE_WITHIN:?}"))
}

/// The events of a step, compact, for failure messages.
fn brief(step: &Value) -> String {
    let mut out = Vec::new();
    for e in step["events"].as_array().into_iter().flatten() {
        let t = e["type"].as_str().unwrap_or("?");
        let s = match t {
            "TEXT_MESSAGE_START" | "TEXT_MESSAGE_END" => {
                format!("{t}({})", e["messageId"].as_str().unwrap_or("?"))
            }
            "TEXT_MESSAGE_CONTENT" => format!(
                "{t}({}:{:?})",
                e["messageId"].as_str().unwrap_or("?"),
                e["delta"].as_str().unwrap_or("")
            ),
            "TOOL_CALL_START" => format!("{t}({}:{})", e["toolCallId"], e["toolCallName"]),
            "TOOL_CALL_ARGS" => format!("{t}({})", e["delta"]),
            "TOOL_CALL_RESULT" => format!("{t}({}:{})", e["toolCallId"], e["content"]),
            "RUN_ERROR" => format!("{t}({}: {})", e["code"], e["message"]),
            "RUN_FINISHED" => format!("{t}({})", e["outcome"]),
            "MESSAGES_SNAPSHOT" => format!("{t}({})", e["messages"]),
            _ => t.to_owned(),
        };
        out.push(s);
    }
    let messages: Vec<String> = step["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "activity")
        .map(|m| {
            let mut s = format!("{}:{:?}", m["role"].as_str().unwrap_or("?"), m["content"]);
            if let Some(calls) = m.get("toolCalls") {
                s.push_str(&format!(" toolCalls={calls}"));
            }
            if let Some(id) = m.get("toolCallId") {
                s.push_str(&format!(" toolCallId={id}"));
            }
            s
        })
        .collect();
    format!(
        "\n  events: {}\n  messages: {}\n  runErrors: {}\n  failed: {}\n  warnings: {}",
        out.join(" "),
        messages.join(" | "),
        step["runErrors"],
        step["failed"],
        step["warnings"]
    )
}

/// The client accepted the run, no RUN_ERROR, and it finished with `outcome`.
fn assert_finished(step: &Value, outcome: &str, what: &str) {
    assert!(
        step["failed"].is_null()
            && step["warnings"].as_array().is_some_and(Vec::is_empty)
            && step["runErrors"].as_array().is_some_and(Vec::is_empty),
        "{what}: the client failed, warned or saw a RUN_ERROR:{}",
        brief(step)
    );
    assert_accepted(step);
    let last = last_event(step);
    assert_eq!(
        (last["type"].as_str(), last["outcome"]["type"].as_str()),
        (Some("RUN_FINISHED"), Some(outcome)),
        "{what}: expected RUN_FINISHED with outcome {outcome}:{}",
        brief(step)
    );
}

fn assistant_messages(step: &Value) -> Vec<&Value> {
    step["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect()
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or_default()
}

/// Exactly one assistant message holds `text`, and `text` occurs once across all assistant
/// messages; returns that message.
fn assert_reply_once<'a>(step: &'a Value, text: &str, what: &str) -> &'a Value {
    let assistant = assistant_messages(step);
    let holding: Vec<&Value> = assistant
        .iter()
        .copied()
        .filter(|m| content(m).contains(text))
        .collect();
    let occurrences: usize = assistant
        .iter()
        .map(|m| content(m).matches(text).count())
        .sum();
    assert_eq!(
        (holding.len(), occurrences),
        (1, 1),
        "{what}: {text:?} must be in exactly one assistant message, once (messages holding it, \
         occurrences):{}",
        brief(step)
    );
    holding[0]
}

/// How many TEXT_MESSAGE_CONTENT events streamed into message `id`.
fn content_events(step: &Value, id: &str) -> usize {
    step["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT" && e["messageId"] == id)
        .count()
}

/// `hello` on one peer: one reply, once, streamed in chunks where the peer streams.
async fn hello(fw: &str, mode: &str, streams: bool) {
    let p = peer(fw, mode);
    let (_gw, url) = gateway_for(fw, p).await;
    let steps = drive_steps(
        &url,
        &thread(&format!("hello-{fw}-{mode}")),
        json!([{"message": "hello there"}]),
    )
    .await;
    let s = &steps[0];
    let what = format!("{fw} {mode} hello (peer log {})", p.log.display());
    assert_finished(s, "success", &what);
    let reply = assert_reply_once(s, HELLO, &what);
    if streams {
        let id = reply["id"].as_str().unwrap();
        assert!(
            content_events(s, id) > 1,
            "{what}: the reply {id} arrived in {} TEXT_MESSAGE_CONTENT event(s), not streamed:{}",
            content_events(s, id),
            brief(s)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_sse_hello_is_one_streamed_reply() {
    hello("adk", "sse", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_none_hello_is_one_reply() {
    hello("adk", "none", false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_default_hello_is_one_streamed_reply() {
    hello("strands", "default", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_compliant_hello_is_one_streamed_reply() {
    hello("strands", "compliant", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pydantic_ai_hello_is_one_streamed_reply() {
    hello("pydantic_ai", "default", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_jsonrpc_hello_is_one_streamed_reply() {
    hello("a2a_js", "jsonrpc", true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_rest_hello_is_one_streamed_reply() {
    hello("a2a_js", "rest", true).await;
}

/// a2a_js `chunks` over `mode`'s binding: the artifact's three chunks (append, lastChunk)
/// land in the state as one complete artifact and stream as one reply.
async fn a2a_js_chunks(mode: &str) {
    let p = peer("a2a_js", mode);
    let (_gw, url) = gateway_for("a2a_js", p).await;
    let what = format!("a2a_js {mode} chunks (peer log {})", p.log.display());
    let steps = drive_steps(
        &url,
        &thread(&format!("chunks-a2a_js-{mode}")),
        json!([{"message": "chunks please"}]),
    )
    .await;
    let s = &steps[0];
    assert_finished(s, "success", &what);
    let task = s["state"]["a2a"]["task"]["id"].as_str().unwrap_or_default();
    let artifact = &s["state"]["view"]["artifacts"][format!("{task}-reply")];
    assert_eq!(
        (&artifact["text"], &artifact["complete"]),
        (&json!(format!("Hello from a2a_js. {HELLO}")), &json!(true)),
        "{what}: {}",
        s["state"]["view"]
    );
    let reply = assert_reply_once(s, HELLO, &what);
    let id = reply["id"].as_str().unwrap();
    assert_eq!(
        content_events(s, id),
        3,
        "{what}: one TEXT_MESSAGE_CONTENT per chunk:{}",
        brief(s)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_jsonrpc_artifact_chunks_are_one_artifact_and_one_reply() {
    a2a_js_chunks("jsonrpc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_rest_artifact_chunks_are_one_artifact_and_one_reply() {
    a2a_js_chunks("rest").await;
}

/// A finished `tool` run: its gateway (still serving), the agent URL, the thread and the step.
struct ToolRun {
    _gw: Gateway,
    url: String,
    thread: String,
    step: Value,
}

/// `tool` on one peer: the run succeeds with the reply once.
async fn tool(fw: &str, mode: &str) -> ToolRun {
    let p = peer(fw, mode);
    let (gw, url) = gateway_for(fw, p).await;
    let thread = thread(&format!("tool-{fw}-{mode}"));
    let mut steps = drive_steps(
        &url,
        &thread,
        json!([{"message": "tool weather in Paris?"}]),
    )
    .await;
    let step = steps.remove(0);
    let what = format!("{fw} {mode} tool (peer log {})", p.log.display());
    assert_finished(&step, "success", &what);
    assert_reply_once(&step, SUNNY, &what);
    ToolRun {
        _gw: gw,
        url,
        thread,
        step,
    }
}

/// How many events of `kind` name tool call `id`.
fn tool_events(step: &Value, kind: &str, id: &Value) -> usize {
    step["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind && e["toolCallId"] == *id)
        .count()
}

/// ADK shows its function call and response on the wire: the client gets the tool call with
/// its arguments and the tool result, each once (ADK sends them more than once).
async fn adk_tool(mode: &str) -> ToolRun {
    let run = tool("adk", mode).await;
    let s = &run.step;
    let what = format!("adk {mode} tool");
    let messages = s["messages"].as_array().unwrap();
    let calls: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
        .filter(|c| c["function"]["name"] == "get_weather")
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "{what}: one get_weather tool call:{}",
        brief(s)
    );
    let call = calls[0];
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or(""))
        .unwrap_or_else(|e| {
            panic!(
                "{what}: the arguments are not JSON ({e}): {}",
                call["function"]["arguments"]
            )
        });
    assert_eq!(args, json!({"city": "Paris"}), "{what}");
    let results: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool" && m["toolCallId"] == call["id"])
        .collect();
    assert_eq!(
        results.len(),
        1,
        "{what}: one tool message for call {}:{}",
        call["id"],
        brief(s)
    );
    assert!(
        content(results[0]).contains("sunny"),
        "{what}: the tool result: {}",
        results[0]
    );
    for kind in ["TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT"] {
        assert_eq!(
            tool_events(s, kind, &call["id"]),
            1,
            "{what}: one {kind} for call {}:{}",
            call["id"],
            brief(s)
        );
    }
    run
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_sse_tool_call_and_result_reach_the_client() {
    adk_tool("sse").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_none_tool_call_and_result_reach_the_client() {
    adk_tool("none").await;
}

/// The messages as a thread shows them, for comparison: `(id, role, content, tool call ids and
/// names, toolCallId)`; activity messages left out, content trimmed.
fn thread_view(messages: &Value) -> Vec<Value> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "activity")
        .map(|m| {
            let calls: Vec<Value> = m["toolCalls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| json!([c["id"], c["function"]["name"], c["function"]["arguments"]]))
                .collect();
            json!([
                m["id"],
                m["role"],
                m["content"].as_str().unwrap_or_default().trim(),
                calls,
                m["toolCallId"]
            ])
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_v2_tool_call_and_result_reach_the_client_and_reload_the_same() {
    // ADK's new executor puts function_call / function_response in artifacts, not in status
    // messages; the thread read back (`GET /agents/adk/threads/{threadId}`, rebuilt from the
    // task's artifacts) shows the same tool call and result under the same ids.
    let run = adk_tool("v2").await;
    let url = format!("{}/threads/{}", run.url, run.thread);
    let resp = reqwest::get(&url).await.unwrap();
    assert_eq!(resp.status(), 200, "GET {url}");
    let detail: Value = resp.json().await.unwrap();
    assert_eq!(
        thread_view(&detail["messages"]),
        thread_view(&run.step["messages"]),
        "adk v2 tool: the reloaded thread differs from the live run:{}\n  reloaded: {}",
        brief(&run.step),
        detail["messages"]
    );
}

/// The thoughts of ADK's `think` script (tests/frameworks/adk/agent.py), one reasoning
/// message per stretch of thinking.
pub const ADK_THOUGHTS: [&str; 2] = [
    "The user wants the weather. I should call get_weather.",
    "The tool says sunny.",
];

/// `(id, content)` of a step's messages of `role`.
fn messages_of(step: &Value, role: &str) -> Vec<(String, String)> {
    step["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == role)
        .map(|m| (m["id"].as_str().unwrap_or("?").into(), content(m).into()))
        .collect()
}

/// One `agui_gateway_tokens_total` series.
async fn tokens_counted(gw: &Gateway, agent: &str, kind: &str) -> u64 {
    let text = metrics_text(gw).await;
    let series = format!("agui_gateway_tokens_total{{agent=\"{agent}\",kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{series}` in /metrics:\n{text}"))
}

/// A thinking model behind the gateway (ADK or kagent), judged by `@ag-ui/client` 1.0.0: the
/// thoughts arrive as reasoning messages and never inside the answer, the usage of both model
/// calls is on `RUN_FINISHED` and in `agui_gateway_tokens_total`, and the thread detail and,
/// over A2A 1.0, a second client on the thread (a pick-up: `MESSAGES_SNAPSHOT` of the earlier
/// turn; 0.3 has no ListTasks to pick up from) show the same reasoning under the same ids;
/// every stream passes the client's verifier.
async fn think(fw: &str, mode: &str) {
    let p = peer(fw, mode);
    let (gw, url) = gateway_for(fw, p).await;
    let thread = thread(&format!("think-{fw}-{mode}"));
    let mut steps = drive_steps(
        &url,
        &thread,
        json!([{"message": "think about the weather in Paris"}]),
    )
    .await;
    let step = steps.remove(0);
    let what = format!("{fw} {mode} think (peer log {})", p.log.display());
    assert_finished(&step, "success", &what);
    assert_reply_once(&step, SUNNY, &what);
    let thoughts = messages_of(&step, "reasoning");
    let texts: Vec<&str> = thoughts.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ADK_THOUGHTS, "{what}:{}", brief(&step));
    for m in assistant_messages(&step) {
        assert!(
            !content(m).contains("get_weather.") && !content(m).contains("says sunny"),
            "{what}: a thought inside the answer: {m}"
        );
    }
    let types = event_types(&step);
    for kind in [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ] {
        assert!(types.iter().any(|t| t == kind), "{what}: no {kind}");
    }
    assert_eq!(
        last_event(&step)["usage"],
        json!([{"inputTokens": 270, "outputTokens": 34, "totalTokens": 304,
            "reasoningTokens": 20, "cachedInputTokens": 200}]),
        "{what}: the usage of both model calls, each counted once"
    );
    for (kind, n) in [
        ("input", 270),
        ("output", 34),
        ("reasoning", 20),
        ("cached", 200),
    ] {
        assert_eq!(tokens_counted(&gw, fw, kind).await, n, "{what}: {kind}");
    }
    let detail = get_json(&format!("{url}/threads/{thread}")).await;
    let shown: Vec<(String, String)> = detail["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "reasoning")
        .map(|m| (m["id"].as_str().unwrap().into(), content(m).into()))
        .collect();
    assert_eq!(shown, thoughts, "{what}: the thread detail's reasoning");
    if p.protocol != "1.0" {
        return;
    }

    // A second client on the thread holds nothing: the run picks the conversation up.
    let mut again = drive_steps(&url, &thread, json!([{"message": "hello"}])).await;
    let again = again.remove(0);
    assert_finished(&again, "success", &format!("{what}, picked up"));
    assert!(
        event_types(&again).contains(&"MESSAGES_SNAPSHOT".to_owned()),
        "{what}: no pick-up:{}",
        brief(&again)
    );
    assert_eq!(
        messages_of(&again, "reasoning"),
        thoughts,
        "{what}: the picked-up thread's reasoning"
    );
}

/// CopilotKit's own client (`@copilotkitnext/core` 1.54 on `@ag-ui/client` 0.0.48, which sends
/// no `protocolVersion`) on the same thinking agent: it accepts the reasoning events live and
/// the reasoning messages of a reload's `connect` replay, and gets no `usage`.
#[tokio::test(flavor = "multi_thread")]
async fn adk_thinking_reaches_copilotkits_own_client_live_and_on_reload() {
    let p = peer("adk", "sse");
    let (gw, _url) = gateway_for("adk", p).await;
    let steps = copilotkit_session(json!({
        "runtimeUrl": format!("{}/copilotkit", gw.base),
        "agentId": "adk",
        "threadId": thread("think-adk-copilotkit"),
        "steps": [{"run": "think about the weather in Paris"}, {"reload": true}],
    }))
    .await;
    for (n, step) in steps.iter().enumerate() {
        let what = format!("copilotkit step {n}: {step}");
        assert_eq!(step["errors"], json!([]), "{what}");
        assert_eq!(step["warnings"], json!([]), "{what}");
        let thoughts: Vec<String> = messages_of(step, "reasoning")
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(thoughts, ADK_THOUGHTS, "{what}");
        let answers: Vec<String> = messages_of(step, "assistant")
            .into_iter()
            .map(|(_, t)| t)
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(answers, [SUNNY], "{what}");
        assert!(
            last_event(step).get("usage").is_none(),
            "{what}: usage is AG-UI 1.0's"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_sse_thinking_is_reasoning_with_usage_and_replays_the_same() {
    think("adk", "sse").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_v2_thinking_is_reasoning_with_usage_and_replays_the_same() {
    think("adk", "v2").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kagent_thinking_is_reasoning_with_usage_and_reloads_the_same() {
    think("kagent", "default").await;
}

/// kagent-adk 0.10.4's parent and child (`tests/frameworks/kagent/delegation.py`), started
/// once: the child first, then the parent naming it. The parent is the peer.
pub(crate) fn kagent_delegation() -> &'static Peer {
    static PAIR: OnceLock<(Peer, Child)> = OnceLock::new();
    let (parent, _child) = PAIR.get_or_init(|| {
        let dir = root().join("tests/frameworks/kagent");
        let python = dir.join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run `bash scripts/test` (it installs the framework peers)",
            python.display()
        );
        let script = dir.join("delegation.py");
        let mut cmd = Command::new(&python);
        let (child_url, _, child) = spawn_ready(
            cmd.arg(&script).arg("child").current_dir(&dir),
            "kagent-child",
        );
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .args(["parent", "--child-url", &child_url])
            .current_dir(&dir);
        let (url, log, parent) = spawn_ready(&mut cmd, "kagent-parent");
        let peer = Peer {
            url,
            protocol: "0.3",
            binding: Binding::JsonRpc,
            log,
            _child: parent,
        };
        (peer, child)
    });
    parent
}

/// A kagent parent delegating to a kagent child (agent-as-tool) behind the gateway, judged by
/// `@ag-ui/client` 1.0.0: the call carries `SUBAGENT_STARTED` … `SUBAGENT_FINISHED` with the
/// child's answer; a child's approval suspends the sub-agent on the run's interrupt, and the
/// gateway's answer (to the parent) resumes the child, whose answer settles the sub-agent in
/// the resumed run under the same id. Every stream passes the client's verifier.
#[tokio::test(flavor = "multi_thread")]
async fn kagent_delegation_is_a_subagent_for_a_v1_client() {
    const TOOL: &str = "kagent__NS__k8s_agent";
    let p = kagent_delegation();
    let (_gw, url) = gateway_for("kagent", p).await;
    let what = format!("kagent delegation (peer log {})", p.log.display());
    let subagent_events = |step: &Value| -> Vec<Value> {
        step["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"].as_str().unwrap().starts_with("SUBAGENT"))
            .cloned()
            .collect()
    };
    let call_id = |step: &Value| -> String {
        let events = step["events"].as_array().unwrap();
        let call = events
            .iter()
            .find(|e| e["type"] == "TOOL_CALL_START" && e["toolCallName"] == TOOL)
            .unwrap_or_else(|| panic!("{what}: no call of {TOOL}:{}", brief(step)));
        call["toolCallId"].as_str().unwrap().to_owned()
    };

    let mut steps = drive_steps(&url, &thread("delegate"), json!([{"message": "list pods"}])).await;
    let step = steps.remove(0);
    assert_finished(&step, "success", &what);
    let id = call_id(&step);
    let sub = subagent_events(&step);
    assert_eq!(sub.len(), 2, "{what}:{}", brief(&step));
    assert_eq!(sub[0]["type"], "SUBAGENT_STARTED");
    assert_eq!(sub[0]["subagentRunId"], format!("{id}:subagent"));
    assert_eq!(sub[0]["name"], TOOL);
    assert_eq!(sub[0]["parentToolCallId"], id.as_str());
    assert_eq!(sub[1]["type"], "SUBAGENT_FINISHED");
    assert_eq!(sub[1]["outcome"], json!({"type": "success"}));
    assert_eq!(sub[1]["result"], "There are 3 pods in default.");
    assert_reply_once(
        &step,
        "The k8s agent says: There are 3 pods in default.",
        &what,
    );

    let steps = drive_steps(
        &url,
        &thread("delegate-approve"),
        json!([
            {"message": "delete pod nginx-7d9c5"},
            {"resume": {"status": "resolved", "payload": {"approved": true}}}
        ]),
    )
    .await;
    let (asked, resumed) = (&steps[0], &steps[1]);
    assert_finished(asked, "interrupt", &what);
    let id = call_id(asked);
    let interrupt = &last_event(asked)["outcome"]["interrupts"][0];
    let sub = subagent_events(asked);
    assert_eq!(sub.len(), 2, "{what}:{}", brief(asked));
    assert_eq!(
        sub[1]["outcome"],
        json!({"type": "suspended", "interruptIds": [interrupt["id"]]}),
        "{what}: suspended on the run's interrupt"
    );
    assert_finished(resumed, "success", &what);
    let sub = subagent_events(resumed);
    assert_eq!(sub.len(), 2, "{what}:{}", brief(resumed));
    assert_eq!(
        sub[0]["subagentRunId"],
        format!("{id}:subagent"),
        "the same id"
    );
    assert_eq!(sub[1]["outcome"]["type"], "success");
    assert!(
        sub[1]["result"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Deleted:"),
        "{what}: the child resumed and answered:{}",
        brief(resumed)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_default_tool_reply_arrives_once() {
    tool("strands", "default").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_compliant_tool_reply_arrives_once() {
    tool("strands", "compliant").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pydantic_ai_tool_reply_arrives_once() {
    tool("pydantic_ai", "default").await;
}

// a2a_js: `tool` is not scripted (the SDK has no tool abstraction; README), it answers like
// `hello`: no tool test there.

/// Reads a task straight from the peer over its own binding, bypassing the gateway.
async fn upstream_task(p: &Peer, task_id: &str) -> Value {
    if p.binding != Binding::HttpJson {
        return upstream_get_task(&p.url, p.protocol, task_id).await;
    }
    let task = get_json(&format!("{}/tasks/{task_id}", interface_url(p).await)).await;
    assert!(task["status"].is_object(), "GET tasks/{task_id}: {task}");
    task
}

/// The URL of the peer's first interface, as its card names it.
async fn interface_url(p: &Peer) -> String {
    let card = get_json(&format!("{}.well-known/agent-card.json", p.url)).await;
    card["supportedInterfaces"][0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no interface URL in {card}"))
        .to_owned()
}

/// `completed` for both `completed` (0.3) and `TASK_STATE_COMPLETED` (1.0).
fn task_state(task: &Value) -> String {
    let s = task["status"]["state"].as_str().unwrap_or_default();
    s.strip_prefix("TASK_STATE_")
        .unwrap_or(s)
        .to_lowercase()
        .replace('_', "-")
}

/// How many user messages in the task's history carry `text`.
fn user_history_with(task: &Value, text: &str) -> usize {
    task["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| matches!(m["role"].as_str(), Some("user" | "ROLE_USER")))
        .filter(|m| {
            m["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["text"].as_str().is_some_and(|t| t.contains(text)))
        })
        .count()
}

/// Step 1 of an approval: the run ends with one interrupt asking the question; returns the
/// upstream task id.
fn assert_asks(step: &Value, what: &str) -> String {
    assert_finished(step, "interrupt", &format!("{what}: the ask"));
    let pending = step["pendingInterrupts"].as_array().unwrap();
    assert_eq!(
        pending.len(),
        1,
        "{what}: one pending interrupt: {pending:?}"
    );
    let message = pending[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(QUESTION),
        "{what}: the interrupt's message {message:?} must ask {QUESTION:?}: {}",
        pending[0]
    );
    let task = pending[0]["metadata"]["a2a"]["taskId"]
        .as_str()
        .or_else(|| step["state"]["a2a"]["task"]["id"].as_str())
        .unwrap_or_else(|| {
            panic!(
                "{what}: no task id in the interrupt or the state: {}",
                pending[0]
            )
        });
    task.to_owned()
}

/// `approve`, then a resume with `payload`: the answer is delivered in the framework's shape,
/// the run succeeds with "Done: ..." once, and the upstream task completed. Returns the steps
/// and the task id.
async fn approve_and_resume(
    fw: &str,
    mode: &str,
    payload: Value,
    done: &str,
) -> (Vec<Value>, String) {
    let p = peer(fw, mode);
    let (_gw, url) = gateway_for(fw, p).await;
    let what = format!("{fw} {mode} approve (peer log {})", p.log.display());
    let steps = drive_steps(
        &url,
        &thread(&format!("approve-{fw}-{mode}")),
        json!([
            {"message": "approve the report"},
            {"resume": {"status": "resolved", "payload": payload}}
        ]),
    )
    .await;
    let task_id = assert_asks(&steps[0], &what);
    let answer = &steps[1];
    assert_finished(answer, "success", &format!("{what}: the resume"));
    assert!(
        answer["pendingInterrupts"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{what}: no interrupt left: {}",
        answer["pendingInterrupts"]
    );
    assert_reply_once(answer, done, &format!("{what}: the resume"));
    let task = upstream_task(p, &task_id).await;
    assert_eq!(
        task_state(&task),
        "completed",
        "{what}: upstream task {task_id}: {task}"
    );
    (steps, task_id)
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_default_interrupt_is_answered_by_a_resume() {
    approve_and_resume("strands", "default", json!(ANSWER), DONE).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_compliant_interrupt_is_answered_by_a_resume() {
    approve_and_resume("strands", "compliant", json!(ANSWER), DONE).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adk_long_running_call_is_answered_by_a_resume() {
    // A string payload becomes the function response `{"answer": ...}`, which the agent reads.
    approve_and_resume("adk", "sse", json!(ANSWER), DONE).await;
}

/// a2a_js `approve` over `mode`'s binding: the resume is answered once, and the same resume
/// replayed does no harm.
async fn a2a_js_input_required(mode: &str) {
    let p = peer("a2a_js", mode);
    let (_gw, url) = gateway_for("a2a_js", p).await;
    let what = format!("a2a_js {mode} approve (peer log {})", p.log.display());
    let thread = thread(&format!("approve-a2a_js-{mode}"));
    let steps = drive_steps(
        &url,
        &thread,
        json!([
            {"message": "approve the report"},
            {"resume": {"status": "resolved", "payload": ANSWER}}
        ]),
    )
    .await;
    let (ask, answer) = (&steps[0], &steps[1]);
    let task_id = assert_asks(ask, &what);
    // The resumed stream opens with the task re-published in its OLD state (input-required,
    // the old question): that must neither interrupt again nor repeat the question.
    assert_finished(answer, "success", &format!("{what}: the resume"));
    assert!(
        answer["pendingInterrupts"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{what}: the resume interrupted again: {}",
        answer["pendingInterrupts"]
    );
    assert_reply_once(answer, DONE, &format!("{what}: the resume"));
    let asked: usize = transcript(answer)
        .iter()
        .map(|(_, c)| c.matches(QUESTION).count())
        .sum();
    assert_eq!(
        asked,
        1,
        "{what}: the question once across the client's messages:{}",
        brief(answer)
    );
    let task = upstream_task(p, &task_id).await;
    assert_eq!(task_state(&task), "completed", "{what}: {task}");

    // Replay: the same resume again, as a client that lost the answer would post it (its
    // state and messages from before the resume).
    let interrupt_id = ask["pendingInterrupts"][0]["id"].clone();
    let messages: Vec<Value> = ask["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "activity")
        .cloned()
        .collect();
    let body = json!({
        "threadId": thread,
        "runId": format!("{thread}-replay"),
        "protocolVersion": "1.0",
        "messages": messages,
        "state": ask["state"],
        "tools": [], "context": [], "forwardedProps": {},
        "resume": [{"interruptId": interrupt_id, "status": "resolved", "payload": ANSWER}],
    });
    let replay = post_run(&url, &body, DRIVE_WITHIN).await;
    let errors: Vec<&Value> = replay
        .events
        .iter()
        .filter(|e| e["type"] == "RUN_ERROR")
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: the replayed resume must not fail: {errors:?}; events: {:?}",
        replay.types()
    );
    assert_run_finished(&replay);
    let task = upstream_task(p, &task_id).await;
    assert_eq!(
        user_history_with(&task, ANSWER),
        1,
        "{what}: the answer once in the upstream history: {}",
        task["history"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_jsonrpc_input_required_is_answered_once_and_a_replayed_resume_is_harmless() {
    a2a_js_input_required("jsonrpc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_rest_input_required_is_answered_once_and_a_replayed_resume_is_harmless() {
    a2a_js_input_required("rest").await;
}

/// a2a_js over `mode`'s binding: the threads API lists a finished and a waiting
/// conversation through the SDK's `ListTasks` and reads the waiting one back.
async fn a2a_js_threads(mode: &str) {
    let p = peer("a2a_js", mode);
    let (_gw, url) = gateway_for("a2a_js", p).await;
    let what = format!("a2a_js {mode} threads (peer log {})", p.log.display());
    let (done, wait) = (
        thread(&format!("threads-done-a2a_js-{mode}")),
        thread(&format!("threads-wait-a2a_js-{mode}")),
    );
    let steps = drive_steps(&url, &done, json!([{"message": "hello"}])).await;
    assert_finished(&steps[0], "success", &what);
    let steps = drive_steps(&url, &wait, json!([{"message": "approve the report"}])).await;
    assert_asks(&steps[0], &what);

    let list = get_json(&format!("{url}/threads?pageSize=100")).await;
    assert_eq!(list["source"], "upstream", "{what}: {list}");
    let status_of = |thread: &str| {
        list["threads"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["threadId"] == thread)
            .and_then(|t| t["status"].as_str())
    };
    assert_eq!(
        (status_of(&done), status_of(&wait)),
        (Some("idle"), Some("input-required")),
        "{what}: {list}"
    );
    let read = get_json(&format!("{url}/threads/{wait}")).await;
    let messages: Vec<(&str, &str)> = read["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {read}"))
        .iter()
        .filter(|m| m["role"] != "activity")
        .map(|m| (m["role"].as_str().unwrap_or("?"), content(m)))
        .collect();
    assert_eq!(
        messages,
        [("user", "approve the report"), ("assistant", QUESTION)],
        "{what}: {read}"
    );
    assert_eq!(
        read["pendingInterrupts"].as_array().map(Vec::len),
        Some(1),
        "{what}: {read}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_jsonrpc_threads_are_listed_and_read_through_list_tasks() {
    a2a_js_threads("jsonrpc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_rest_threads_are_listed_and_read_through_list_tasks() {
    a2a_js_threads("rest").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strands_refused_resume_keeps_the_interrupt_for_a_proper_one() {
    let p = peer("strands", "default");
    let (_gw, url) = gateway_for("strands", p).await;
    let what = format!("strands refused resume (peer log {})", p.log.display());
    let steps = drive_steps(
        &url,
        &thread("refused-strands"),
        json!([
            {"message": "approve the report"},
            // Sent verbatim: a text part, which strands refuses with -32602.
            {"resume": {"status": "resolved", "payload": {"a2aParts": [{"kind": "text", "text": "yes"}]}}},
            {"resume": {"status": "resolved", "payload": ANSWER}}
        ]),
    )
    .await;
    let task_id = assert_asks(&steps[0], &what);
    let interrupt_id = steps[0]["pendingInterrupts"][0]["id"].as_str().unwrap();

    let refused = &steps[1];
    assert!(
        refused["failed"].is_null() && refused["warnings"].as_array().is_some_and(Vec::is_empty),
        "{what}: the refusal is a RUN_ERROR the client accepts:{}",
        brief(refused)
    );
    let code = refused["runErrors"][0]["code"].as_str().unwrap_or_default();
    assert!(
        code.starts_with("a2a_error_"),
        "{what}: RUN_ERROR code {code:?}:{}",
        brief(refused)
    );
    assert_eq!(
        last_event(refused)["type"],
        "RUN_ERROR",
        "{}",
        brief(refused)
    );
    let kept = &refused["state"]["a2a"]["pendingInterrupts"];
    assert!(
        kept.get(interrupt_id).is_some(),
        "{what}: the state keeps interrupt {interrupt_id} after the refusal: {kept}"
    );
    // @ag-ui/client resets pendingInterrupts only on RUN_FINISHED: it still holds it.
    assert_eq!(
        refused["pendingInterrupts"][0]["id"], interrupt_id,
        "{what}: {}",
        refused["pendingInterrupts"]
    );

    let answer = &steps[2];
    assert_finished(answer, "success", &format!("{what}: the proper resume"));
    assert_reply_once(answer, DONE, &format!("{what}: the proper resume"));
    let task = upstream_task(p, &task_id).await;
    assert_eq!(task_state(&task), "completed", "{what}: {task}");
}

/// The gateway's A2A client against a2a_js over `mode`'s binding: every call it makes
/// (stream with both readers, blocking send, subscribe, get, list, cancel) and the SDK's
/// refusals, each landing on its A2A code (docs/bindings.md#errors-one-table-srca2aerrorsrs).
async fn a2a_js_client(mode: &str) {
    use agui_a2a_gateway::a2a::client::{Client, ClientError, Endpoint};
    use agui_a2a_gateway::a2a::model::{
        OutgoingMessage, Part, ProtocolVersion, StreamEvent, TaskState,
    };
    use agui_a2a_gateway::a2a::rpc_code;
    use futures::StreamExt;

    let p = peer("a2a_js", mode);
    let what = format!("a2a_js {mode} client (peer log {})", p.log.display());
    let endpoint = Endpoint {
        binding: p.binding,
        ..Endpoint::json_rpc(
            interface_url(p).await.parse().unwrap(),
            ProtocolVersion::V1,
            Default::default(),
        )
    };
    let a2a = Client::new(reqwest::Client::new(), endpoint, 1 << 20, REQUEST_WITHIN);
    let message = |text: &str, task: Option<&str>, context: Option<&str>| OutgoingMessage {
        message_id: format!("client-{mode}-{}", uuid::Uuid::new_v4()),
        parts: vec![Part::text(text)],
        task_id: task.map(str::to_owned),
        context_id: context.map(str::to_owned),
        ..Default::default()
    };
    let code = |e: ClientError| match e {
        ClientError::Rpc(rpc) => rpc.code,
        other => panic!("{what}: not an A2A error: {other}"),
    };
    let collect = |stream| async move {
        tokio::time::timeout(REQUEST_WITHIN, async {
            let stream: agui_a2a_gateway::a2a::client::EventStream = stream;
            stream
                .map(Result::unwrap)
                .collect::<Vec<StreamEvent>>()
                .await
        })
        .await
        .unwrap_or_else(|_| panic!("the stream did not end within {REQUEST_WITHIN:?}"))
    };
    let last_state = |events: &[StreamEvent]| match events.last() {
        Some(StreamEvent::StatusUpdate(u)) => u.status.state.clone(),
        other => panic!("{what}: the stream ends with {other:?}"),
    };

    // hello, read by reqwest and by the direct reader: the same events.
    let mut counts = Vec::new();
    for reader in [a2a.clone(), a2a.clone().with_direct_streams(REQUEST_WITHIN)] {
        let hello = message("hello", None, None);
        let events = collect(
            reader
                .stream_message(&CallContext::none(), &hello, None)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            last_state(&events),
            TaskState::Completed,
            "{what}: {events:?}"
        );
        counts.push(events.len());
    }
    assert_eq!(counts[0], counts[1], "{what}: both readers");

    // approve, blocking: the task waits for the answer.
    let asked = a2a
        .send_message(
            &CallContext::none(),
            &message("approve", None, None),
            None,
            None,
        )
        .await;
    let Ok(StreamEvent::Task(task)) = asked else {
        panic!("{what}: a task, not {asked:?}");
    };
    assert_eq!(task.status.state, TaskState::InputRequired, "{what}");
    let context = task.context_id.as_deref();

    // Subscribing to the waiting task opens with its snapshot (the SDK then holds the
    // stream open: the task's event bus lives on in input-required).
    let task_id = TaskId::new(&task.id);
    let mut live = a2a.subscribe(&CallContext::none(), &task_id).await.unwrap();
    let first = tokio::time::timeout(REQUEST_WITHIN, live.next()).await;
    assert!(
        matches!(&first, Ok(Some(Ok(StreamEvent::Task(t)))) if t.id == task.id
            && t.status.state == TaskState::InputRequired),
        "{what}: the subscription's first event: {first:?}"
    );
    drop(live);

    let read = a2a
        .get_task(&CallContext::none(), &task_id, Some(1))
        .await
        .unwrap();
    assert_eq!((&read.id, read.history.len()), (&task.id, 1), "{what}");
    let page = a2a
        .list_tasks(
            &CallContext::none(),
            agui_a2a_gateway::a2a::call::ListTasks::first(context, 10).with_artifacts(),
        )
        .await
        .unwrap();
    let listed: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(listed, [task.id.as_str()], "{what}");

    // The answer on the same task, streamed: it completes.
    let answer = message(ANSWER, Some(&task.id), context);
    let events = collect(
        a2a.stream_message(&CallContext::none(), &answer, None)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        last_state(&events),
        TaskState::Completed,
        "{what}: {events:?}"
    );

    // The SDK refuses what a finished task cannot do, before any stream opens.
    let again = message(ANSWER, Some(&task.id), context);
    let again = a2a
        .stream_message(&CallContext::none(), &again, None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        code(again),
        rpc_code::UNSUPPORTED_OPERATION,
        "{what}: a second answer"
    );
    let resubscribed = a2a
        .subscribe(&CallContext::none(), &task_id)
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        code(resubscribed),
        rpc_code::UNSUPPORTED_OPERATION,
        "{what}: subscribe"
    );
    let cancel = a2a
        .cancel_task(&CallContext::none(), &task_id)
        .await
        .unwrap_err();
    assert_eq!(
        code(cancel),
        rpc_code::TASK_NOT_CANCELABLE,
        "{what}: cancel"
    );
    for id in ["no-such-task", ".."] {
        let missing = a2a
            .get_task(&CallContext::none(), &TaskId::new(id), None)
            .await
            .unwrap_err();
        assert!(missing.is_task_not_found(), "{what}: {id}: {missing}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_jsonrpc_answers_and_errors_reach_the_a2a_client() {
    a2a_js_client("jsonrpc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_rest_answers_and_errors_reach_the_a2a_client() {
    a2a_js_client("rest").await;
}

/// a2a_js `approve`, then a `cancelled` resume over `mode`'s binding: the gateway cancels the
/// waiting task and the run finishes cancelled.
async fn a2a_js_cancelled_resume(mode: &str) {
    let p = peer("a2a_js", mode);
    let (_gw, url) = gateway_for("a2a_js", p).await;
    let what = format!(
        "a2a_js {mode} cancelled resume (peer log {})",
        p.log.display()
    );
    let steps = drive_steps(
        &url,
        &thread(&format!("cancel-a2a_js-{mode}")),
        json!([{"message": "approve the report"}, {"resume": {"status": "cancelled"}}]),
    )
    .await;
    let task_id = assert_asks(&steps[0], &what);
    assert_finished(&steps[1], "cancelled", &what);
    assert_eq!(
        steps[1]["state"]["a2a"]["task"]["state"],
        "canceled",
        "{what}:{}",
        brief(&steps[1])
    );
    let task = upstream_task(p, &task_id).await;
    assert_eq!(task_state(&task), "canceled", "{what}: {task}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_jsonrpc_cancelled_resume_cancels_the_waiting_task() {
    a2a_js_cancelled_resume("jsonrpc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_js_rest_cancelled_resume_cancels_the_waiting_task() {
    a2a_js_cancelled_resume("rest").await;
}
