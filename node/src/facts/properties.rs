//! KFD `properties` files: one `key value` pair per line, decimal values.

use crate::ReadError;
use std::path::Path;

/// The parsed lines of a properties file, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Properties {
    entries: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    key: String,
    value: String,
    line: usize,
}

impl Properties {
    /// Parses `text`, read from `path` (named in errors). Blank lines are
    /// allowed; a key without a value (a truncated file) is an error.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ReadError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let (key, value) = match line.split_once(char::is_whitespace) {
                Some((k, v)) if !v.trim().is_empty() => (k, v.trim()),
                _ => {
                    return Err(ReadError::malformed(
                        path,
                        format!(
                            "line {}: '{}' has no value (truncated file?)",
                            i + 1,
                            short(line)
                        ),
                    ));
                }
            };
            if !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(ReadError::malformed(
                    path,
                    format!("line {}: '{}' is not a property name", i + 1, short(key)),
                ));
            }
            entries.push(Entry {
                key: key.to_string(),
                value: value.to_string(),
                line: i + 1,
            });
        }
        Ok(Properties { entries })
    }

    /// The raw text value of `key`.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.value.as_str())
    }

    /// The value of `key` as an unsigned decimal number; `Ok(None)` when the
    /// key is absent (old kernels lack many keys), an error naming the file
    /// and line when it is present but not a number.
    pub fn number(&self, key: &str, path: &Path) -> Result<Option<u64>, ReadError> {
        match self.entries.iter().find(|e| e.key == key) {
            None => Ok(None),
            Some(e) => e.value.parse::<u64>().map(Some).map_err(|_| {
                ReadError::malformed(
                    path,
                    format!(
                        "line {}: {} is '{}', not an unsigned decimal number",
                        e.line,
                        key,
                        short(&e.value)
                    ),
                )
            }),
        }
    }

    /// The value of `key` as [`Properties::number`] reads it, bounded by
    /// the 32-bit unsigned type the kernel prints it from (kfd_topology.c
    /// `sysfs_show_32bit_prop`: `"%s %u\n"`): a larger value is not what
    /// the kernel wrote, so it is an error naming the file and line.
    pub fn number32(&self, key: &str, path: &Path) -> Result<Option<u64>, ReadError> {
        let value = self.number(key, path)?;
        match value {
            Some(v) if v > u64::from(u32::MAX) => {
                let line = self
                    .entries
                    .iter()
                    .find(|e| e.key == key)
                    .map_or(0, |e| e.line);
                Err(ReadError::malformed(
                    path,
                    format!(
                        "line {line}: {key} is {v}, past the 32-bit unsigned value the kernel prints there"
                    ),
                ))
            }
            v => Ok(v),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file held no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn short(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_reports_truncation_and_garbage() {
        let p = Path::new("/sys/class/kfd/kfd/topology/nodes/2/properties");
        let props =
            Properties::parse("simd_count 416\nhive_id 12609507387757274807\n\n", p).unwrap();
        assert_eq!(props.number("simd_count", p).unwrap(), Some(416));
        assert_eq!(
            props.number("hive_id", p).unwrap(),
            Some(12_609_507_387_757_274_807)
        );
        assert_eq!(props.number("domain", p).unwrap(), None);

        let e = Properties::parse("simd_count 416\nsimd_per", p).unwrap_err();
        assert!(e.to_string().contains("nodes/2/properties"), "{e}");
        assert!(e.to_string().contains("line 2"), "{e}");

        let big = Properties::parse("simd_count 4294967296\ndomain 4294967295\n", p).unwrap();
        let e = big.number32("simd_count", p).unwrap_err();
        assert!(
            e.to_string().contains("line 1: simd_count is 4294967296"),
            "{e}"
        );
        assert_eq!(
            big.number32("domain", p).unwrap(),
            Some(u64::from(u32::MAX))
        );
        assert_eq!(big.number32("none", p).unwrap(), None);

        let bad = Properties::parse("simd_count -4\n", p).unwrap();
        let e = bad.number("simd_count", p).unwrap_err();
        assert!(e.to_string().contains("not an unsigned decimal"), "{e}");
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,400}") {
            let p = Path::new("props");
            if let Ok(props) = Properties::parse(&s, p) {
                let _ = props.number("simd_count", p);
                let _ = props.number32("simd_count", p);
            }
        }

        #[test]
        fn well_formed_files_round_trip(pairs in proptest::collection::vec(("[a-z_]{1,20}", any::<u64>()), 0..30)) {
            let text: String = pairs.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
            let p = Path::new("props");
            let props = Properties::parse(&text, p).unwrap();
            prop_assert_eq!(props.len(), pairs.len());
            for (k, _) in &pairs {
                let first = pairs.iter().find(|(k2, _)| k2 == k).map(|(_, v)| *v);
                prop_assert_eq!(props.number(k, p).unwrap(), first);
            }
        }
    }
}
