//! Snapshots: everything the node layers and the compat check read, in one
//! `.tar.zst` that `--sysroot` accepts, so a failing node can be diagnosed
//! elsewhere. Serials and the host name can be redacted consistently.
//!
//! An archive given to `--sysroot` may come from anywhere, so unpacking it
//! trusts nothing: entries land inside a fresh temporary directory or not at
//! all (no absolute names, no `..`, nothing written through a symbolic link
//! the archive made), device nodes are refused, and the unpacked size and
//! entry count are capped. The directory is removed when the command that
//! opened it ends.
//!
//! One job per module:
//! - [`capture`]: what a capture stores, read under a deadline, written as
//!   a tar.zst stream into the destination ([`write`]);
//! - [`layout`]: where each recorded path goes in the archive (beneath the
//!   targets of the links it stores);
//! - [`redact`]: serials, host and user names, addresses replaced by
//!   stand-ins;
//! - [`open`]: a `--sysroot` argument opened, an archive unpacked into a
//!   temporary directory that lives as long as the command ([`open()`]);
//! - [`unpack`]: the hostile-safe tar reader, within [`unpack::Limits`];
//! - [`safe_dir`]: creating entries under one directory without ever
//!   writing through a link.

mod capture;
mod layout;
mod open;
mod redact;
mod safe_dir;
mod unpack;

pub use capture::{Summary, write};
pub use open::{NotOpened, Opened, Unpacked, extract, is_archive, open};

/// Largest file a snapshot copies, and so the largest entry an unpacked
/// archive may hold.
const MAX_FILE: u64 = 16 << 20;
