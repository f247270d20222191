//! An agent's AG-UI capabilities (docs/mapping.md#capabilities), derived from its A2A card
//! and from what the gateway itself does on every run. Pure: no I/O.
//!
//! Invariant: nothing is claimed that the gateway cannot do. What the card does not say is
//! left out (AG-UI reads an absent category as "not declared"); what the gateway always does
//! (state snapshots and deltas, interrupts, reasoning shown apart) is declared for every
//! agent, since the gateway does it whatever the agent.

use crate::a2a::card::AgentCard;
use crate::agui::capabilities::{
    AgentCapabilities, HumanInTheLoop, Identity, Modalities, MultiAgent, Multimodal, Output,
    Reasoning, StateCapabilities, Tools, Transport,
};

/// What the gateway's configuration adds to the card.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Served {
    /// The card says the agent streams (else each run's events come in one batch).
    pub streaming: bool,
    /// The run's frontend tools reach the agent by default (`forward: [tools]`).
    pub forwards_tools: bool,
    /// The configuration names tools of the agent that are other agents (`subagent_tools`):
    /// it delegates, and the gateway shows it (docs/mapping.md#delegation-to-other-agents).
    /// A kagent agent's agent tools are not on its card: undeclared.
    pub delegates: bool,
}

/// The capabilities of the agent named `name` whose card is `card` (`None`: not read yet).
pub(crate) fn of(name: &str, card: Option<&AgentCard>, served: Served) -> AgentCapabilities {
    let identity = match card {
        Some(card) => Identity {
            name: card.name.clone(),
            kind: IDENTITY_TYPE,
            description: Some(card.description.clone()).filter(|d| !d.is_empty()),
            version: card.version.clone(),
            provider: card
                .provider
                .as_ref()
                .map(|p| p.organization.clone())
                .filter(|o| !o.is_empty()),
            documentation_url: card.documentation_url.clone(),
        },
        None => Identity {
            name: name.to_owned(),
            kind: IDENTITY_TYPE,
            ..Identity::default()
        },
    };
    let input_modes = card.map_or(&[][..], |c| &c.default_input_modes);
    let output_modes = card.map_or(&[][..], |c| &c.default_output_modes);
    let multimodal = Multimodal {
        input: (!input_modes.is_empty()).then(|| input_modalities(input_modes)),
        output: (!output_modes.is_empty()).then(|| Modalities {
            image: accepts(output_modes, Modality::Image),
            audio: accepts(output_modes, Modality::Audio),
            ..Modalities::default()
        }),
    };
    AgentCapabilities {
        identity,
        transport: Transport {
            // Every run is answered as a stream of events, whatever the agent.
            streaming: true,
            websocket: false,
            http_binary: false,
            push_notifications: false,
            resumable: false,
        },
        tools: served.forwards_tools.then_some(Tools {
            client_provided: true,
        }),
        output: (!output_modes.is_empty()).then(|| Output {
            supported_mime_types: output_modes.to_vec(),
        }),
        state: StateCapabilities {
            snapshots: true,
            deltas: true,
        },
        multi_agent: served.delegates.then_some(MultiAgent {
            supported: true,
            delegation: true,
        }),
        reasoning: Reasoning {
            supported: true,
            streaming: served.streaming,
            encrypted: false,
        },
        multimodal: (multimodal.input.is_some() || multimodal.output.is_some())
            .then_some(multimodal),
        human_in_the_loop: HumanInTheLoop {
            supported: true,
            approvals: true,
            interrupts: true,
        },
    }
}

/// `identity.type`: the platform behind every agent the gateway serves.
const IDENTITY_TYPE: &str = "a2a";

/// A kind of media an agent may take or give.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Modality {
    Image,
    Audio,
    Video,
    Pdf,
    /// Any other file: not text, JSON or one of the above.
    File,
}

impl Modality {
    /// The kind of media `mode` (a media type, maybe a `type/*` range) names, if any.
    fn of(mode: &str) -> Option<Self> {
        let mode = mode.trim().to_ascii_lowercase();
        let (kind, _) = mode.split_once('/').unwrap_or((&mode, ""));
        match kind {
            "image" => Some(Self::Image),
            "audio" => Some(Self::Audio),
            "video" => Some(Self::Video),
            "text" => None,
            _ if mode == "application/pdf" => Some(Self::Pdf),
            _ if mode == "application/json" || mode.ends_with("+json") => None,
            _ => Some(Self::File),
        }
    }
}

/// Whether `modes` take `modality` (`*/*` takes all).
fn accepts(modes: &[String], modality: Modality) -> bool {
    modes
        .iter()
        .any(|m| m.trim() == "*/*" || Modality::of(m) == Some(modality))
}

fn input_modalities(modes: &[String]) -> Modalities {
    Modalities {
        image: accepts(modes, Modality::Image),
        audio: accepts(modes, Modality::Audio),
        video: Some(accepts(modes, Modality::Video)),
        pdf: Some(accepts(modes, Modality::Pdf)),
        file: Some(accepts(modes, Modality::File)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn card(v: Value) -> AgentCard {
        serde_json::from_value(v).unwrap()
    }

    fn json_of(name: &str, card: Option<&AgentCard>, served: Served) -> Value {
        serde_json::to_value(of(name, card, served)).unwrap()
    }

    #[test]
    fn the_cards_identity_and_modes_are_declared() {
        let card = card(json!({
            "name": "Researcher", "description": "Finds things", "version": "2.1.0",
            "provider": {"organization": "Acme", "url": "https://acme.example"},
            "documentationUrl": "https://docs.acme.example/researcher",
            "defaultInputModes": ["text/plain", "image/png", "application/pdf"],
            "defaultOutputModes": ["text/plain", "application/json"],
            "capabilities": {"streaming": true}
        }));
        let served = Served {
            streaming: true,
            forwards_tools: false,
            delegates: false,
        };
        assert_eq!(
            json_of("research", Some(&card), served),
            json!({
                "identity": {"name": "Researcher", "type": "a2a", "description": "Finds things",
                    "version": "2.1.0", "provider": "Acme",
                    "documentationUrl": "https://docs.acme.example/researcher"},
                "transport": {"streaming": true, "websocket": false, "httpBinary": false,
                    "pushNotifications": false, "resumable": false},
                "output": {"supportedMimeTypes": ["text/plain", "application/json"]},
                "state": {"snapshots": true, "deltas": true},
                "reasoning": {"supported": true, "streaming": true, "encrypted": false},
                "multimodal": {
                    "input": {"image": true, "audio": false, "video": false, "pdf": true,
                        "file": false},
                    "output": {"image": false, "audio": false}},
                "humanInTheLoop": {"supported": true, "approvals": true, "interrupts": true}
            })
        );
    }

    #[test]
    fn an_unread_card_declares_only_what_the_gateway_does() {
        let v = json_of(
            "research",
            None,
            Served {
                streaming: false,
                forwards_tools: true,
                delegates: false,
            },
        );
        assert_eq!(v["identity"], json!({"name": "research", "type": "a2a"}));
        assert_eq!(v["tools"], json!({"clientProvided": true}));
        assert_eq!(v["reasoning"]["streaming"], json!(false));
        for unknown in ["output", "multimodal", "multiAgent"] {
            assert!(v.get(unknown).is_none(), "{unknown}: {v}");
        }
    }

    #[test]
    fn an_agent_configured_with_agent_tools_declares_delegation() {
        let served = Served {
            delegates: true,
            ..Served::default()
        };
        let v = json_of("parent", None, served);
        assert_eq!(
            v["multiAgent"],
            json!({"supported": true, "delegation": true})
        );
    }

    #[test]
    fn media_types_name_their_modality() {
        let cases = [
            ("image/*", Some(Modality::Image)),
            ("IMAGE/PNG", Some(Modality::Image)),
            ("audio/wav", Some(Modality::Audio)),
            ("video/mp4", Some(Modality::Video)),
            ("application/pdf", Some(Modality::Pdf)),
            ("application/octet-stream", Some(Modality::File)),
            ("application/zip", Some(Modality::File)),
            ("text/plain", None),
            ("text/csv", None),
            ("application/json", None),
            ("application/vnd.a2ui+json", None),
        ];
        for (mode, modality) in cases {
            assert_eq!(Modality::of(mode), modality, "{mode}");
        }
        let any = input_modalities(&["*/*".to_owned()]);
        assert!(any.image && any.audio && any.video == Some(true) && any.file == Some(true));
    }
}
