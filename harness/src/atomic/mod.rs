//! Writes report files without destroying what the path names.
//!
//! - A regular file, or a path where nothing exists yet, is replaced
//!   atomically: the report goes to a temporary file in the same directory
//!   that is renamed into place, so a reader never sees a half-written one.
//!   ([`append`], for GitHub's job summary, appends to it in place instead.)
//! - A symlink is never replaced: it is followed to its target, which is then
//!   handled by these rules (a regular target is replaced atomically in the
//!   target's directory; a dangling link's target is created there).
//! - A symlink another user planted is not followed. rocgate resolves links
//!   itself and renames over what they lead to, so the kernel's
//!   `fs.protected_symlinks` cannot guard the path; rocgate applies that
//!   rule to every link on the way instead: a link in a sticky
//!   world-writable directory (`/tmp`) is followed only when it belongs to
//!   rocgate's effective user or to the directory's owner. Otherwise
//!   `--json /tmp/x.json`, planted as a link to `/etc/shadow`, would make
//!   root replace that file.
//! - What was decided on is what is written: the directory and the file are
//!   opened without following links (`O_NOFOLLOW`) and checked (`fstat`) to
//!   be the ones the path was resolved to, so a link swapped in meanwhile is
//!   refused.
//! - A FIFO or a character device (`/dev/null`, `/dev/full`, a terminal) is
//!   written through: opened for writing without being created or truncated,
//!   so `--junit /dev/null` discards the report and leaves `/dev/null` alone.
//!   The open is non-blocking: a FIFO nobody reads fails at once (ENXIO)
//!   instead of hanging the run, and a reader that stops taking bytes for
//!   [`STALL_LIMIT`] ends the write with an error.
//! - What this process's own stdout or stderr already is (`/dev/stdout`
//!   with stdout redirected to a log, a pipe, a socket) is written through
//!   that stream: replacing the log would lose everything printed after the
//!   report, and a socket cannot be opened by path.
//! - A directory, a block device or a socket is refused: writing a report
//!   over a disk is never what was meant.
//!
//! Every error names the path and what to try next.

mod resolve;
mod sink;
#[cfg(test)]
mod tests;

pub use resolve::destination;
use resolve::{Destination, Stream, decide};
use sink::{TempFile, append_to, open_through, push_through, write_stream};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A report or file that was not written (or not wholly): the message
/// names the path and what to try next. Its own type, so a caller knows
/// the kind without reading the text (rocgate exits 3 on it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotWritten(pub String);

impl From<String> for NotWritten {
    fn from(message: String) -> NotWritten {
        NotWritten(message)
    }
}

/// How long a reader (of a FIFO, a terminal) may take no bytes before the
/// write gives up on it.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

/// Mode of a new report: CI reads reports as another user.
const NEW_FILE_MODE: u32 = 0o644;

/// Writes `bytes` to `path`: atomically for a regular file or a new path,
/// through for a FIFO, a character device or this process's own stdout or
/// stderr, following symlinks (see the module documentation).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), NotWritten> {
    write_within(path, bytes, STALL_LIMIT)
}

/// Appends `bytes` to `path` (GitHub's job summary, which every step of a
/// job adds to): to the end of a regular file in place, to a new file where
/// nothing exists yet, through a FIFO or a character device; links are
/// followed by the same rules as [`write`]'s.
pub fn append(path: &Path, bytes: &[u8]) -> Result<(), NotWritten> {
    Ok(match decide(path)? {
        Destination::Stream(stream) => write_stream(stream, path, bytes),
        Destination::File(end) => append_to(&end, bytes, path),
        Destination::New(end) => append_to(&end, bytes, path),
        Destination::Through(through) => {
            push_through(&open_through(path, &through)?, path, bytes, STALL_LIMIT)
        }
    }?)
}

/// [`write`], giving up on a FIFO or device reader that takes no bytes for
/// `stall_limit` (short in tests).
fn write_within(path: &Path, bytes: &[u8], stall_limit: Duration) -> Result<(), NotWritten> {
    let mut staged = Staged::create_within(path, stall_limit)?;
    staged.write_bytes(bytes)?;
    staged.commit()
}

/// A destination written in pieces, by [`write`]'s rules: a regular file
/// or a new path gets a temporary file beside it that [`Staged::commit`]
/// renames into place (dropped uncommitted, it is removed and the path left
/// as it was); a FIFO or a character device is opened (without blocking: a
/// FIFO nobody reads fails here, at once) and written through as the pieces
/// come, so a reader of an abandoned stream sees it end short; this
/// process's own stdout or stderr is written to. For a stream too large to
/// build in memory first, or one that should reach a pipe's reader as it is
/// made (the snapshot's tar.zst).
pub struct Staged {
    path: PathBuf,
    sink: Sink,
}

/// Where a [`Staged`] destination's bytes go.
enum Sink {
    Stream(Stream),
    // Boxed: a temporary file carries its resolved path and metadata.
    Temp(Box<TempFile>),
    Through { file: File, stall_limit: Duration },
}

impl Staged {
    /// Starts writing `path`; nothing is replaced before [`Staged::commit`].
    pub fn create(path: &Path) -> Result<Staged, NotWritten> {
        Staged::create_within(path, STALL_LIMIT)
    }

    fn create_within(path: &Path, stall_limit: Duration) -> Result<Staged, NotWritten> {
        let sink = match decide(path)? {
            Destination::Stream(stream) => Sink::Stream(stream),
            Destination::File(end) => {
                let mode = end
                    .meta
                    .as_ref()
                    .map_or(NEW_FILE_MODE, |m| m.mode() & 0o7777);
                Sink::Temp(Box::new(TempFile::create(&end, mode, path)?))
            }
            Destination::New(end) => {
                Sink::Temp(Box::new(TempFile::create(&end, NEW_FILE_MODE, path)?))
            }
            Destination::Through(through) => Sink::Through {
                file: open_through(path, &through)?,
                stall_limit,
            },
        };
        Ok(Staged {
            path: path.to_path_buf(),
            sink,
        })
    }

    /// Writes the next piece; errors name the path and what to do.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), NotWritten> {
        Ok(match &mut self.sink {
            Sink::Stream(stream) => write_stream(*stream, &self.path, bytes),
            Sink::Temp(temp) => temp.write(bytes),
            Sink::Through { file, stall_limit } => {
                push_through(file, &self.path, bytes, *stall_limit)
            }
        }?)
    }

    /// Ends the write: the temporary file is synced and renamed into
    /// place (after checking the path still names what it did).
    pub fn commit(self) -> Result<(), NotWritten> {
        match self.sink {
            Sink::Temp(temp) => Ok(temp.commit(&self.path)?),
            Sink::Stream(_) | Sink::Through { .. } => Ok(()),
        }
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_bytes(buf)
            .map(|()| buf.len())
            .map_err(std::io::Error::other)
    }

    /// Nothing to do: every piece is written when it is given, and the
    /// temporary file is synced by [`Staged::commit`].
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
