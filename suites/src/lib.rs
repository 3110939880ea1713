//! rocgate's layer suites.
//!
//! [`stack`] names the ROCm layers and their order; [`facts`] reads the node
//! through a sysroot; [`layers`] holds one module per layer whose checks
//! turn those facts into verdicts with findings;
//! [`inventory`] describes the node for humans and machines.

pub mod cargo_test;
pub mod compat;
pub mod context;
pub mod driver_release;
pub mod facts;
pub mod findings;
pub mod hangs;
pub mod inventory;
pub mod layers;
pub mod reference;
pub mod runtime;
pub mod session;
pub mod snapshot;
pub mod stack;
pub mod thresholds;
pub mod vendor_messages;
pub mod versions;
pub mod worker_env;

pub use context::{NodeContext, RunOptions};
pub use layers::registry;
pub use session::Session;
