//! Pure, synchronous translation between AG-UI and A2A: the projection of upstream events
//! into AG-UI events, the shadow state it patches, interrupts, and the request side
//! (RunAgentInput -> A2A message). No I/O, no clock, no randomness.

pub(crate) mod context;
pub(crate) mod history;
pub(crate) mod interrupt;
pub(crate) mod projector;
pub(crate) mod request;
pub(crate) mod state;

pub(crate) use projector::{Projector, RunFrame};
