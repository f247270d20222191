//! Token usage over one run (docs/design.md#6-projection-a2a-to-ag-ui usage row,
//! `docs/mapping.md` "Token usage"): the reports an agent sends, read by
//! [`super::dialect::usage_in`], summed into the run's [`Tokens`], which become
//! `RUN_FINISHED.usage` / `RUN_ERROR.usage` and `agui_gateway_tokens_total`.
//!
//! How reports add up (sum per model call, never a repeat):
//! - a report naming its model call (ADK's event id) replaces the call's earlier report:
//!   every streaming chunk of a call repeats the call's usage so far, and the task (or a
//!   resubscribe snapshot) repeats it again;
//! - a report marked as a streaming chunk (`kagent_adk_partial: true`) is skipped: the
//!   call's final event reports it;
//! - any other report on a working event is a model call of its own;
//! - a report on the task itself (a task snapshot, a final or waiting status: kagent's
//!   `kagent_usage_metadata` there is its last call's usage once more) counts only if the run
//!   saw no call's report.
//!
//! Bounded: at most [`MAX_CALLS`] named calls are told apart (by a keyed hash of the name,
//! never the name itself); later names add up like unnamed calls. Every count saturates at
//! [`Tokens::MAX`], so a huge or repeated report never overflows.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use crate::agui::event::TokenUsage;

/// Named model calls told apart in one run; beyond, reports add up.
const MAX_CALLS: usize = 1024;

/// Token counts; `None` where the agent reported nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tokens {
    /// Every prompt token (cached ones included).
    pub input: Option<u64>,
    /// Every generated token (reasoning included).
    pub output: Option<u64>,
    /// The part of `output` spent on reasoning.
    pub reasoning: Option<u64>,
    /// The part of `input` read from a cache.
    pub cached: Option<u64>,
}

impl Tokens {
    /// The largest count written: JSON's safe-integer bound, as AG-UI 1.0 bounds its counts.
    pub(crate) const MAX: u64 = (1 << 53) - 1;

    /// `a + b`, saturating at [`Self::MAX`]; absent only if both are.
    pub(crate) fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
        match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0)).min(Self::MAX)),
        }
    }

    /// True if no count was reported.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn add(&mut self, other: &Tokens) {
        self.input = Self::sum(self.input, other.input);
        self.output = Self::sum(self.output, other.output);
        self.reasoning = Self::sum(self.reasoning, other.reasoning);
        self.cached = Self::sum(self.cached, other.cached);
    }

    /// The AG-UI 1.0 entry: `totalTokens` is input plus output.
    pub(crate) fn to_wire(self) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input,
            output_tokens: self.output,
            total_tokens: Self::sum(self.input, self.output),
            reasoning_tokens: self.reasoning,
            cached_input_tokens: self.cached,
        }
    }
}

/// One usage report found in metadata (`super::dialect::usage_in` reads it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UsageReport<'a> {
    /// The model call it belongs to, when the framework names it (ADK's event id).
    pub call: Option<&'a str>,
    /// Sent with a streaming chunk (`kagent_adk_partial: true`): the call's final event
    /// reports it again.
    pub partial: bool,
    pub tokens: Tokens,
}

/// The usage reports of one run.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// The latest report of each named call, by a keyed hash of its name.
    calls: HashMap<u64, Tokens>,
    hasher: RandomState,
    /// Unnamed calls (and named ones past [`MAX_CALLS`]), summed.
    unnamed: Tokens,
    /// The latest report on the task itself.
    task_level: Option<Tokens>,
}

impl Tally {
    /// Takes one report; `on_task`: it came on the task itself, not on a call's event.
    pub(crate) fn report(&mut self, report: UsageReport<'_>, on_task: bool) {
        match report.call {
            Some(call) => {
                let key = self.hasher.hash_one(call);
                if self.calls.len() < MAX_CALLS || self.calls.contains_key(&key) {
                    self.calls.insert(key, report.tokens);
                } else {
                    self.unnamed.add(&report.tokens);
                }
            }
            None if report.partial => {}
            None if on_task => self.task_level = Some(report.tokens),
            None => self.unnamed.add(&report.tokens),
        }
    }

    /// The run's usage so far (`None`: nothing reported).
    pub(crate) fn total(&self) -> Option<Tokens> {
        let mut total = self.unnamed;
        for call in self.calls.values() {
            total.add(call);
        }
        if total.is_empty() {
            return self.task_level;
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, output: u64) -> Tokens {
        Tokens {
            input: Some(input),
            output: Some(output),
            ..Tokens::default()
        }
    }

    fn report(call: Option<&str>, partial: bool, t: Tokens) -> UsageReport<'_> {
        UsageReport {
            call,
            partial,
            tokens: t,
        }
    }

    #[test]
    fn a_call_counts_once_however_often_it_is_reported() {
        let mut tally = Tally::default();
        tally.report(report(Some("a"), false, tokens(120, 0)), false);
        tally.report(report(Some("a"), false, tokens(120, 23)), false);
        tally.report(report(Some("a"), false, tokens(120, 23)), true);
        tally.report(report(Some("b"), false, tokens(150, 11)), false);
        assert_eq!(tally.total(), Some(tokens(270, 34)));
    }

    #[test]
    fn partial_chunks_are_skipped_and_the_tasks_repeat_is_a_fallback() {
        let mut tally = Tally::default();
        tally.report(report(None, true, tokens(10, 0)), false);
        tally.report(report(None, false, tokens(10, 5)), false);
        tally.report(report(None, false, tokens(20, 6)), false);
        tally.report(report(None, false, tokens(20, 6)), true);
        assert_eq!(tally.total(), Some(tokens(30, 11)));
        let mut only_task = Tally::default();
        assert_eq!(only_task.total(), None);
        only_task.report(report(None, false, tokens(20, 6)), true);
        assert_eq!(only_task.total(), Some(tokens(20, 6)));
    }

    #[test]
    fn counts_saturate_and_names_are_bounded() {
        let mut tally = Tally::default();
        let huge = tokens(Tokens::MAX, Tokens::MAX);
        for i in 0..(MAX_CALLS + 10) {
            tally.report(report(Some(&i.to_string()), false, huge), false);
        }
        assert_eq!(tally.calls.len(), MAX_CALLS);
        assert_eq!(tally.total(), Some(huge));
        let wire = tally.total().unwrap().to_wire();
        assert_eq!(wire.total_tokens, Some(Tokens::MAX));
    }
}
