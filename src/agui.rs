//! AG-UI protocol data: the events the gateway emits and the run input it accepts, and
//! the events' protobuf encoding ([`proto`]). Data only, no I/O.

pub(crate) mod capabilities;
pub(crate) mod event;
pub(crate) mod input;
pub(crate) mod proto;
pub(crate) mod role;

pub(crate) use event::{Event, Interrupt, Outcome};
pub(crate) use input::RunAgentInput;
pub(crate) use role::Role;
