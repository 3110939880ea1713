//! The one crate of rocgate that talks to ROCm's C libraries.
//!
//! Libraries are opened at run time ([`loader`]), so rocgate builds and runs
//! on machines without ROCm. Each library has three levels, after cudarc:
//! `sys` (the symbol table, each symbol a `Result` so a missing one is an
//! error value, never a panic), calls that return `Result` with the
//! library's own status text, and owners that release what they hold.
//! Opening, symbol lookup and status checks are written once: every library
//! is a [`Library`] of its own symbol table, which says where the library is
//! and how it words a failed call ([`library::Binding`]).

pub mod hip;
pub mod hsa;
pub mod library;
pub mod loader;
pub mod miopen;
pub mod range;
pub mod rccl;
pub mod rocblas;
mod table;

pub use library::Library;
pub use loader::{LoadError, Loaded, Search};
