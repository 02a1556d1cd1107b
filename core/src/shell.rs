//! What every shell (the proxy-wasm filter, the native module) does the same
//! way around the state machine: the host calls a hook makes, as a trait;
//! how a step's effects are performed; one hook's stream from its callbacks;
//! a worker's micro-batched hit calls and the root's side of them; the
//! root's tick. A shell implements [`host::Host`], [`batch_call::Root`] and
//! [`tick::Ticks`] and [`metrics::Stats`] over its host and maps its callbacks onto
//! [`hook::Stream`]; nothing else about a hook is the shell's.
//!
//! - [`host`]: the host calls a hook makes, and [`host::perform`] of a step's effects.
//! - [`hook`]: one hook's stream: callbacks in, effects performed, the request's flow out.
//! - [`batch`]: a worker's micro-batched fleet hits: the hooks parked for the worker's next call.
//! - [`batch_call`]: the root's batched hit calls for those hooks, and each hook's share of the answer.
//! - [`metrics`]: the edge's stats by name, and what each metric delta writes, over the host's [`metrics::Stats`].
//! - [`background`], [`drain`], [`poll`]: a root's own store calls (settle batches, override-list polls), sent from its tick.
//! - [`deadlines`]: the hard budgets of calls on a connection a shell owns, answered at their deadline.
//! - [`native`]: the node's settle queue the native module keeps process-wide.
//! - [`tick`]: the root's tick period, set on the host when it changes.

pub mod background;
pub mod batch;
pub mod batch_call;
pub mod deadlines;
pub mod drain;
pub mod hook;
pub mod host;
pub mod metrics;
pub mod native;
pub mod poll;
pub mod tick;
