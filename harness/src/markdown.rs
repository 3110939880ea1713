//! Text from a node (host names, layer and check names, finding codes,
//! scopes, PCI addresses, messages, versions) placed in markdown that a
//! browser renders: fleet reports, `compare --format markdown`, GitHub job
//! summaries. A node's strings are data, never markup: they must not add
//! table columns or break rows, and must not become HTML (`<img>`,
//! `<script>`, `</details>`), links, images or emphasis.
//!
//! GitHub renders GitHub Flavored Markdown (the GFM spec, 0.29-gfm): every
//! ASCII punctuation character may be backslash-escaped (section 6.1);
//! entity references such as `&lt;` are decoded as text (6.2), so `<`,
//! `>` and `&` written as entities can never open a tag; a table row is
//! split at every pipe not escaped (4.10); extended autolinks start at
//! `www.`, `http://` and `https://` (6.9).

/// `text` as the content of one markdown table cell, or of any inline
/// markdown: terminal escape sequences dropped and line breaks as spaces
/// ([`crate::output::one_line`]), pipes and markdown punctuation escaped,
/// `<`, `>`, `&` and quotes as entities (a cell may sit inside an HTML
/// attribute of a `<details>` summary), and autolinks (`https://`, `www.`)
/// broken so they stay text.
pub fn cell(text: &str) -> String {
    let chars: Vec<char> = crate::output::one_line(text).chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let word = |j: Option<usize>| {
            j.and_then(|j| chars.get(j))
                .is_some_and(|c| c.is_alphanumeric())
        };
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // `_` inside a word (`fw_mec`) never emphasises (GFM 6.4):
            // left as it is, the raw text stays readable.
            '_' if word(i.checked_sub(1)) && word(Some(i + 1)) => out.push('_'),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '!' | '~' | '$' | '#' => {
                out.push('\\');
                out.push(c);
            }
            // `https://x` and `www.x` stay text: the `:` or `.` that makes
            // them links is written as an entity.
            ':' if chars.get(i + 1..i + 3) == Some(&['/', '/']) => out.push_str("&#58;"),
            '.' if i >= 3
                && chars[i - 3..i].iter().all(|c| c.eq_ignore_ascii_case(&'w'))
                && (i == 3 || !chars[i - 4].is_alphanumeric()) =>
            {
                out.push_str("&#46;")
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `text` as inline code (`` `firmware-load-failed` ``) when it is a plain
/// identifier (letters, digits, `-._:/`), else as [`cell`] text: a code
/// span shows its content raw, so nothing else may go inside one.
pub fn code(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._:/+@=,".contains(c));
    if plain {
        format!("`{text}`")
    } else {
        cell(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_escape_sequences_never_leave_the_text() {
        assert_eq!(
            cell("\u{1b}]52;c;aGk=\u{7}\"a\" 'b'\u{1b}[2J"),
            "&quot;a&quot; &#39;b&#39;"
        );
        assert_eq!(code("a`b"), "a\\`b");
        assert_eq!(code("0000:05:00.0"), "`0000:05:00.0`");
    }

    #[test]
    fn node_text_stays_in_its_cell_and_is_never_markup() {
        let row = format!("| {} | x |", cell("a|b\nc\r\n| d"));
        assert_eq!(row, "| a\\|b c  \\| d | x |");
        assert_eq!(row.matches(" | ").count(), 1, "{row}");
        assert_eq!(
            cell("<img src=https://e.x/a.png>"),
            "&lt;img src=https&#58;//e.x/a.png&gt;"
        );
        assert_eq!(
            cell("</details></table><script>"),
            "&lt;/details&gt;&lt;/table&gt;&lt;script&gt;"
        );
        assert_eq!(cell("![x](y) [l](z)"), "\\!\\[x\\](y) \\[l\\](z)");
        assert_eq!(
            cell("`code` **b** ~s~ $m$"),
            "\\`code\\` \\*\\*b\\*\\* \\~s\\~ \\$m\\$"
        );
        assert_eq!(cell("&amp; \\|"), "&amp;amp; \\\\\\|");
        assert_eq!(cell("see www.e.x or awww.x"), "see www&#46;e.x or awww.x");
        assert_eq!(cell("\u{1b}]52;c;x\u{7}"), "");
        // Readable as raw text where nothing needs escaping.
        assert_eq!(cell("gpu3 (0000:65:00.0)"), "gpu3 (0000:65:00.0)");
        assert_eq!(cell("fw_mec _x_"), "fw_mec \\_x\\_");
    }

    #[test]
    fn codes_are_code_spans_only_when_plain() {
        assert_eq!(code("kfd-missing"), "`kfd-missing`");
        assert_eq!(code("gpu3.hip.memcpy"), "`gpu3.hip.memcpy`");
        assert_eq!(code("a`|<b>"), "a\\`\\|&lt;b&gt;");
        assert_eq!(code(""), "");
    }

    proptest::proptest! {
        #[test]
        fn no_text_adds_a_column_a_line_or_a_tag(text in ".{0,40}") {
            let c = cell(&text);
            proptest::prop_assert!(!c.contains('<') && !c.contains('>'));
            proptest::prop_assert!(!c.chars().any(char::is_control));
            // Every pipe is escaped: an odd run of backslashes before it.
            let bytes = c.as_bytes();
            for (i, b) in bytes.iter().enumerate() {
                if *b == b'|' {
                    let run = bytes[..i].iter().rev().take_while(|&&b| b == b'\\').count();
                    proptest::prop_assert!(run % 2 == 1, "{c:?}");
                }
            }
        }
    }
}
