//! AG-UI protocol data: the events the gateway emits and the run input it accepts.
//! Data only, no I/O.

pub mod event;
pub mod input;

pub use event::{Event, Interrupt, Outcome};
pub use input::RunAgentInput;
