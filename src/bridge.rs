//! Pure, synchronous translation between AG-UI and A2A: the projection of upstream events
//! into AG-UI events, the shadow state it patches, interrupts, and the request side
//! (RunAgentInput -> A2A message). No I/O, no clock, no randomness.

pub mod context;
pub mod history;
pub mod interrupt;
pub mod projector;
pub mod request;
pub mod state;

pub use projector::{Projector, RunFrame};
