//! What rocgate's front ends share: the `rocgate` command and the
//! `cargo test` target both open a node in a [`session::Session`] (the
//! suites' checks over the node's context), plan it and run it through the
//! engine; [`inventory`] describes the node for people and machines;
//! [`cargo_test`] turns a run into libtest trials.

pub mod cargo_test;
pub mod config;
pub mod decision;
pub mod exit;
pub mod inventory;
pub mod session;
