//! What rocgate knows of a node before it calls any vendor library.
//!
//! Every host path is read through a [`Sysroot`] (`/` on a live node, or a
//! directory holding a captured or synthetic node) under a deadline, so no
//! read can hang a run. [`facts`] gathers what the node layers judge (PCI,
//! KFD topology, DRM nodes, the amdgpu module, DKMS, the kernel log, device
//! access); [`versions`] and [`driver_release`] say which releases the node
//! runs; [`snapshot`] captures a node into an archive and opens one again;
//! [`subprocess`] runs the helper programs a node is asked through (`rpm`,
//! `journalctl`, and the front end's `scontrol`) under a deadline.

mod bounded_io;
pub mod driver_release;
pub mod facts;
pub mod snapshot;
pub mod subprocess;
pub mod sysroot;
pub mod versions;

pub use facts::NodeFacts;
pub use sysroot::{PathUse, ReadError, Sysroot};
