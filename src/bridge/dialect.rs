//! Human-in-the-loop dialects (docs/design.md#7-human-in-the-loop, `docs/dialects.md`): how
//! each agent framework asks for input on the A2A wire, and the one answer shape it accepts.
//! The one home of every framework's HITL shape: the projection reads a waiting status with
//! [`read`], the resume path writes the answer with [`answer`].
//!
//! Also the home of the marks frameworks put on what is not the answer (`docs/dialects.md`
//! "Reasoning and usage"): which text parts are the model's reasoning ([`is_thought`]) and
//! where a model call's token usage travels ([`usage_in`]).
//!
//! Invariants: reading never fails (an unknown shape is plain text, its data part kept as the
//! interrupt's `request`); an answer always has at least one part; a `{"a2aParts": [...]}`
//! payload is sent verbatim whatever the dialect.

use serde_json::{json, Value};

use super::reply;
use super::tools::{self, ADK_FUNCTION_CALL, ADK_FUNCTION_RESPONSE, ADK_TYPE};
use super::usage::{Tokens, UsageReport};
use crate::a2a::model::{Message, Part, PartContent};
use crate::json::str_at;

/// Part metadata flags marking a text part as the model's reasoning, not its answer:
/// ADK `adk_thought: true` (`google/adk/a2a/converters/part_converter.py`), kagent-adk
/// `kagent_thought: true` (`kagent/adk/converters/part_converter.py`).
const THOUGHT_FLAGS: [&str; 2] = ["adk_thought", "kagent_thought"];
/// fasta2a's pydantic-ai bridge writes a `ThinkingPart` as a text part with metadata
/// `{"type": "thinking", "thinking_id", "signature"}` (`fasta2a/pydantic_ai/_bridge.py`).
const THOUGHT_TYPE: &str = "thinking";

/// Event, message and artifact metadata keys holding a model call's Gemini-style usage
/// (`GenerateContentResponseUsageMetadata` dumped by alias): ADK (`adk_usage_metadata`,
/// `google/adk/a2a/converters/event_converter.py`, `from_adk_event.py`) and kagent-adk
/// (`kagent_usage_metadata`, `kagent/adk/converters/event_converter.py`).
const USAGE_KEYS: [&str; 2] = ["adk_usage_metadata", "kagent_usage_metadata"];
/// The metadata key naming the ADK event a report belongs to: every chunk of one model
/// call is one ADK event, and each chunk repeats the call's usage so far.
const USAGE_CALL_KEY: &str = "adk_event_id";
/// Gemini's usage fields (`google.genai.types.GenerateContentResponseUsageMetadata`):
/// prompt (cached content included), tool-use prompt, candidates (thoughts excluded),
/// thoughts, cached content.
const PROMPT_TOKENS: &str = "promptTokenCount";
const TOOL_USE_PROMPT_TOKENS: &str = "toolUsePromptTokenCount";
const CANDIDATES_TOKENS: &str = "candidatesTokenCount";
const THOUGHTS_TOKENS: &str = "thoughtsTokenCount";
const CACHED_TOKENS: &str = "cachedContentTokenCount";

/// True if `part` is a text part the framework marks as the model's reasoning.
pub(crate) fn is_thought(part: &Part) -> bool {
    let Some(meta) = part.metadata.as_ref() else {
        return false;
    };
    matches!(part.content, PartContent::Text(_))
        && (THOUGHT_FLAGS
            .iter()
            .any(|k| meta.get(*k) == Some(&Value::Bool(true)))
            || str_at(meta, "type") == Some(THOUGHT_TYPE))
}

/// The text of `parts`, split into the answer and the reasoning (thought parts).
pub(crate) fn split_text(parts: &[Part]) -> (String, String) {
    let (mut answer, mut reasoning) = (String::new(), String::new());
    for part in parts {
        if let Some(text) = part.as_text() {
            if is_thought(part) {
                reasoning.push_str(text);
            } else {
                answer.push_str(text);
            }
        }
    }
    (answer, reasoning)
}

/// A message's answer text: its text parts without the thoughts (what a question, a task's
/// status text or a failure message says).
pub(crate) fn answer_text(message: &Message) -> String {
    split_text(&message.parts).0
}

/// The usage report in `metadata`, if there is one with at least one count.
pub(crate) fn usage_in(metadata: Option<&Value>) -> Option<UsageReport<'_>> {
    let meta = metadata?;
    let usage = USAGE_KEYS.iter().find_map(|k| meta.get(*k))?;
    let count = |key| count_at(usage, key);
    let prompt = count(PROMPT_TOKENS);
    let tool_prompt = count(TOOL_USE_PROMPT_TOKENS);
    let candidates = count(CANDIDATES_TOKENS);
    let thoughts = count(THOUGHTS_TOKENS);
    // AG-UI 1.0 `TokenUsage`: input and output are totals, reasoning is part of the output
    // (Gemini counts thoughts beside the candidates) and cached part of the input.
    let tokens = Tokens {
        input: Tokens::sum(prompt, tool_prompt),
        output: Tokens::sum(candidates, thoughts),
        reasoning: thoughts,
        cached: count(CACHED_TOKENS),
    };
    (!tokens.is_empty()).then(|| UsageReport {
        call: str_at(meta, USAGE_CALL_KEY),
        partial: reply::marked_partial(Some(meta)),
        tokens,
    })
}

/// A token count: a non-negative number (`120` or protobuf's `120.0`), saturated at
/// [`Tokens::MAX`]; anything else (a string, a negative or non-finite number) is no count.
fn count_at(usage: &Value, key: &str) -> Option<u64> {
    let n = usage.get(key)?.as_f64()?;
    // `as` saturates a float that does not fit; the bound is AG-UI's safe-integer one.
    (n.is_finite() && n >= 0.0).then(|| (n as u64).min(Tokens::MAX))
}

/// The gateway's own structured request (`a2a.input.request`) and answer.
pub(crate) const GATEWAY_REQUEST: &str = "a2a.input.request";
const GATEWAY_RESPONSE: &str = "a2a.input.response";
/// ADK's tool confirmation call (`google/adk/tools/tool_confirmation.py`).
const ADK_CONFIRMATION: &str = "adk_request_confirmation";
/// kagent's HITL message extension (kagent `main`, `kagent-core/.../a2a/_hitl.py`): the
/// request and the answer travel in `message.metadata[URI]`.
pub(crate) const KAGENT_HITL_URI: &str = "https://kagent.dev/extensions/hitl/v1";
/// Extensions the gateway asks for when an agent's card declares them.
pub(crate) const UNDERSTOOD_EXTENSIONS: [&str; 1] = [KAGENT_HITL_URI];
const KAGENT_APPROVAL: &str = "tool_approval_request";
const KAGENT_ASK_USER: &str = "ask_user_request";

/// The framework shape of a waiting task's question.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Dialect {
    /// Text (and any data) the agent reads as text: answered with a text part.
    Text,
    /// The gateway's `a2a.input.request` (a JSON schema): text plus an `a2a.input.response`.
    Gateway,
    /// strands interrupts: `{"interrupts": [{id, name, reason}]}`, answered only by
    /// `{"interruptResponse": {interruptId, response}}` data parts, one per interrupt.
    Strands { interrupt_ids: Vec<String> },
    /// ADK long-running function call, answered by a `function_response` data part with the
    /// call's id and name (a tool confirmation: `{"confirmed": bool}`).
    AdkLongRunning { call_id: String, name: String },
    /// kagent ≤ 0.10 (A2A 0.3): ADK confirmations with `kagent_` keys, answered by a
    /// `{"decision_type": "approve"|"reject"}` data part (plus `ask_user_answers`).
    KagentConfirmation { ask_user: bool },
    /// kagent's HITL extension (`tool_approval_request`, `ask_user_request`), answered in
    /// `metadata[KAGENT_HITL_URI]` with `message.extensions` naming it.
    KagentExtension { kind: KagentKind, ids: Vec<String> },
    /// The agent called frontend tools (`agui-tool-call` data parts,
    /// docs/design.md#8-forwarding-lane): the run ends for the frontend to run them; each
    /// result goes back as an `agui-tool-result`.
    FrontendTools { call_ids: Vec<String> },
}

/// The two kagent requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KagentKind {
    ToolApproval,
    AskUser,
}

/// A waiting task's question, read in its dialect.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Question {
    pub dialect: Dialect,
    /// What to show the person: the status text, else a question made from the data.
    pub text: Option<String>,
    /// The call the question is about (ADK, kagent).
    pub tool_call_id: Option<String>,
    /// The data of the request's data part (several: an array of them).
    pub request: Option<Value>,
    pub response_schema: Option<Value>,
}

/// What the person answered: a resume payload, the parts of their message, or the results
/// of frontend tools (`(toolCallId, content)` of the transcript's `tool` messages).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    Payload(Value),
    Message(Vec<Part>),
    ToolResults(Vec<(String, Value)>),
}

/// Schema of a yes/no approval answer.
fn approval_schema() -> Value {
    json!({"type": "object", "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string"}
    }, "required": ["approved"]})
}

/// Schema of a free-text answer.
fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// A readable line for a call: `name({"k": v})`.
fn describe_call(name: &str, args: Option<&Value>) -> String {
    match args {
        Some(a) if a.as_object().is_some_and(|o| !o.is_empty()) => format!("{name}({a})"),
        _ => format!("{name}()"),
    }
}

/// What a reader sees of a waiting status message.
struct Asked<'a> {
    message: &'a Message,
    /// Its text, if any (the question in words).
    text: Option<String>,
    /// Its data parts with their metadata.
    datas: Vec<(&'a Value, Option<&'a Value>)>,
}

/// Reads the question of a waiting status message (`None`: no message at all): the first
/// dialect that recognises it wins, plain text otherwise.
pub(crate) fn read(message: Option<&Message>) -> Question {
    let Some(message) = message else {
        return plain(None, None);
    };
    let datas: Vec<(&Value, Option<&Value>)> = message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            PartContent::Data(d) => Some((d, p.metadata.as_ref())),
            _ => None,
        })
        .collect();
    // docs/design.md#7-human-in-the-loop: any data part of the request is the interrupt's
    // `request`.
    let request = match datas.as_slice() {
        [] => None,
        [(one, _)] => Some((*one).clone()),
        many => Some(Value::Array(
            many.iter().map(|(d, _)| (*d).clone()).collect(),
        )),
    };
    let asked = Asked {
        message,
        text: Some(answer_text(message)).filter(|t| !t.trim().is_empty()),
        datas,
    };
    read_strands(&asked)
        .or_else(|| read_adk(&asked))
        .or_else(|| read_kagent_extension(&asked))
        .or_else(|| read_frontend_tools(&asked))
        .or_else(|| read_gateway(&asked))
        .unwrap_or_else(|| plain(asked.text, request))
}

fn plain(question: Option<String>, request: Option<Value>) -> Question {
    Question {
        dialect: Dialect::Text,
        text: question,
        tool_call_id: None,
        request,
        response_schema: None,
    }
}

/// strands: `{"interrupts": [{"interruptId", "name", "reason"}]}`
/// (`strands/multiagent/a2a/executor.py` `_handle_interrupt_result`).
fn read_strands(asked: &Asked<'_>) -> Option<Question> {
    let (data, interrupts) = asked
        .datas
        .iter()
        .find_map(|(d, _)| Some((*d, d.get("interrupts")?.as_array()?)))?;
    let interrupt_ids: Vec<String> = interrupts
        .iter()
        .filter_map(|i| str_at(i, "interruptId").or_else(|| str_at(i, "id")))
        .map(str::to_owned)
        .collect();
    if interrupt_ids.is_empty() {
        return None;
    }
    let reason = interrupts.iter().find_map(|i| {
        let reason = i.get("reason")?;
        reason
            .as_str()
            .map(str::to_owned)
            .or_else(|| question_in(reason))
            .or_else(|| str_at(i, "name").map(str::to_owned))
    });
    Some(Question {
        dialect: Dialect::Strands { interrupt_ids },
        // The text part is a Python repr of the reasons; the data has the question.
        text: reason.or_else(|| asked.text.clone()),
        tool_call_id: None,
        request: Some(data.clone()),
        response_schema: Some(json!({})),
    })
}

/// ADK: a long-running function call the task waits on, answered by its
/// `function_response`; ADK's tool confirmation is such a call (`adk_request_confirmation`),
/// which kagent ≤ 0.10 writes with `kagent_` keys and answers with a decision.
fn read_adk(asked: &Asked<'_>) -> Option<Question> {
    let (call, kind) = asked.datas.iter().find_map(|(d, m)| {
        let kind = tools::adk_part(*m)?;
        (kind.kind == ADK_FUNCTION_CALL && kind.long_running).then_some((*d, kind))
    })?;
    let (id, name) = (str_at(call, "id")?, str_at(call, "name")?);
    let args = call.get("args");
    let original = args.and_then(|a| a.get("originalFunctionCall"));
    let confirmation = name == ADK_CONFIRMATION;
    let ask_user = original.and_then(|o| str_at(o, "name")) == Some("ask_user");
    let hint = args
        .and_then(|a| a.get("toolConfirmation"))
        .and_then(|c| str_at(c, "hint"));
    let question = asked
        .text
        .clone()
        .or_else(|| hint.map(str::to_owned))
        .or_else(|| args.and_then(question_in))
        .unwrap_or_else(|| {
            let (n, a) = match original {
                Some(o) => (str_at(o, "name").unwrap_or(name), o.get("args")),
                None => (name, args),
            };
            format!("The agent waits for {}.", describe_call(n, a))
        });
    Some(Question {
        dialect: if kind.kagent && confirmation {
            Dialect::KagentConfirmation { ask_user }
        } else {
            Dialect::AdkLongRunning {
                call_id: id.to_owned(),
                name: name.to_owned(),
            }
        },
        text: Some(question),
        // A confirmation is about the call it holds back.
        tool_call_id: Some(
            original
                .and_then(|o| str_at(o, "id"))
                .unwrap_or(id)
                .to_owned(),
        ),
        request: Some(call.clone()),
        response_schema: Some(match (confirmation, ask_user) {
            (true, true) => text_schema(),
            (true, false) => approval_schema(),
            _ => json!({"type": "object"}),
        }),
    })
}

/// kagent's HITL extension: the request is in `message.metadata[KAGENT_HITL_URI]`.
fn read_kagent_extension(asked: &Asked<'_>) -> Option<Question> {
    let req = asked.message.metadata.as_ref()?.get(KAGENT_HITL_URI)?;
    let kind = match str_at(req, "type")? {
        KAGENT_APPROVAL => KagentKind::ToolApproval,
        KAGENT_ASK_USER => KagentKind::AskUser,
        _ => return None,
    };
    // Answers name the visible ids: a paused child agent's tools when nested.
    let tools: &[Value] = req
        .get("nested")
        .and_then(|n| n.get("tools"))
        .or_else(|| req.get("tools"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let ids: Vec<String> = match kind {
        KagentKind::ToolApproval => tools
            .iter()
            .filter_map(|t| str_at(t, "id").map(str::to_owned))
            .collect(),
        KagentKind::AskUser => str_at(req, "id")
            .or_else(|| tools.first().and_then(|t| str_at(t, "id")))
            .map(|id| vec![id.to_owned()])
            .unwrap_or_default(),
    };
    let question = asked
        .text
        .clone()
        .or_else(|| str_at(req, "hint").map(str::to_owned))
        .or_else(|| kagent_questions(req))
        .unwrap_or_else(|| {
            let calls: Vec<String> = tools
                .iter()
                .map(|t| describe_call(str_at(t, "name").unwrap_or("a tool"), t.get("args")))
                .collect();
            format!("Approve {}?", calls.join(", "))
        });
    Some(Question {
        dialect: Dialect::KagentExtension { kind, ids },
        text: Some(question),
        tool_call_id: tools
            .first()
            .and_then(|t| str_at(t, "call_id").or_else(|| str_at(t, "id")))
            .map(str::to_owned),
        request: Some(req.clone()),
        response_schema: Some(match kind {
            KagentKind::ToolApproval => approval_schema(),
            KagentKind::AskUser => text_schema(),
        }),
    })
}

/// Frontend tool calls (`agui-tool-call`, docs/design.md#8-forwarding-lane), the wait for their
/// results.
fn read_frontend_tools(asked: &Asked<'_>) -> Option<Question> {
    let calls: Vec<(String, String)> = asked
        .datas
        .iter()
        .filter(|(d, _)| str_at(d, "type") == Some(tools::FRONTEND_TOOL_CALL))
        .filter_map(|(d, m)| match tools::read(d, *m)? {
            tools::ToolItem::Call { id, name, .. } => Some((id, name)),
            tools::ToolItem::Result { .. } => None,
        })
        .collect();
    let (first, _) = calls.first()?.clone();
    let names: Vec<&str> = calls.iter().map(|(_, n)| n.as_str()).collect();
    Some(Question {
        text: asked
            .text
            .clone()
            .or_else(|| Some(format!("The agent calls {}.", names.join(", ")))),
        dialect: Dialect::FrontendTools {
            call_ids: calls.into_iter().map(|(id, _)| id).collect(),
        },
        tool_call_id: Some(first),
        request: None,
        response_schema: None,
    })
}

/// The gateway's own structured request (`a2a.input.request`): its schema is the
/// response schema.
fn read_gateway(asked: &Asked<'_>) -> Option<Question> {
    let (req, _) = asked
        .datas
        .iter()
        .find(|(d, _)| d.get("schema").is_some() || str_at(d, "type") == Some(GATEWAY_REQUEST))?;
    Some(Question {
        dialect: Dialect::Gateway,
        text: asked.text.clone().or_else(|| question_in(req)),
        tool_call_id: None,
        request: Some((*req).clone()),
        response_schema: req.get("schema").filter(|s| s.is_object()).cloned(),
    })
}

/// kagent's `questions[].text`, joined.
fn kagent_questions(req: &Value) -> Option<String> {
    let qs: Vec<&str> = req
        .get("questions")?
        .as_array()?
        .iter()
        .filter_map(|q| str_at(q, "question"))
        .collect();
    (!qs.is_empty()).then(|| qs.join("; "))
}

/// A question written in a request's data (`question`, `message`, `prompt`, `text`).
fn question_in(data: &Value) -> Option<String> {
    ["question", "message", "prompt", "text", "description"]
        .iter()
        .find_map(|k| str_at(data, k).map(str::to_owned))
}

/// The text of a reply: a string payload, an object's `text` (or `answer`), an approval as
/// yes/no, the message's text; otherwise the payload as JSON text.
fn reply_text(reply: &Reply) -> String {
    match reply {
        Reply::Payload(Value::String(s)) => s.clone(),
        Reply::Payload(p) => str_at(p, "text")
            .or_else(|| str_at(p, "answer"))
            .map(str::to_owned)
            .or_else(|| approval_of(p).map(|a| if a { "yes" } else { "no" }.to_owned()))
            .unwrap_or_else(|| p.to_string()),
        Reply::Message(parts) => parts.iter().filter_map(Part::as_text).collect(),
        Reply::ToolResults(results) => results
            .iter()
            .map(|(_, c)| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// An explicit decision in a payload: `approved`, `approve`, `decision`.
fn approval_of(p: &Value) -> Option<bool> {
    if let Some(b) = p
        .get("approved")
        .or_else(|| p.get("approve"))
        .and_then(Value::as_bool)
    {
        return Some(b);
    }
    let decision = str_at(p, "decision").or_else(|| str_at(p, "decision_type"))?;
    match decision.to_ascii_lowercase().as_str() {
        "approve" | "approved" | "yes" | "allow" => Some(true),
        "deny" | "denied" | "reject" | "rejected" | "no" => Some(false),
        _ => None,
    }
}

/// Yes/no read from free text (kagent and strands approvals answered in words).
fn approval_in_text(text: &str) -> Option<bool> {
    let t = text
        .trim()
        .trim_end_matches(['.', '!'])
        .to_ascii_lowercase();
    match t.as_str() {
        "yes" | "y" | "approve" | "approved" | "ok" | "allow" | "sure" => Some(true),
        "no" | "n" | "deny" | "denied" | "reject" | "rejected" => Some(false),
        _ => None,
    }
}

/// The reply as a JSON value (a message's text as a string).
fn reply_value(reply: &Reply) -> Value {
    match reply {
        Reply::Payload(p) => p.clone(),
        Reply::Message(_) => Value::String(reply_text(reply)),
        Reply::ToolResults(results) => match results.as_slice() {
            [(_, one)] => one.clone(),
            many => Value::Array(many.iter().map(|(_, c)| c.clone()).collect()),
        },
    }
}

/// The `agui-tool-result` parts for `call_ids`: the transcript's results by id, or the
/// reply as every call's result.
fn tool_results(call_ids: &[String], reply: &Reply) -> Vec<Part> {
    let results: Vec<(String, Value)> = match reply {
        Reply::ToolResults(results) => results.clone(),
        other => call_ids
            .iter()
            .map(|id| (id.clone(), Value::String(reply_text(other))))
            .collect(),
    };
    results
        .into_iter()
        .map(|(id, content)| {
            Part::data(
                json!({"type": tools::FRONTEND_TOOL_RESULT, "toolCallId": id, "content": content}),
            )
        })
        .collect()
}

/// An answer written in a dialect: the message's parts, and its metadata and extensions
/// when the dialect answers there (kagent's HITL extension).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Written {
    pub parts: Vec<Part>,
    pub metadata: Option<Value>,
    pub extensions: Vec<String>,
}

impl From<Vec<Part>> for Written {
    fn from(parts: Vec<Part>) -> Self {
        Self {
            parts,
            metadata: None,
            extensions: Vec::new(),
        }
    }
}

/// The answer to `question` with `reply`, in the question's dialect
/// (docs/design.md#7-human-in-the-loop).
pub(crate) fn answer(question: &Question, reply: &Reply, interrupt_id: &str) -> Written {
    if let Reply::Payload(p) = reply {
        if let Some(parts) = verbatim_parts(p) {
            return parts.into();
        }
    }
    let parts = match &question.dialect {
        Dialect::Strands { interrupt_ids } => interrupt_ids
            .iter()
            .map(|id| {
                Part::data(json!({"interruptResponse": {
                    "interruptId": id,
                    "response": reply_value(reply),
                }}))
            })
            .collect(),
        Dialect::FrontendTools { call_ids } => tool_results(call_ids, reply),
        Dialect::AdkLongRunning { call_id, name } => {
            let response = adk_response(call_id, name, reply);
            let mut part = Part::data(json!({"id": call_id, "name": name, "response": response}));
            part.metadata = Some(json!({ ADK_TYPE: ADK_FUNCTION_RESPONSE }));
            vec![part]
        }
        Dialect::KagentConfirmation { ask_user } => {
            let text = reply_text(reply);
            let data = if *ask_user {
                json!({"decision_type": "approve", "ask_user_answers": [{"answer": [text]}]})
            } else if approval(reply) {
                json!({"decision_type": "approve"})
            } else {
                json!({"decision_type": "reject", "rejection_reason": text})
            };
            vec![Part::data(data), Part::text(text)]
        }
        Dialect::KagentExtension { kind, ids } => {
            return kagent_extension_answer(*kind, ids, reply)
        }
        Dialect::Gateway => gateway_answer(reply, interrupt_id),
        Dialect::Text => match reply {
            Reply::Message(parts) => parts.clone(),
            Reply::Payload(Value::Object(_)) => gateway_answer(reply, interrupt_id),
            Reply::ToolResults(_) => tool_results(&[], reply),
            Reply::Payload(_) => vec![Part::text(reply_text(reply))],
        },
    };
    if parts.is_empty() {
        vec![Part::text(reply_text(reply))].into()
    } else {
        parts.into()
    }
}

/// The `response` of an ADK function_response: a confirmation's decision; a frontend
/// tool's result for the call (a JSON object as is, else `{"result": ...}`); an object
/// payload as is, else `{"answer": ...}`.
fn adk_response(call_id: &str, name: &str, reply: &Reply) -> Value {
    if name == ADK_CONFIRMATION {
        return json!({"confirmed": approval(reply)});
    }
    if let Reply::ToolResults(results) = reply {
        let content = results
            .iter()
            .find(|(id, _)| id == call_id)
            .or(results.first())
            .map(|(_, c)| c.clone())
            .unwrap_or(Value::Null);
        let parsed = content
            .as_str()
            .and_then(|s| serde_json::from_str::<Value>(s).ok());
        return match (content, parsed) {
            (Value::Object(o), _) | (_, Some(Value::Object(o))) => Value::Object(o),
            (other, _) => json!({"result": other}),
        };
    }
    match reply_value(reply) {
        Value::Object(o) => Value::Object(o),
        other => json!({"answer": other}),
    }
}

/// A yes/no read from the reply: an explicit decision, or the words of a text answer;
/// anything else is no (an approval is never assumed).
fn approval(reply: &Reply) -> bool {
    match reply {
        Reply::Payload(p) if p.is_object() => approval_of(p),
        _ => approval_in_text(&reply_text(reply)),
    }
    .unwrap_or(false)
}

/// kagent's extension answers: `tool_approval_response` (one entry per visible id) or
/// `ask_user_response`, in `metadata[KAGENT_HITL_URI]`, with a text part for people.
fn kagent_extension_answer(kind: KagentKind, ids: &[String], reply: &Reply) -> Written {
    let text = reply_text(reply);
    let payload = match kind {
        KagentKind::ToolApproval => {
            let approved = approval(reply);
            let approvals: Vec<Value> = ids
                .iter()
                .map(|id| {
                    let mut entry = json!({"id": id, "approved": approved});
                    if !approved {
                        entry["rejection_reason"] = json!(text);
                    }
                    entry
                })
                .collect();
            json!({"type": "tool_approval_response", "approvals": approvals})
        }
        KagentKind::AskUser => json!({
            "type": "ask_user_response",
            "id": ids.first().cloned().unwrap_or_default(),
            "answers": [{"answer": [text]}],
        }),
    };
    Written {
        parts: vec![Part::text(text)],
        metadata: Some(json!({ KAGENT_HITL_URI: payload })),
        extensions: vec![KAGENT_HITL_URI.to_owned()],
    }
}

/// `{"a2aParts": [...]}`: parts sent as given (docs/design.md#7-human-in-the-loop); `None` if
/// the payload is not that.
fn verbatim_parts(payload: &Value) -> Option<Vec<Part>> {
    let list = payload.get("a2aParts")?.as_array()?;
    let parts: Vec<Part> = list
        .iter()
        .filter_map(|p| serde_json::from_value(p.clone()).ok())
        .collect();
    (!parts.is_empty()).then_some(parts)
}

/// The text (if any) plus the gateway's structured answer.
fn gateway_answer(reply: &Reply, interrupt_id: &str) -> Vec<Part> {
    match reply {
        Reply::Message(parts) => parts.clone(),
        Reply::ToolResults(_) => tool_results(&[], reply),
        Reply::Payload(p) => {
            let mut parts = Vec::new();
            if let Some(text) = str_at(p, "text").or_else(|| p.as_str()) {
                parts.push(Part::text(text));
            }
            parts.push(Part::data(json!({
                "type": GATEWAY_RESPONSE,
                "interruptId": interrupt_id,
                "payload": p,
            })));
            parts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(parts: Value) -> Message {
        serde_json::from_value(json!({"messageId": "m", "role": "agent", "parts": parts})).unwrap()
    }

    #[test]
    fn each_framework_marks_its_thoughts() {
        let part = |meta: Value| Part {
            metadata: Some(meta),
            ..Part::text("hmm")
        };
        assert!(is_thought(&part(json!({"adk_thought": true}))));
        assert!(is_thought(&part(json!({"kagent_thought": true}))));
        assert!(is_thought(&part(
            json!({"type": "thinking", "thinking_id": null})
        )));
        assert!(!is_thought(&part(json!({"adk_thought": false}))));
        assert!(!is_thought(&Part::text("hmm")));
        let data = Part {
            metadata: Some(json!({"adk_thought": true})),
            ..Part::data(json!({}))
        };
        assert!(!is_thought(&data), "only text is reasoning");
    }

    #[test]
    fn a_question_never_shows_the_thinking_before_it() {
        let m = message(json!([
            {"kind": "text", "text": "They want to delete. ", "metadata": {"kagent_thought": true}},
            {"kind": "text", "text": "Approve deleting the pod?"}
        ]));
        assert_eq!(
            read(Some(&m)).text.as_deref(),
            Some("Approve deleting the pod?")
        );
    }

    #[test]
    fn usage_is_read_from_gemini_counts_and_hostile_values_are_no_counts() {
        let meta = json!({"adk_event_id": "e1", "adk_usage_metadata": {
            "promptTokenCount": 120.0, "candidatesTokenCount": 8, "thoughtsTokenCount": 15,
            "cachedContentTokenCount": 100, "totalTokenCount": 143}});
        let r = usage_in(Some(&meta)).unwrap();
        assert_eq!(r.call, Some("e1"));
        assert!(!r.partial);
        assert_eq!(
            r.tokens,
            Tokens {
                input: Some(120),
                output: Some(23),
                reasoning: Some(15),
                cached: Some(100)
            }
        );
        let hostile = json!({"kagent_adk_partial": true, "kagent_usage_metadata": {
            "promptTokenCount": 1e300, "candidatesTokenCount": "many",
            "thoughtsTokenCount": -5, "cachedContentTokenCount": null}});
        let r = usage_in(Some(&hostile)).unwrap();
        assert!(r.partial);
        assert_eq!(r.tokens.input, Some(Tokens::MAX), "saturated");
        assert_eq!((r.tokens.output, r.tokens.reasoning), (None, None));
        let nothing = json!({"adk_usage_metadata": {"totalTokenCount": "x"}});
        assert_eq!(usage_in(Some(&nothing)), None);
        assert_eq!(usage_in(Some(&json!({"adk_usage_metadata": "str"}))), None);
    }

    #[test]
    fn plain_text_is_answered_with_text() {
        let r = read(Some(&message(
            json!([{"kind": "text", "text": "Approve?"}]),
        )));
        assert_eq!(r.dialect, Dialect::Text);
        assert_eq!(r.text.as_deref(), Some("Approve?"));
        let written = answer(&r, &Reply::Payload(json!("yes")), "i");
        assert_eq!(written.parts, vec![Part::text("yes")]);
    }

    #[test]
    fn kagent_extension_requests_are_answered_in_its_metadata() {
        let mut m = message(json!([{"kind": "text", "text": "Tool 'rm' requires approval."}]));
        m.metadata = Some(json!({KAGENT_HITL_URI: {"type": "tool_approval_request",
            "tools": [{"id": "adk-1", "call_id": "call-1", "name": "rm", "args": {}}]}}));
        let r = read(Some(&m));
        assert_eq!(r.tool_call_id.as_deref(), Some("call-1"));
        let w = answer(&r, &Reply::Payload(json!({"approved": true})), "i");
        assert_eq!(w.extensions, [KAGENT_HITL_URI]);
        assert_eq!(
            w.metadata.unwrap()[KAGENT_HITL_URI],
            json!({"type": "tool_approval_response", "approvals": [{"id": "adk-1", "approved": true}]})
        );
        let no = answer(&r, &Reply::Payload(json!("no")), "i");
        assert_eq!(
            no.metadata.unwrap()[KAGENT_HITL_URI]["approvals"][0]["approved"],
            false
        );
    }

    #[test]
    fn an_unclear_answer_never_approves() {
        let mut m = message(json!([]));
        m.metadata = Some(json!({KAGENT_HITL_URI: {"type": "tool_approval_request",
            "tools": [{"id": "adk-1", "name": "rm"}]}}));
        let r = read(Some(&m));
        let w = answer(&r, &Reply::Payload(json!("maybe later")), "i");
        assert_eq!(
            w.metadata.unwrap()[KAGENT_HITL_URI]["approvals"][0]["approved"],
            false
        );
    }

    #[test]
    fn a_verbatim_payload_wins_over_the_dialect() {
        let r = read(Some(&message(
            json!([{"kind": "text", "text": "Approve?"}]),
        )));
        let payload = json!({"a2aParts": [{"kind": "data", "data": {"x": 1}}]});
        assert_eq!(
            answer(&r, &Reply::Payload(payload), "i").parts,
            vec![Part::data(json!({"x": 1}))]
        );
    }
}
