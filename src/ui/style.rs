//! Colour and cursor control, decided per output stream.
//!
//! A stream gets colour when it is a terminal and `TERM` is not `dumb`,
//! unless `NO_COLOR` is set and not empty (<https://no-color.org>) or
//! `CLICOLOR=0`; `CLICOLOR_FORCE` (set, not empty) gives colour to any stream, a
//! CI log that renders it included (<https://bixense.com/clicolors/>). The
//! variables are read by `anstyle-query`, as clap and anstream read them,
//! in anstream's order: NO_COLOR, then CLICOLOR_FORCE, then CLICOLOR.
//! Cursor control (the
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
            ColorEnv {
                no_color: anstyle_query::no_color(),
                force: anstyle_query::clicolor_force(),
                clicolor: anstyle_query::clicolor(),
            },
        )
    }

    /// The decision itself, from the stream and the environment.
    fn decide(is_terminal: bool, term: Option<&OsStr>, env: ColorEnv) -> Self {
        let cursor = is_terminal && term != Some(OsStr::new("dumb"));
        let color = if env.no_color {
            false
        } else if env.force {
            true
        } else if env.clicolor == Some(false) {
            false
        } else {
            cursor
        };
        Capabilities { color, cursor }
    }
}

/// What the colour variables say.
#[derive(Clone, Copy, Debug, Default)]
struct ColorEnv {
    /// `NO_COLOR` is set and not empty.
    no_color: bool,
    /// `CLICOLOR_FORCE` is set and not empty.
    force: bool,
    /// `CLICOLOR`: `Some(false)` for `0`.
    clicolor: Option<bool>,
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

    /// `text` in the colour of a check's status, the same in the progress
    /// lines and the ladder: faults red, passes green, warnings yellow,
    /// blocked magenta, skips dim (cyan is for waived findings).
    pub fn status(self, status: rocgate_harness::Status, text: &str) -> String {
        use rocgate_harness::Status;
        match status {
            Status::Fail | Status::Timeout | Status::Crash => self.red(text),
            Status::Pass => self.green(text),
            Status::Warn => self.yellow(text),
            Status::Blocked => self.magenta(text),
            Status::Skipped => self.dim(text),
        }
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
        let env = ColorEnv {
            no_color: no_color.is_some_and(|v| !v.is_empty()),
            ..ColorEnv::default()
        };
        Capabilities::decide(tty, term.map(OsStr::new), env)
    }

    #[test]
    fn clicolor_forces_colour_or_turns_it_off_and_no_color_wins() {
        let at = |tty, env| Capabilities::decide(tty, Some(OsStr::new("xterm")), env);
        let force = ColorEnv {
            force: true,
            ..ColorEnv::default()
        };
        // A CI log that renders colour asks for it; cursor control stays off.
        assert_eq!(
            at(false, force),
            Capabilities {
                color: true,
                cursor: false
            }
        );
        let off = ColorEnv {
            clicolor: Some(false),
            ..ColorEnv::default()
        };
        assert!(!at(true, off).color);
        assert!(at(true, off).cursor);
        let both = ColorEnv {
            no_color: true,
            force: true,
            ..ColorEnv::default()
        };
        assert!(!at(false, both).color);
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
