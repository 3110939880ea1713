//! Captured output made safe for reports: no ANSI escapes, no characters XML
//! cannot carry, and a bounded size that keeps both ends.

/// Default bound for one check's captured output in reports.
pub const DEFAULT_LIMIT: usize = 16 * 1024;

/// Strips ANSI escape sequences and XML-invalid control characters, then
/// bounds the text to `limit` bytes, keeping its head and tail.
pub fn clean(text: &str, limit: usize) -> String {
    bound(&xml_safe(text), limit)
}

/// Strips ANSI escape sequences, control characters other than tab, newline
/// and carriage return, and U+FFFE/U+FFFF: what is left is text an XML 1.0
/// document can carry (Rust strings hold no surrogates). Unbounded, so names
/// and properties stay whole.
pub fn xml_safe(text: &str) -> String {
    let stripped = if text.contains('\u{1b}') {
        // The stripper also drops tabs; escape sequences never contain one.
        text.split('\t')
            .map(strip_ansi_escapes::strip_str)
            .collect::<Vec<_>>()
            .join("\t")
    } else {
        text.to_string()
    };
    stripped
        .chars()
        .filter(|&c| c == '\t' || c == '\n' || c == '\r' || !(c.is_control() || is_xml_invalid(c)))
        .collect()
}

fn is_xml_invalid(c: char) -> bool {
    matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// Keeps at most `limit` bytes of `text`: three quarters from the start and
/// the rest from the end, with a marker saying how much was left out.
pub fn bound(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let head_len = floor_char_boundary(text, limit * 3 / 4);
    let tail_len = limit - head_len;
    let tail_start = ceil_char_boundary(text, text.len() - tail_len).max(head_len);
    let omitted = tail_start - head_len;
    format!(
        "{}\n[... {omitted} bytes omitted ...]\n{}",
        &text[..head_len],
        &text[tail_start..]
    )
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strips_ansi_and_control_characters() {
        let s = "\u{1b}[31mred\u{1b}[0m ok\u{7}\u{0}\tkept\n";
        assert_eq!(clean(s, 100), "red ok\tkept\n");
    }

    #[test]
    fn keeps_head_and_tail() {
        let s: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let b = clean(&s, 200);
        assert!(b.starts_with("line 0\n"));
        assert!(b.ends_with("line 999\n"));
        assert!(b.contains("bytes omitted"));
        assert!(b.len() < 260);
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_bounded(s in ".{0,3000}", limit in 16usize..512) {
            let out = clean(&s, limit);
            prop_assert!(out.len() <= limit + 64);
            prop_assert!(!out.contains('\x1b'), "escape left in output");
        }
    }
}
