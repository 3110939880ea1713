//! Colour and cursor control, decided per output stream.
//!
//! A stream gets colour only when it is a terminal, `TERM` is not `dumb` and
//! `NO_COLOR` is unset or empty (<https://no-color.org>). Cursor control (the
//! live progress line's `\r` and `ESC[K`) needs a terminal whose `TERM` is
//! not `dumb`; `NO_COLOR` is about colour and leaves it alone. stdout and
//! stderr are decided separately: `rocgate run 2>log` keeps colour on the
//! terminal and none in the log.

use std::ffi::OsStr;
use std::io::IsTerminal;

/// How text is decorated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    color: bool,
}

/// What a stream can take beyond plain text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Colour (SGR sequences).
    pub color: bool,
    /// Cursor control: carriage-return redraws and `ESC[K`.
    pub cursor: bool,
}

impl Capabilities {
    /// What stdout can take.
    pub fn stdout() -> Self {
        Self::of(std::io::stdout().is_terminal())
    }

    /// What stderr can take.
    pub fn stderr() -> Self {
        Self::of(std::io::stderr().is_terminal())
    }

    fn of(is_terminal: bool) -> Self {
        Self::decide(
            is_terminal,
            std::env::var_os("TERM").as_deref(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    }

    /// The decision itself, from the stream and the environment.
    fn decide(is_terminal: bool, term: Option<&OsStr>, no_color: Option<&OsStr>) -> Self {
        let cursor = is_terminal && term != Some(OsStr::new("dumb"));
        Capabilities {
            color: cursor && no_color.is_none_or(OsStr::is_empty),
            cursor,
        }
    }
}

impl Style {
    /// Colour for stdout when it can take it.
    pub fn for_stdout() -> Self {
        Self::from(Capabilities::stdout())
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Failures.
    pub fn red(self, text: &str) -> String {
        self.paint("1;31", text)
    }

    /// Passes.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Warnings and checks that could not look.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Checks kept from running by a fault below them.
    pub fn magenta(self, text: &str) -> String {
        self.paint("35", text)
    }

    /// Findings a site waived.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }

    /// Secondary text.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Headings.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
}

impl From<Capabilities> for Style {
    fn from(c: Capabilities) -> Self {
        Style { color: c.color }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(tty: bool, term: Option<&str>, no_color: Option<&str>) -> Capabilities {
        Capabilities::decide(tty, term.map(OsStr::new), no_color.map(OsStr::new))
    }

    #[test]
    fn colour_and_cursor_need_a_capable_terminal() {
        let all = Capabilities {
            color: true,
            cursor: true,
        };
        let none = Capabilities {
            color: false,
            cursor: false,
        };
        assert_eq!(decide(true, Some("xterm-256color"), None), all);
        assert_eq!(decide(true, None, None), all);
        assert_eq!(decide(false, Some("xterm"), None), none);
        assert_eq!(decide(true, Some("dumb"), None), none);
        assert_eq!(decide(true, Some("dumb"), Some("")), none);
    }

    #[test]
    fn no_color_with_a_value_turns_off_colour_only() {
        let cursor_only = Capabilities {
            color: false,
            cursor: true,
        };
        assert_eq!(decide(true, Some("xterm"), Some("1")), cursor_only);
        assert_eq!(decide(true, Some("xterm"), Some("false")), cursor_only);
        // An empty NO_COLOR is unset (no-color.org).
        assert!(decide(true, Some("xterm"), Some("")).color);
    }

    #[test]
    fn plain_style_adds_nothing() {
        let s = Style::from(decide(false, None, None));
        assert_eq!(s.red("x"), "x");
        let s = Style::from(decide(true, Some("xterm"), None));
        assert_eq!(s.red("x"), "\x1b[1;31mx\x1b[0m");
    }
}
