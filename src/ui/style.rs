//! Colour when writing to a terminal (and `NO_COLOR` is unset), plain text otherwise.

use std::io::IsTerminal;

/// How text is decorated.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Colour for stdout when it is a terminal.
    pub fn for_stdout() -> Self {
        Style {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
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

    /// Blocked and skipped.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
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
