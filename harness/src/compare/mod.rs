//! `rocgate compare`: what changed between two runs' JSON results — versions
//! per scope, checks that stopped passing, throughputs that fell by more
//! than their tolerance and their spread, error counters that grew, and
//! GPUs or checks that are gone.
//!
//! GPUs are matched by identity (PCI address, else serial), never by index:
//! when a GPU falls off the bus or KFD numbers the GPUs in another order,
//! `gpuN` names another GPU, and comparing by index would compare different
//! physical GPUs. A metric between two GPUs (`p2p_gbps.gpu6>gpu5`) is
//! matched by both GPUs' identities, from the pair it names (`between`, or
//! in older reports its name). Only when a report does not say who a GPU is
//! are both runs matched by index, and the comparison says so. A GPU, a
//! check, or a measurement present before and absent after (removed, or
//! written as `null`) while its check still passes is a regression whatever
//! the tolerance, and so is a change in the GPU count.
//!
//! Metrics say what they measure ([`crate::MetricKind`]); for reports older
//! than that, the suites say what a unit means ([`Terms`]), so this module
//! holds no table of units or names: a throughput regressed only when its drop
//! exceeds both its family's tolerance and the spread each run saw over its
//! repetitions (a drop inside the noise of one run is not a change); a
//! counter regressed on any growth; durations, readings and counts are
//! never compared (they follow the host's load, the moment, or a check
//! that judges them).

mod diff;
mod model;
mod read;
mod render;
#[cfg(test)]
mod tests;

pub use diff::compare;
pub use model::*;
pub use read::{Compared, ComparedMetric, Report};
pub use render::{render_markdown, render_text};
