//! `rocgate-capture.toml`: what a sysroot cannot hold as files — who ran the
//! capture and whether that user could open each device node.

use crate::Sysroot;
use serde::{Deserialize, Serialize};

/// Host path of the capture record inside a sysroot.
pub const CAPTURE_FILE: &str = "/rocgate-capture.toml";

/// The capture record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    /// The user that ran the capture.
    pub user: Option<CapturedUser>,
    /// Device nodes as they were on the captured node.
    #[serde(default, rename = "device")]
    pub devices: Vec<CapturedDevice>,
}

/// A user and their groups.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedUser {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Every group id the user's processes carry (primary included).
    #[serde(default)]
    pub groups: Vec<u32>,
}

/// One device node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedDevice {
    /// Host path (`/dev/kfd`).
    pub path: String,
    /// Owning group id.
    pub gid: Option<u32>,
    /// Permission bits in octal (`0660`).
    pub mode: Option<String>,
    /// Result of `open(O_RDWR)` by the user: `ok` or an errno name (`EACCES`).
    pub open: String,
}

impl Capture {
    /// The record for a device path.
    pub fn device(&self, path: &str) -> Option<&CapturedDevice> {
        self.devices.iter().find(|d| d.path == path)
    }

    /// Parses a capture record; errors name the file and line.
    pub fn parse(text: &str, shown_path: &str) -> Result<Capture, String> {
        toml::from_str(text).map_err(|e| format!("failed to parse {shown_path}: {e}"))
    }
}

/// Reads the sysroot's capture record; `Ok(None)` on a live host or when the
/// sysroot has none.
pub fn read(root: &Sysroot) -> Result<Option<Capture>, String> {
    if root.is_live() {
        return Ok(None);
    }
    match root.read_opt(CAPTURE_FILE) {
        Ok(None) => Ok(None),
        Ok(Some(text)) => {
            Capture::parse(&text, &root.path(CAPTURE_FILE).display().to_string()).map(Some)
        }
        // rocgate's own file, so named by where it is, not as a host path.
        Err(e) => Err(format!(
            "failed to read the capture record {}: {}",
            root.path(CAPTURE_FILE).display(),
            if e.is_timeout() {
                "it did not answer (a FIFO or a wedged file system); recapture the node with `rocgate snapshot`".to_string()
            } else {
                e.to_string()
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_names_the_line_of_errors() {
        let c = Capture::parse(
            "[user]\nname = \"ci\"\nuid = 1000\ngroups = [1000, 110]\n\n[[device]]\npath = \"/dev/kfd\"\ngid = 110\nmode = \"0660\"\nopen = \"ok\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(c.device("/dev/kfd").map(|d| d.open.as_str()), Some("ok"));
        let e = Capture::parse("[user]\nname = 3\n", "node/rocgate-capture.toml").unwrap_err();
        assert!(e.contains("node/rocgate-capture.toml"), "{e}");
        assert!(e.contains("line 2"), "{e}");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = Capture::parse(&s, "f");
        }
    }
}
