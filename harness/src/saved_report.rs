//! Run reports read back (`rocgate fleet report`, `rocgate compare`): from
//! a regular file of bounded size, of the one schema this rocgate writes.
//! A report is input like any other: a FIFO or a device, a file larger
//! than any report, or a document of another schema is refused with a
//! message naming the file, never read whole or guessed at.

use crate::document::Document;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// A saved report that was not read: not a readable regular file of a
/// report's size, not JSON, or not a run report of this schema. The
/// message names the file and what to give instead; its own type, so a
/// caller knows the kind without reading the text (rocgate exits 3 on it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotRead(pub String);

impl From<String> for NotRead {
    fn from(message: String) -> NotRead {
        NotRead(message)
    }
}

/// The largest report read: a full extended run of a 64-partition node
/// writes a few MiB, so 64 MiB is far beyond any real one.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The schema version reports are read in (`harness::json` writes it).
pub const SCHEMA_VERSION: u64 = crate::json::SCHEMA_VERSION as u64;

/// What kind of file `t` is, for a message.
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads the JSON report at `path`: a regular file of at most
/// [`MAX_REPORT_BYTES`], parsed, its schema not yet checked
/// ([`check_schema`]).
pub fn read(path: &Path) -> Result<Value, NotRead> {
    let bytes = read_bytes(path)?;
    json_of(&bytes, &path.display().to_string()).map_err(NotRead)
}

/// `bytes`, named `what` in messages, as JSON.
pub fn json_of(bytes: &[u8], what: &str) -> Result<Value, String> {
    serde_json::from_slice(bytes)
        .map_err(|e| format!("{what} is not JSON ({e}): give the file `rocgate run --json` wrote"))
}

/// The bytes of the report at `path`: a regular file of at most
/// [`MAX_REPORT_BYTES`], not yet parsed (a reader that streams many
/// reports parses each into only what it keeps).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, NotRead> {
    let mut bytes = Vec::new();
    read_file(path, &mut bytes).map_err(NotRead)?;
    Ok(bytes)
}

/// [`read_bytes`] into `bytes` (cleared first): a reader of many reports
/// keeps one buffer per thread rather than allocating (and faulting in) a
/// fresh one for each.
pub fn read_bytes_into(path: &Path, bytes: &mut Vec<u8>) -> Result<(), NotRead> {
    bytes.clear();
    read_file(path, bytes).map_err(NotRead)
}

fn read_file(path: &Path, bytes: &mut Vec<u8>) -> Result<(), String> {
    let shown = path.display();
    let file = File::options()
        .read(true)
        // No wait for a FIFO's writer, and never a controlling terminal:
        // the type is checked before anything is read.
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("failed to open {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("failed to read {shown}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{shown} is {}, not a report file: give the file `rocgate run --json` wrote",
            kind_of(meta.file_type())
        ));
    }
    let too_big = |size: String| {
        format!(
            "{shown} is {size}, more than the {} MiB a run report may be: it is not one `rocgate run --json` wrote",
            MAX_REPORT_BYTES >> 20
        )
    };
    if meta.len() > MAX_REPORT_BYTES {
        return Err(too_big(format!("{} bytes", meta.len())));
    }
    // The file may grow while it is read: the bound holds whatever its size
    // said.
    bytes.reserve(usize::try_from(meta.len()).unwrap_or(0).saturating_add(1));
    file.take(MAX_REPORT_BYTES + 1)
        .read_to_end(bytes)
        .map_err(|e| format!("failed to read {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(too_big("still growing".to_string()));
    }
    Ok(())
}

/// The report at `path` as a [`Document`] whose results and decision a
/// reader takes as `R` and `D`: [`read`], then [`parse`].
pub fn open<R: DeserializeOwned, D: DeserializeOwned>(
    path: &Path,
) -> Result<Document<R, D>, NotRead> {
    parse(read(path)?, &path.display().to_string())
}

/// `doc`, named `what` in messages, as a [`Document`] of the schema this
/// rocgate writes ([`check_schema`]), its results and decision read as `R`
/// and `D`.
pub fn parse<R: DeserializeOwned, D: DeserializeOwned>(
    doc: Value,
    what: &str,
) -> Result<Document<R, D>, NotRead> {
    check_schema(&doc, what)?;
    serde_json::from_value(doc).map_err(|e| {
        NotRead(format!(
            "{what} is not a rocgate run report (`rocgate run --json` writes one): {e}"
        ))
    })
}

/// The report in `bytes`, named `what` in messages, as a [`Document`] of
/// `R` and `D`, deserialised straight from the bytes: no JSON tree is
/// built for a report that reads (a fleet of 100,000 reports pays for
/// what it keeps, not for every value in them). Only when it does not read
/// is the tree built, to say why as [`parse`] would.
pub fn parse_bytes<'a, R: Deserialize<'a>, D: Deserialize<'a>>(
    bytes: &'a [u8],
    what: &str,
) -> Result<Document<R, D>, NotRead> {
    // Checked as UTF-8 once, the text is parsed without checking each of
    // its strings again (serde_json's `from_str`): a fleet's reports hold
    // tens of thousands of strings each.
    let typed = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str::<Document<R, D>>(text),
        Err(_) => serde_json::from_slice::<Document<R, D>>(bytes),
    };
    let typed = match typed {
        Ok(doc) if u64::from(doc.schema_version) == SCHEMA_VERSION => return Ok(doc),
        other => other.err(),
    };
    let doc = json_of(bytes, what)?;
    check_schema(&doc, what)?;
    Err(NotRead(match typed {
        Some(e) => {
            format!("{what} is not a rocgate run report (`rocgate run --json` writes one): {e}")
        }
        None => format!("{what} is not a rocgate run report of schema_version {SCHEMA_VERSION}"),
    }))
}

/// Checks that `doc` is a results document of schema
/// [`SCHEMA_VERSION`] (the integer, as rocgate writes it), naming `what`
/// and saying what its schema_version is when it is not.
pub fn check_schema(doc: &Value, what: &str) -> Result<(), String> {
    let expected = format!(
        "this rocgate reads schema_version {SCHEMA_VERSION}, as `rocgate run --json FILE` writes it"
    );
    let found = match &doc["schema_version"] {
        Value::Number(n) if n.as_u64() == Some(SCHEMA_VERSION) => {
            return if doc["results"].is_array() {
                Ok(())
            } else {
                Err(format!(
                    "{what} has schema_version {SCHEMA_VERSION} but no results list: it is not a rocgate run report ({expected})"
                ))
            };
        }
        Value::Null if !doc.is_object() => {
            return Err(format!(
                "{what} is not a rocgate run report (a JSON object): {expected}"
            ));
        }
        Value::Null => {
            return Err(format!(
                "{what} is not a rocgate run report: it has no schema_version; {expected}"
            ));
        }
        Value::Number(n) if n.is_u64() || n.is_i64() => format!("{n}"),
        Value::Number(n) => format!("{n}, a number that is not the integer {SCHEMA_VERSION}"),
        Value::String(s) => format!("the string {s:?}, not the integer {SCHEMA_VERSION}"),
        other => format!("{other}"),
    };
    Err(format!(
        "{what}: schema_version {found} is not supported: {expected}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_json(path: &Path) -> Result<Value, String> {
        read(path).map_err(|e| e.0)
    }

    #[test]
    fn only_schema_1_with_results_is_read_and_others_say_what_they_are() {
        let ok = json!({"schema_version": 1, "results": []});
        assert_eq!(check_schema(&ok, "a.json"), Ok(()));
        for (doc, says) in [
            (
                json!({"schema_version": 99, "results": []}),
                "schema_version 99 is not supported",
            ),
            (
                json!({"schema_version": "1", "results": []}),
                "the string \"1\", not the integer 1",
            ),
            (
                json!({"schema_version": "1.0", "results": []}),
                "the string \"1.0\"",
            ),
            (
                json!({"schema_version": 1.0, "results": []}),
                "1.0, a number that is not the integer 1",
            ),
            (
                json!({"schema_version": -1, "results": []}),
                "schema_version -1 is not",
            ),
            (
                json!({"schema_version": [1], "results": []}),
                "schema_version [1] is not",
            ),
            (json!({"results": []}), "has no schema_version"),
            (json!([1]), "not a rocgate run report (a JSON object)"),
            (json!({"schema_version": 1}), "no results list"),
        ] {
            let err = check_schema(&doc, "a.json").unwrap_err();
            assert!(err.starts_with("a.json"), "{err}");
            assert!(err.contains(says), "{doc}: {err}");
            assert!(err.contains("reads schema_version 1"), "{err}");
        }
    }

    #[test]
    fn special_and_oversized_files_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_json(Path::new("/dev/zero")).unwrap_err();
        assert!(err.contains("/dev/zero is a character device"), "{err}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read_json(&fifo).unwrap_err().contains("is a FIFO"));
        assert!(
            read_json(dir.path())
                .unwrap_err()
                .contains("is a directory")
        );
        let big = dir.path().join("big.json");
        File::create(&big)
            .unwrap()
            .set_len(MAX_REPORT_BYTES + 1)
            .unwrap();
        let err = read_json(&big).unwrap_err();
        assert!(err.contains("more than the 64 MiB"), "{err}");
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, b"{\xff").unwrap();
        assert!(
            read_json(&bad)
                .unwrap_err()
                .contains("bad.json is not JSON")
        );
        std::fs::write(&bad, b"{\"schema_version\": 1}").unwrap();
        assert_eq!(read_json(&bad).unwrap()["schema_version"], 1);
    }
}
