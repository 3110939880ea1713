//! The check suites, laid out as the stack ([`crate::stack`]): one module
//! per layer, bottom-up, each with a `checks()` listing its checks; a layer
//! of several files is a directory. [`registry`] joins the layers' lists;
//! `support` holds what several layers share.

pub mod amdgpu;
pub mod compat;
pub mod firmware;
pub mod hip;
pub mod hsa;
pub mod kfd;
pub mod miopen;
pub mod network;
pub mod pci;
pub mod rccl;
pub mod rocblas;
pub mod system;

mod registry;
mod support;

#[cfg(test)]
pub(crate) mod fixture;

pub use registry::registry;
