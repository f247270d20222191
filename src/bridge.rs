//! Pure, synchronous translation between AG-UI and A2A: the projection of upstream events
//! into AG-UI events ([`projector`]), the state document's layout and checks ([`state`]),
//! conversations rebuilt from A2A history ([`history`]), interrupts, the contextId order
//! ([`context`]), and the request side (RunAgentInput -> A2A message, [`request`]). No I/O,
//! no clock, no randomness.

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

pub(crate) use projector::{Projector, RunFrame};
