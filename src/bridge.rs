//! Pure, synchronous translation between AG-UI and A2A. No I/O, no clock, no randomness.
//!
//! A2A -> AG-UI:
//! - [`projector`]: the projection of upstream events into AG-UI events, one per run;
//! - [`state`]: the state document's layout (the one home of every path the gateway owns)
//!   and the shadow that checks every patch;
//! - [`reply`]: one reply, one message: which text or reasoning message each piece of agent
//!   text belongs to;
//! - [`tools`]: tool calls and results in A2A data parts, each framework's shape;
//! - [`interrupt`]: `input-required` / `auth-required` as AG-UI interrupts, their ids;
//! - [`dialect`]: each framework's question and the answer shape it accepts, and its marks
//!   of reasoning and token usage;
//! - [`usage`]: the token usage of a run, summed per model call;
//! - [`history`]: conversations rebuilt from A2A history (reattach, pick-up, thread detail);
//! - [`threads`]: conversations as the threads API lists them, and the inbox;
//! - [`capabilities`]: an agent's AG-UI capabilities, from its card.
//!
//! AG-UI -> A2A:
//! - [`request`]: a run's plan: the message, its task, the run options;
//! - [`lane`]: the forwarding lane: context, tools, system messages and app state the
//!   frontend sends along;
//! - [`context`]: the resolution order of a run's contextId.

pub(crate) mod capabilities;
pub(crate) mod context;
pub(crate) mod dialect;
pub(crate) mod history;
pub(crate) mod interrupt;
pub(crate) mod lane;
pub(crate) mod projector;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod state;
pub(crate) mod threads;
pub(crate) mod tools;
pub(crate) mod usage;

pub(crate) use projector::{Projector, RunFrame};
