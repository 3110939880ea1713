//! How wide the human output may be. `COLUMNS` when it holds a number (as
//! a shell exports it, or a user sets it), else the width of the terminal
//! the output goes to; a file or a CI log has no width, and keeps each
//! paragraph on one line where grep finds it whole.

use std::io::IsTerminal;

/// The narrowest width rocgate lays out for; a narrower one is taken as
/// this (a line cannot say anything in fewer columns).
pub const MIN_COLUMNS: usize = 40;

/// The columns of the stream human output goes to, if it has any.
pub fn columns() -> Option<usize> {
    let on_stderr = super::human_on_stderr();
    let tty = if on_stderr {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    let size = || {
        let term = if on_stderr {
            console::Term::stderr()
        } else {
            console::Term::stdout()
        };
        term.size_checked().map(|(_, cols)| usize::from(cols))
    };
    decide(std::env::var("COLUMNS").ok().as_deref(), tty, size)
}

/// The decision itself: `COLUMNS` first, then the terminal's size.
fn decide(columns: Option<&str>, tty: bool, size: impl FnOnce() -> Option<usize>) -> Option<usize> {
    let given = columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0);
    given
        .or_else(|| if tty { size().filter(|&c| c > 0) } else { None })
        .map(|c| c.max(MIN_COLUMNS))
}

/// `text` with every line longer than `width` wrapped at spaces, its
/// continuation lines indented two columns past the line's own indent.
/// Commands in backticks are never broken: a pasted command must be whole,
/// so a line holding a long one may stay longer than `width`.
pub fn wrap(text: &str, width: usize) -> String {
    const KEEP: char = '\u{a0}';
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        if textwrap::core::display_width(body) <= width {
            out.push_str(line);
            continue;
        }
        // Spaces inside backticks become no-break spaces for the wrap.
        let kept = in_backticks(body, ' ', KEEP);
        let indent = &body[..body.len() - body.trim_start().len()];
        let more = format!("{indent}  ");
        let options = textwrap::Options::new(width)
            .initial_indent(indent)
            .subsequent_indent(&more)
            .break_words(false)
            .word_splitter(textwrap::WordSplitter::NoHyphenation)
            .word_separator(textwrap::WordSeparator::AsciiSpace);
        let wrapped = textwrap::fill(kept.trim_start(), &options);
        // Only the spaces inside backticks go back: a no-break space the
        // text held outside them stays.
        let restored = in_backticks(&wrapped, KEEP, ' ');
        out.push_str(&restored);
        out.push_str(newline);
    }
    out
}

/// `text` with `from` replaced by `to` inside backticks only.
fn in_backticks(text: &str, from: char, to: char) -> String {
    let mut quoted = false;
    text.chars()
        .map(|c| {
            if c == '`' {
                quoted = !quoted;
            }
            if quoted && c == from { to } else { c }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_come_from_the_variable_then_the_terminal() {
        assert_eq!(decide(Some("80"), false, || None), Some(80));
        assert_eq!(decide(Some("80"), true, || Some(200)), Some(80));
        assert_eq!(decide(None, true, || Some(132)), Some(132));
        assert_eq!(decide(Some("wide"), true, || Some(132)), Some(132));
        assert_eq!(decide(Some("0"), false, || Some(132)), None);
        assert_eq!(decide(None, false, || Some(132)), None);
        assert_eq!(decide(Some("12"), false, || None), Some(MIN_COLUMNS));
    }

    #[test]
    fn long_lines_wrap_under_their_indent_and_short_ones_stay() {
        let text = "  next: drain the node and reseat the card, then run it again\nshort\n";
        assert_eq!(
            wrap("install linux-firmware now", 16),
            "install\n  linux-firmware\n  now"
        );
        let got = wrap(text, 30);
        assert_eq!(
            got,
            "  next: drain the node and\n    reseat the card, then run\n    it again\nshort\n"
        );
        assert!(got.lines().all(|l| l.chars().count() <= 30), "{got}");
    }

    #[test]
    fn a_command_in_backticks_is_never_broken() {
        let text = "run `sudo modprobe amdgpu && dmesg | grep -i amdgpu` as root now";
        let got = wrap(text, 24);
        assert!(
            got.contains("`sudo modprobe amdgpu && dmesg | grep -i amdgpu`"),
            "{got}"
        );
        assert!(!got.contains('\u{a0}'), "{got:?}");
    }

    proptest::proptest! {
        #[test]
        fn wrapping_keeps_every_word(text in "[a-z `]{0,200}", width in 1usize..100) {
            let got = wrap(&text, width);
            let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
            proptest::prop_assert_eq!(words(&got).concat(), words(&text).concat());
        }
    }
}
