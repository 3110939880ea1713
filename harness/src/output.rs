//! Captured output made safe for reports: no ANSI escapes, no characters XML
//! cannot carry, and a bounded size that keeps both ends; node text made
//! safe for one line of a terminal table; and stdout text that a CI runner
//! cannot take for its own commands.

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

/// A node string (a VBIOS version, a product name) for one line of a
/// terminal: [`xml_safe`] (no escape sequence, so no OSC 52 clipboard write
/// or screen clear), and tab, carriage return and line feed as spaces, so
/// it can neither break the line nor draw over it.
pub fn one_line(text: &str) -> String {
    xml_safe(text).replace(['\t', '\r', '\n'], " ")
}

/// Word joiner: invisible, and not white space to the GitHub Actions runner
/// (.NET's `char.IsWhiteSpace`), so a line it starts is no command.
const WORD_JOINER: char = '\u{2060}';

/// `text` with nothing the GitHub Actions runner would take for a workflow
/// command: the runner reads every line a step prints (split at `\n` and
/// `\r`, as .NET's `ReadLine` does) and runs `::name::data` at the start of
/// a line (after white space) and `##[name]data` anywhere in it
/// (actions/runner, src/Runner.Common/ActionCommand.cs, `TryParseV2` and
/// `TryParse`). A node string such as `::add-mask::` or `##[error]` must not
/// act on the job, so a word joiner goes between the two characters that
/// would start one; other text is unchanged.
pub fn no_workflow_commands(text: &str) -> String {
    if !text.contains("::") && !text.contains("##[") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut line_start = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        out.push(c);
        if (line_start && c == ':' && next == Some(':')) || (c == '#' && next == Some('#')) {
            let mut ahead = chars.clone();
            ahead.next();
            if c == ':' || ahead.next() == Some('[') {
                out.push(WORD_JOINER);
            }
        }
        line_start = match c {
            '\n' | '\r' => true,
            c if c.is_whitespace() => line_start,
            _ => false,
        };
    }
    out
}

/// A JSON document with nothing the GitHub Actions runner would take for a
/// workflow command ([`no_workflow_commands`]), without changing what it
/// says: outside strings JSON has no `#` and its lines start with a bracket
/// or a quote, so only `##[` inside a string matters, written `#\u0023[`.
pub fn json_without_workflow_commands(json: &str) -> String {
    json.replace("##[", "#\\u0023[")
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

    #[test]
    fn node_text_is_one_line_without_escapes() {
        let vbios = "113-\u{1b}]52;c;ZXZpbA==\u{7}D\u{1b}[2J\u{1b}[H70\r\nok\t.";
        assert_eq!(one_line(vbios), "113-D70 ok .");
    }

    #[test]
    fn workflow_commands_are_broken_and_other_text_kept() {
        let wj = WORD_JOINER;
        assert_eq!(
            no_workflow_commands("a\n  ::add-mask::x\rb ##[error]y ::z:: #[ok] ##"),
            format!("a\n  :{wj}:add-mask::x\rb #{wj}#[error]y ::z:: #[ok] ##")
        );
        assert_eq!(no_workflow_commands("::x::y"), format!(":{wj}:x::y"));
        assert_eq!(no_workflow_commands("plain :: text"), "plain :: text");
        let json = r###"{"vbios": "##[add-mask]x"}"###;
        let safe = json_without_workflow_commands(json);
        assert!(!safe.contains("##["), "{safe}");
        let a: serde_json::Value = serde_json::from_str(json).unwrap();
        let b: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(a, b);
    }

    proptest! {
        #[test]
        fn no_line_is_a_workflow_command(s in "[:#\\[\n\r a-z]{0,200}") {
            let out = no_workflow_commands(&s);
            for line in out.split(['\n', '\r']) {
                prop_assert!(!line.trim_start().starts_with("::"), "{line:?}");
                prop_assert!(!line.contains("##["), "{line:?}");
            }
            prop_assert_eq!(out.replace(WORD_JOINER, ""), s);
        }

        #[test]
        fn never_panics_and_stays_bounded(s in ".{0,3000}", limit in 16usize..512) {
            let out = clean(&s, limit);
            prop_assert!(out.len() <= limit + 64);
            prop_assert!(!out.contains('\x1b'), "escape left in output");
        }
    }
}
