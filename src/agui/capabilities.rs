//! AG-UI 1.0 `AgentCapabilities` (`@ag-ui/core` 1.0.0 `AgentCapabilities`): what an agent
//! declares it can do, as CopilotKit's `{base}/info` and `GET /agents/{name}` answer it.
//! Data only. Every field is optional and an absent one means "not declared" (unknown), not
//! "unsupported": only what is known is written.

use serde::Serialize;

/// The categories the gateway declares (AG-UI also has `tools.items`, `execution` and
/// `custom`: nothing the gateway knows fills them).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentCapabilities {
    pub identity: Identity,
    pub transport: Transport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Tools>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
    pub state: StateCapabilities,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multi_agent: Option<MultiAgent>,
    pub reasoning: Reasoning,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multimodal: Option<Multimodal>,
    pub human_in_the_loop: HumanInTheLoop,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Identity {
    pub name: String,
    /// The platform behind the agent.
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Transport {
    pub streaming: bool,
    pub websocket: bool,
    pub http_binary: bool,
    pub push_notifications: bool,
    pub resumable: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tools {
    pub client_provided: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Output {
    pub supported_mime_types: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StateCapabilities {
    pub snapshots: bool,
    pub deltas: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MultiAgent {
    pub supported: bool,
    pub delegation: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reasoning {
    pub supported: bool,
    pub streaming: bool,
    pub encrypted: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Multimodal {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Modalities>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Modalities>,
}

/// AG-UI's `MultimodalInputCapabilities` (`output` has only `image` and `audio`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Modalities {
    pub image: bool,
    pub audio: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub video: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdf: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HumanInTheLoop {
    pub supported: bool,
    pub approvals: bool,
    pub interrupts: bool,
}
