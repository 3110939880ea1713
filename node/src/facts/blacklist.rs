//! Whether amdgpu is kept from loading: kernel command line and modprobe.d.

use crate::{ReadError, Sysroot};

const MODPROBE_DIRS: [&str; 4] = [
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/lib/modprobe.d",
    "/usr/lib/modprobe.d",
];

/// One place that keeps amdgpu from loading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlacklistEntry {
    /// Where: `kernel command line` or a file and line.
    pub source: String,
    /// The offending text.
    pub text: String,
    /// Whether it also refuses an explicit `modprobe amdgpu` (a plain
    /// `blacklist` line only stops automatic loading).
    pub hard: bool,
}

/// What keeps amdgpu from loading, and the places that could not be read
/// (so a clean result is not claimed over a file nobody looked at).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blacklist {
    /// Settings found.
    pub entries: Vec<BlacklistEntry>,
    /// The command line or modprobe.d files that could not be read.
    pub unread: Vec<ReadError>,
}

/// Finds every setting that keeps amdgpu from loading.
pub fn scan(root: &Sysroot, cmdline: &Result<Option<String>, ReadError>) -> Blacklist {
    let mut found = Blacklist::default();
    match cmdline {
        Ok(Some(cmdline)) => found.entries.extend(from_cmdline(cmdline)),
        Ok(None) => {}
        Err(e) => found.unread.push(e.clone()),
    }
    for dir in MODPROBE_DIRS {
        let files = match root.list_dir(dir) {
            Ok(files) => files,
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                found.unread.push(e);
                continue;
            }
        };
        for file in files.into_iter().filter(|f| f.ends_with(".conf")) {
            let host = format!("{dir}/{file}");
            match root.read_text(&host) {
                Ok(text) => found.entries.extend(from_modprobe_conf(&text, &host)),
                Err(e) if e.is_not_found() => {}
                Err(e) => found.unread.push(e),
            }
        }
    }
    found
}

/// Settings on the kernel command line that disable amdgpu.
pub fn from_cmdline(cmdline: &str) -> Vec<BlacklistEntry> {
    let entry = |text: &str, hard| BlacklistEntry {
        source: "kernel command line".into(),
        text: text.to_string(),
        hard,
    };
    let mut found = Vec::new();
    for token in cmdline.split_whitespace() {
        let (key, value) = token.split_once('=').unwrap_or((token, ""));
        let lists_amdgpu = || value.split(',').any(|m| m == "amdgpu");
        match key {
            "modprobe.blacklist" | "module_blacklist" | "rd.driver.blacklist" if lists_amdgpu() => {
                found.push(entry(token, true));
            }
            "nomodeset" => found.push(entry(token, true)),
            "amdgpu.modeset" if value == "0" => found.push(entry(token, true)),
            _ => {}
        }
    }
    found
}

/// `blacklist amdgpu` and `install amdgpu /bin/false` lines of a modprobe.d file.
pub fn from_modprobe_conf(text: &str, host: &str) -> Vec<BlacklistEntry> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        let hard = match words.as_slice() {
            ["blacklist", "amdgpu"] => false,
            ["install", "amdgpu", cmd, ..] if cmd.ends_with("/false") || cmd.ends_with("/true") => {
                true
            }
            _ => continue,
        };
        found.push(BlacklistEntry {
            source: format!("{host} line {}", i + 1),
            text: line.to_string(),
            hard,
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn finds_command_line_and_modprobe_settings() {
        let c = from_cmdline("BOOT_IMAGE=/vmlinuz ro modprobe.blacklist=nouveau,amdgpu quiet");
        assert_eq!(c.len(), 1);
        assert!(from_cmdline("ro quiet modprobe.blacklist=nouveau").is_empty());
        assert_eq!(from_cmdline("nomodeset").len(), 1);
        assert_eq!(from_cmdline("amdgpu.modeset=0").len(), 1);
        assert!(from_cmdline("amdgpu.modeset=1").is_empty());
        let m = from_modprobe_conf(
            "# no\nblacklist amdgpu\ninstall amdgpu /bin/false\nblacklist radeon\n",
            "/etc/modprobe.d/x.conf",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].source, "/etc/modprobe.d/x.conf line 2");
        assert!(!m[0].hard);
        assert!(m[1].hard);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = from_cmdline(&s);
            let _ = from_modprobe_conf(&s, "f");
        }
    }
}
