//! The error a command ends with: its message, said for the user as
//! `rocgate: <message>`, and its kind, which picks the exit code
//! ([`rocgate::exit::Exit`]).
//!
//! The layers below report errors as `String`s; a command turns each into
//! this type where it calls them, naming the kind it knows the failure to
//! be (`.node_io()`, `.internal()`), and adds context (`.context("...")`)
//! here at the front end only. A `String` given no kind is a usage or
//! configuration error: that is what the plumbing's errors are unless a
//! command says otherwise.

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

/// A command's result (an `Error` unless another is named).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Kinds and context for the `String` errors of the layers below.
pub trait ResultExt<T> {
    /// The error as a failure to read the node or a saved report, or to
    /// write a report or the output.
    fn node_io(self) -> Result<T>;
    /// The error as a defect of rocgate's own.
    fn internal(self) -> Result<T>;
    /// The error as part of `what`, its kind kept.
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T, String> {
    fn node_io(self) -> Result<T> {
        self.map_err(Error::node_io)
    }

    fn internal(self) -> Result<T> {
        self.map_err(Error::internal)
    }

    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::usage(e).context(what))
    }
}

impl<T> ResultExt<T> for Result<T> {
    fn node_io(self) -> Result<T> {
        self.map_err(|e| Error::new(Kind::NodeIo, e.message))
    }

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
    fn context_prefixes_the_message_and_keeps_the_kind() {
        let e: Result<(), String> = Err("no such file".to_string());
        let e = e.node_io().context("--json out.json").unwrap_err();
        assert_eq!(e.to_string(), "--json out.json: no such file");
        assert_eq!(e.kind(), Kind::NodeIo);
        let plain: Result<(), String> = Err("bad".into());
        assert_eq!(
            plain.context("__worker --scope").unwrap_err().to_string(),
            "__worker --scope: bad"
        );
    }
}
