//! Redaction: serials, the host name, user names and addresses replaced by
//! stand-ins that are the same for the same value, so a redacted snapshot
//! still says which files name one GPU, host or user.

use crate::facts::NodeFacts;

/// Replacements for serials, the host name, user names and addresses.
pub(super) struct Redactor {
    /// Serials, replaced wherever they occur.
    pairs: Vec<(String, String)>,
    /// Host and user names, replaced where they stand as a word (`ci` in
    /// `pci` is no user name).
    words: Vec<(String, String)>,
    /// Whether IP addresses are replaced.
    addresses: bool,
    /// Values replaced so far.
    pub(super) count: usize,
}

/// A user name's stand-in: the same for the same name, so that a user is
/// still recognisable across files (the capture record, `/etc/group`).
fn pseudonym(user: &str) -> String {
    format!("user-{:08x}", fnv(user) as u32)
}

/// Whether `c` continues a host or user name.
fn in_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `text` with every whole-word `from` replaced by `to`; counts them.
fn replace_word(text: &str, from: &str, to: &str, count: &mut usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(from) {
        let prev = rest[..at].chars().next_back().or(before);
        let next = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if prev.is_some_and(in_word) || next.is_some_and(in_word) {
            out.push_str(from);
        } else {
            out.push_str(to);
            *count += 1;
        }
        before = from.chars().next_back();
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// An IPv4 or IPv6 address's stand-in, from the documentation and
/// benchmarking ranges (RFC 5737, 2544, 3849), the same for the same
/// address; `None` for one that identifies no node (loopback,
/// unspecified, a netmask).
fn address_stand_in(token: &str) -> Option<String> {
    if let Ok(v4) = token.parse::<std::net::Ipv4Addr>() {
        if v4.is_loopback() || v4.is_unspecified() || v4.octets()[0] == 255 {
            return None;
        }
        let h = fnv(token) as u32;
        return Some(format!(
            "198.{}.{}.{}",
            18 + ((h >> 16) & 1),
            (h >> 8) & 0xff,
            h & 0xff
        ));
    }
    let v6 = token.parse::<std::net::Ipv6Addr>().ok()?;
    if v6.is_loopback() || v6.is_unspecified() {
        return None;
    }
    let h = fnv(&v6.to_string());
    Some(format!(
        "2001:db8::{:x}:{:x}",
        (h >> 16) & 0xffff,
        h & 0xffff
    ))
}

/// `text` with its IPv4 and IPv6 addresses replaced; counts them. A
/// candidate is a run of hex digits, dots and colons that starts and ends
/// a word; a run that is no address as a whole (`ip=A::B:MASK:host`, a
/// kernel command line) is tried piece by piece between its colons.
fn redact_addresses(text: &str, count: &mut usize) -> String {
    let b = text.as_bytes();
    let run = |c: u8| c.is_ascii_hexdigit() || c == b'.' || c == b':';
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if !run(b[i]) || (i > 0 && word(b[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && run(b[j]) {
            j += 1;
        }
        // Glued to a word (`6.8.0.45x`), unless the run ended on a
        // separator (`...:255.255.255.0:host`).
        if j < b.len()
            && (b[j].is_ascii_alphanumeric() || b[j] == b'_')
            && !matches!(b[j - 1], b':' | b'.')
        {
            i = j;
            continue;
        }
        let token = text[i..j].trim_end_matches(['.', ':']);
        let end = i + token.len();
        let replaced = address_stand_in(token).or_else(|| {
            if !token.contains(':') {
                return None;
            }
            let mut any = false;
            let pieces: Vec<String> = token
                .split(':')
                .map(|p| match address_stand_in(p).filter(|_| p.contains('.')) {
                    Some(r) => {
                        any = true;
                        *count += 1;
                        r
                    }
                    None => p.to_string(),
                })
                .collect();
            any.then(|| pieces.join(":"))
        });
        if let Some(r) = replaced {
            if !r.contains(':') || token.parse::<std::net::Ipv6Addr>().is_ok() {
                *count += 1;
            }
            out.push_str(&text[copied..i]);
            out.push_str(&r);
            copied = end;
        }
        i = j;
    }
    out.push_str(&text[copied..]);
    out
}

/// `/etc/group` with every member list's names replaced by their
/// stand-ins; the group names, which checks look up, stay.
pub(super) fn redact_groups(text: &str, count: &mut usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let fields: Vec<&str> = body.splitn(4, ':').collect();
        if fields.len() == 4 && !fields[3].trim().is_empty() {
            let members: Vec<String> = fields[3]
                .split(',')
                .map(|m| {
                    *count += 1;
                    pseudonym(m.trim())
                })
                .collect();
            out.push_str(&format!(
                "{}:{}:{}:{}{end}",
                fields[0],
                fields[1],
                fields[2],
                members.join(",")
            ));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// FNV-1a: a stable hash, so a value gets the same stand-in in every
/// snapshot.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Redactor {
    /// The replacements for `facts`' node (none unless `enabled`); `read`
    /// reads a file the capture stores (the serial numbers), under the
    /// capture's deadline.
    pub(super) fn new(
        facts: &NodeFacts,
        enabled: bool,
        read: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
    ) -> Redactor {
        let mut pairs = Vec::new();
        let mut words = Vec::new();
        if enabled {
            for g in &facts.gpus {
                if let Some(u) = g.kfd.as_ref().and_then(|k| k.unique_id).filter(|&u| u != 0) {
                    let fake = fnv(&u.to_string()) | 1;
                    pairs.push((u.to_string(), fake.to_string()));
                    pairs.push((format!("{u:016X}"), format!("{fake:016X}")));
                    pairs.push((format!("{u:016x}"), format!("{fake:016x}")));
                }
                if let Some(pci) = &g.pci {
                    let host = format!("{}/serial_number", pci.sysfs_dir());
                    if let Some(b) = read(&host) {
                        let serial = String::from_utf8_lossy(&b).trim().to_string();
                        if serial.len() >= 4 {
                            pairs.push((
                                serial.clone(),
                                format!("REDACTED-{:08x}", fnv(&serial) as u32),
                            ));
                        }
                    }
                }
            }
            if let Ok(Some(host)) = facts.sysroot.read_opt("/proc/sys/kernel/hostname") {
                // The short name too: syslog lines and `ip=` carry it.
                let short = host.split('.').next().unwrap_or(&host).to_string();
                let stand_in = format!("node-{:06x}", fnv(&short) as u32 & 0xff_ffff);
                for name in [host.clone(), short] {
                    if name.len() >= 2 {
                        words.push((name, stand_in.clone()));
                    }
                }
            }
            // The capture's user, by the name it logs under; `root` names
            // nobody in particular, and is a word of kernel command lines.
            let user = facts
                .capture()
                .and_then(|c| c.user.as_ref().map(|u| u.name.clone()))
                .or_else(|| facts.user.as_ref().map(|u| u.name.clone()));
            if let Some(user) = user.filter(|u| u.len() >= 2 && u != "root") {
                words.push((user.clone(), pseudonym(&user)));
            }
            // Longest first, so a value is not half-replaced by a shorter one.
            pairs.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
            pairs.dedup();
            words.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
            words.dedup();
        }
        Redactor {
            pairs,
            words,
            addresses: enabled,
            count: 0,
        }
    }

    /// The capture user's name as redacted (`root` as it is).
    pub(super) fn user(&mut self, name: &str) -> String {
        if self.addresses && name != "root" {
            self.count += 1;
            pseudonym(name)
        } else {
            name.to_string()
        }
    }

    /// `text` with every value replaced.
    pub(super) fn apply(&mut self, text: String) -> String {
        let mut out = text;
        for (from, to) in &self.pairs {
            let n = out.matches(from.as_str()).count();
            if n > 0 {
                self.count += n;
                out = out.replace(from.as_str(), to);
            }
        }
        for (from, to) in &self.words {
            if out.contains(from.as_str()) {
                out = replace_word(&out, from, to, &mut self.count);
            }
        }
        if self.addresses {
            out = redact_addresses(&out, &mut self.count);
        }
        out
    }
}

/// Whether a file is text that redaction may rewrite: UTF-8 with no NUL
/// before its padding. A binary file (a PCI `config`, whose offsets a
/// reader walks) may happen to be valid UTF-8, and a replaced value of
/// another length would move every register after it.
pub(super) fn is_text(bytes: &[u8]) -> bool {
    let end = bytes.len() - bytes.iter().rev().take_while(|&&b| b == 0).count();
    std::str::from_utf8(bytes).is_ok() && !bytes[..end].contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_replaces_names_as_words_and_addresses_of_both_kinds() {
        let mut n = 0;
        assert_eq!(
            replace_word(
                "Dec 1 gpu-node-07 kernel: pci gpu-node-07x ci",
                "ci",
                "U",
                &mut n
            ),
            "Dec 1 gpu-node-07 kernel: pci gpu-node-07x U"
        );
        assert_eq!(n, 1);
        let text = "ip=10.1.2.3::10.1.2.1:255.255.255.0:h:eth0:none fe80::1c2:3ff:fe4d:5e6f%eth0 [2a02:8071:1::5]:22 127.0.0.1 6.8.0.45x 0000:05:00.0 10:00:00 v6.16.6 1.2.3.\n";
        let mut n = 0;
        let out = redact_addresses(text, &mut n);
        for gone in ["10.1.2.3", "10.1.2.1", "fe80::1c2", "2a02:8071"] {
            assert!(!out.contains(gone), "{gone}: {out}");
        }
        for kept in [
            "255.255.255.0",
            "127.0.0.1",
            "6.8.0.45x",
            "0000:05:00.0",
            "10:00:00",
            "v6.16.6",
            "%eth0",
            " 1.2.3.",
        ] {
            assert!(out.contains(kept), "{kept}: {out}");
        }
        assert_eq!(n, 4, "{out}");
        assert_eq!(
            redact_addresses(text, &mut 0),
            out,
            "the same stand-ins every time"
        );
        let mut n = 0;
        let groups = redact_groups(
            "root:x:0:\nrender:x:110:alice,bob\nvideo:x:44:alice",
            &mut n,
        );
        assert_eq!(
            groups,
            format!(
                "root:x:0:\nrender:x:110:{a},{b}\nvideo:x:44:{a}",
                a = pseudonym("alice"),
                b = pseudonym("bob")
            )
        );
        assert_eq!(n, 3);
    }
}
