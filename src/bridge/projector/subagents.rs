//! Delegation to another agent in the projection (docs/mapping.md#delegation-to-other-agents):
//! a call the dialect table takes for a delegation ([`tools::delegation`]) opens a sub-agent
//! (`SUBAGENT_STARTED`, right after the call's `TOOL_CALL_END`), its result settles it
//! ([`tools::settle`]: `SUBAGENT_FINISHED` or `SUBAGENT_ERROR`, right before the call's
//! `TOOL_CALL_RESULT`), and a run that pauses on a nested approval suspends it.
//!
//! Invariants: a sub-agent is started at most once per run and every one started is closed
//! before the terminal event (`@ag-ui/client` 1.0.0's verifier refuses `RUN_FINISHED` while
//! one is open, and a reused `subagentRunId` in one run); at most [`MAX_TRACKED_SUBAGENTS`]
//! delegations are tracked per run — later ones stay ordinary tool calls. The tool call and
//! its result stay the parent's, as before: the child's own text never reaches the parent's
//! stream (kagent calls it unary, ADK `AgentTool` runs it privately), so the child's answer
//! rides on `SUBAGENT_FINISHED.result` and nothing else is attributed to it.
//!
//! Who gets what is decided here from `frame.v1_client` and `frame.subagents`
//! ([`Projector::subagent_view`]): `SUBAGENT_*` events for 1.0 clients, the same as `CUSTOM`
//! events for others when the agent is `attributed`, nothing (byte for byte as before)
//! otherwise.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::super::tools::{self, ChildReport, Delegation, Settled};
use super::Projector;
use crate::agui::event::SubagentOutcome;
use crate::agui::Event;
use crate::config::Subagents;

/// At most this many delegations are tracked in one run (a hostile upstream may call
/// without end); later ones are ordinary tool calls.
pub(super) const MAX_TRACKED_SUBAGENTS: usize = 256;

/// `SUBAGENT_ERROR.code` of a sub-agent whose result says it failed.
const FAILED: &str = "subagent_failed";
/// `SUBAGENT_ERROR.code` of a sub-agent still open when the run ended otherwise than on a
/// question (completed without its result, failed, cancelled).
const UNANSWERED: &str = "subagent_unanswered";

/// How a run shows delegation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SubagentView {
    /// Not at all: the tool call as before.
    Inline,
    /// `SUBAGENT_*` events (AG-UI 1.0).
    Events,
    /// The same events as `CUSTOM` events (every version defines `CUSTOM`).
    Custom,
}

/// One delegation of the run, by its call id.
#[derive(Debug)]
struct Track {
    why: Delegation,
    /// Started and not closed yet.
    open: bool,
    /// Its result said the child waits for an approval (kagent `main`).
    waiting: bool,
}

/// The delegations of one run.
#[derive(Debug, Default)]
pub(super) struct Tracked(HashMap<String, Track>);

/// The `subagentRunId` of the delegation made by call `call_id`: derived from the call, so a
/// resumed run that settles the same delegation names it the same.
pub(crate) fn subagent_run_id(call_id: &str) -> String {
    format!("{call_id}:subagent")
}

/// `{"a2a": {"subagentSessionId"}}`: the child's session, for a client that fetches it.
fn session_metadata(session: Option<&str>) -> Option<Value> {
    session.map(|s| json!({"a2a": {"subagentSessionId": s}}))
}

impl Projector {
    /// docs/mapping.md#client-versions: 1.0 clients get the events, others the `CUSTOM` form
    /// when the agent is `attributed`, nothing otherwise.
    pub(super) fn subagent_view(&self) -> SubagentView {
        if self.frame.v1_client {
            SubagentView::Events
        } else if self.frame.subagents == Subagents::Attributed {
            SubagentView::Custom
        } else {
            SubagentView::Inline
        }
    }

    fn push_subagent(&self, event: Event, out: &mut Vec<Event>) {
        match self.subagent_view() {
            SubagentView::Events => out.push(event),
            SubagentView::Custom => out.push(event.as_custom()),
            SubagentView::Inline => {}
        }
    }

    /// Starts tracking the delegation of call `id` (`false`: the view is inline, the call
    /// is tracked already, or the run tracks the most it may).
    fn track(&mut self, id: &str, why: Delegation) -> bool {
        if self.subagent_view() == SubagentView::Inline
            || self.subagents.0.contains_key(id)
            || self.subagents.0.len() >= MAX_TRACKED_SUBAGENTS
        {
            return false;
        }
        self.subagents.0.insert(
            id.to_owned(),
            Track {
                why,
                open: true,
                waiting: false,
            },
        );
        true
    }

    fn start_subagent(
        &mut self,
        id: &str,
        name: &str,
        session: Option<&str>,
        out: &mut Vec<Event>,
    ) {
        self.push_subagent(
            Event::SubagentStarted {
                subagent_run_id: subagent_run_id(id),
                name: name.to_owned(),
                parent_tool_call_id: Some(id.to_owned()),
                metadata: session_metadata(session),
            },
            out,
        );
    }

    /// A call was projected: if it delegates, its sub-agent starts.
    pub(super) fn on_delegating_call(
        &mut self,
        id: &str,
        name: &str,
        session: Option<&str>,
        out: &mut Vec<Event>,
    ) {
        let Some(why) = tools::delegation(name, session, &self.frame.subagent_tools) else {
            return;
        };
        if self.track(id, why) {
            self.start_subagent(id, name, session, out);
        }
    }

    /// A result is about to be projected: if it answers a delegation, its sub-agent ends —
    /// one started by its call, or (a resumed run, a call without a mark) one the result
    /// alone reveals, started and settled here.
    pub(super) fn on_delegation_result(
        &mut self,
        id: &str,
        name: Option<&str>,
        report: &ChildReport,
        out: &mut Vec<Event>,
    ) {
        let why = match self.subagents.0.get(id) {
            Some(track) if !track.open => return,
            Some(track) => track.why,
            None => {
                let by_name =
                    name.and_then(|n| tools::delegation(n, None, &self.frame.subagent_tools));
                let Some(why) = report
                    .session
                    .as_ref()
                    .map(|_| Delegation::ResultSession)
                    .or(by_name)
                else {
                    return;
                };
                if !self.track(id, why) {
                    return;
                }
                self.start_subagent(
                    id,
                    name.unwrap_or("subagent"),
                    report.session.as_deref(),
                    out,
                );
                why
            }
        };
        let subagent_run_id = subagent_run_id(id);
        let metadata = session_metadata(report.session.as_deref());
        let event = match tools::settle(report, why) {
            // Closed when the run pauses on the question it waits on.
            Settled::Waiting => {
                if let Some(track) = self.subagents.0.get_mut(id) {
                    track.waiting = true;
                }
                return;
            }
            Settled::Answered(result) => Event::SubagentFinished {
                subagent_run_id,
                result,
                outcome: Some(SubagentOutcome::Success),
                metadata,
            },
            Settled::Failed(message) => Event::SubagentError {
                subagent_run_id,
                message,
                code: Some(FAILED.into()),
                metadata,
            },
        };
        if let Some(track) = self.subagents.0.get_mut(id) {
            track.open = false;
        }
        self.push_subagent(event, out);
    }

    /// The run pauses on a question: every open sub-agent is suspended; the one the question
    /// is nested in names the interrupt it waits on — the one whose call the question is
    /// about (kagent 0.10: the confirmation's `originalFunctionCall`), or whose result said
    /// it waits (kagent `main`, whose question names the child's call).
    pub(super) fn suspend_subagents(
        &mut self,
        interrupt_id: &str,
        about_call: Option<&str>,
        out: &mut Vec<Event>,
    ) {
        for (id, waiting) in self.open_subagents() {
            let interrupt_ids = if waiting || about_call == Some(id.as_str()) {
                vec![interrupt_id.to_owned()]
            } else {
                Vec::new()
            };
            self.push_subagent(
                Event::SubagentFinished {
                    subagent_run_id: subagent_run_id(&id),
                    result: None,
                    outcome: Some(SubagentOutcome::Suspended { interrupt_ids }),
                    metadata: None,
                },
                out,
            );
        }
    }

    /// The run ends otherwise than on a question: every open sub-agent went unanswered.
    pub(super) fn abandon_subagents(&mut self, out: &mut Vec<Event>) {
        for (id, _) in self.open_subagents() {
            self.push_subagent(
                Event::SubagentError {
                    subagent_run_id: subagent_run_id(&id),
                    message: "The run ended before the sub-agent answered.".into(),
                    code: Some(UNANSWERED.into()),
                    metadata: None,
                },
                out,
            );
        }
    }

    /// Closes every open sub-agent: their call ids and whether each waits, in a stable order.
    fn open_subagents(&mut self) -> Vec<(String, bool)> {
        let mut open: Vec<(String, bool)> = self
            .subagents
            .0
            .iter_mut()
            .filter(|(_, t)| t.open)
            .map(|(id, t)| {
                t.open = false;
                (id.clone(), t.waiting)
            })
            .collect();
        open.sort();
        open
    }
}
