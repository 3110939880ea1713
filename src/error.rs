//! The error a command ends with: its message, said for the user as
//! `rocgate: <message>`, and its kind, which picks the exit code
//! ([`rocgate::exit::Exit`]).
//!
//! The crates below say the kind of what failed at their boundary by its
//! type (`atomic::NotWritten`, `saved_report::NotRead`,
//! `snapshot::NotOpened`, `config_file::ConfigError`,
//! `context::OpenError`); the `From` impls here give each its kind, so a
//! command's `?` exits with the right code. Their plumbing inside still
//! speaks `String`; a `String` that reaches a command with no kind named
//! (`.internal()`) is a usage or configuration error.
//! Context (`.context("...")`) is added here at the front end only.

use rocgate::exit::Exit;
use std::fmt;

/// What kind of failure ended a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// How rocgate was asked to run: a flag, a policy, thresholds or matrix
    /// file it cannot use.
    Usage,
    /// Reading the node (a `--sysroot` directory or archive) or a saved
    /// report, or writing a report, an archive or the command's output.
    NodeIo,
    /// A defect of rocgate's own, or an environment it cannot run in (no
    /// signal handler, no path to its own executable).
    Internal,
}

impl Kind {
    /// The exit row of this kind.
    pub fn exit(self) -> Exit {
        match self {
            Kind::Usage => Exit::Usage,
            Kind::NodeIo => Exit::NodeIo,
            Kind::Internal => Exit::Internal,
        }
    }
}

/// A command's failure: its kind and what to tell the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: Kind,
    message: String,
}

impl Error {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// A usage or configuration error.
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(Kind::Usage, message)
    }

    /// A failure to read the node or a saved report, or to write a report
    /// or the output.
    pub fn node_io(message: impl Into<String>) -> Error {
        Error::new(Kind::NodeIo, message)
    }

    /// A defect of rocgate's own.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(Kind::Internal, message)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The exit row this failure ends the command with.
    pub fn exit(&self) -> Exit {
        self.kind().exit()
    }

    /// This failure as part of `what` (`__worker --scope: ...`).
    #[must_use]
    pub fn context(self, what: impl fmt::Display) -> Error {
        Error {
            kind: self.kind,
            message: format!("{what}: {}", self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The plumbing's `String` errors are usage or configuration errors unless
/// the caller names another kind.
impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::usage(message)
    }
}

/// A report, archive or output not written: node I/O.
impl From<rocgate_harness::atomic::NotWritten> for Error {
    fn from(e: rocgate_harness::atomic::NotWritten) -> Error {
        Error::node_io(e.0)
    }
}

/// A saved report not read: node I/O.
impl From<rocgate_harness::saved_report::NotRead> for Error {
    fn from(e: rocgate_harness::saved_report::NotRead) -> Error {
        Error::node_io(e.0)
    }
}

/// A snapshot archive not opened: node I/O.
impl From<rocgate_node::snapshot::NotOpened> for Error {
    fn from(e: rocgate_node::snapshot::NotOpened) -> Error {
        Error::node_io(e.0)
    }
}

/// A thresholds or matrix file that cannot be used: usage.
impl From<rocgate_suites::config_file::ConfigError> for Error {
    fn from(e: rocgate_suites::config_file::ConfigError) -> Error {
        Error::usage(e.0)
    }
}

/// A node that could not be opened: usage whatever the kind, as the
/// `--sysroot` given cannot be used (no directory, or a snapshot whose
/// capture record is damaged: take a new one), or a file named cannot.
impl From<rocgate_suites::context::OpenError> for Error {
    fn from(e: rocgate_suites::context::OpenError) -> Error {
        use rocgate_suites::context::OpenError;
        match e {
            OpenError::Sysroot(m) => Error::usage(m),
            OpenError::Capture(m) => Error::usage(m),
            OpenError::Config(c) => c.into(),
        }
    }
}

/// A command's result (an `Error` unless another is named).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Kinds and context for the `String` errors of the layers below.
pub trait ResultExt<T> {
    /// The error as a defect of rocgate's own.
    fn internal(self) -> Result<T>;
    /// The error as part of `what`, its kind kept.
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T, String> {
    fn internal(self) -> Result<T> {
        self.map_err(Error::internal)
    }

    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::usage(e).context(what))
    }
}

impl<T> ResultExt<T> for Result<T> {
    fn internal(self) -> Result<T> {
        self.map_err(|e| Error::new(Kind::Internal, e.message))
    }

    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.context(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_picks_the_exit_code() {
        assert_eq!(Error::usage("x").exit().code(), 2);
        assert_eq!(Error::node_io("x").exit().code(), 3);
        assert_eq!(Error::internal("x").exit().code(), 70);
        assert_eq!(Error::from("x".to_string()).kind(), Kind::Usage);
    }

    #[test]
    fn each_crate_boundary_error_has_its_kind() {
        use rocgate_harness::{atomic::NotWritten, saved_report::NotRead};
        use rocgate_node::snapshot::NotOpened;
        use rocgate_suites::{config_file::ConfigError, context::OpenError};
        let m = || "m".to_string();
        for (e, kind) in [
            (Error::from(NotWritten(m())), Kind::NodeIo),
            (Error::from(NotRead(m())), Kind::NodeIo),
            (Error::from(NotOpened(m())), Kind::NodeIo),
            (Error::from(ConfigError(m())), Kind::Usage),
            (Error::from(OpenError::Sysroot(m())), Kind::Usage),
            (Error::from(OpenError::Capture(m())), Kind::Usage),
            (
                Error::from(OpenError::Config(ConfigError(m()))),
                Kind::Usage,
            ),
        ] {
            assert_eq!((e.kind(), e.to_string()), (kind, m()));
        }
    }

    #[test]
    fn context_prefixes_the_message_and_keeps_the_kind() {
        let e: Result<()> = Err(Error::node_io("no such file"));
        let e = e.context("--json out.json").unwrap_err();
        assert_eq!(e.to_string(), "--json out.json: no such file");
        assert_eq!(e.kind(), Kind::NodeIo);
        let plain: Result<(), String> = Err("bad".into());
        assert_eq!(
            plain.context("__worker --scope").unwrap_err().to_string(),
            "__worker --scope: bad"
        );
    }
}
