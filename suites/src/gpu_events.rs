//! The window of the kernel log a run judges (`--since`): what happened
//! in it is a GPU's present, what happened before it is history
//! (`layers/support/events.rs` judges each GPU's events against it).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How far back a run judges the kernel log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Since {
    /// Everything since the node booted.
    #[default]
    Boot,
    /// The last stretch of time (`15m`, `24h`).
    Last(Duration),
    /// Since the last run rocgate's history holds (the front end turns it
    /// into [`Since::Last`]; unresolved, it is since boot).
    LastRun,
}

impl FromStr for Since {
    type Err = String;

    /// `boot`, `last-run`, or a number with a unit: `90s`, `15m`, `24h`,
    /// `7d`.
    fn from_str(text: &str) -> Result<Since, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("boot") {
            return Ok(Since::Boot);
        }
        if t.eq_ignore_ascii_case("last-run") {
            return Ok(Since::LastRun);
        }
        span(t).map(Since::Last).map_err(|why| {
            if t.starts_with(|c: char| c.is_ascii_digit()) {
                why
            } else {
                format!(
                    "{text:?}: give `boot`, `last-run` or a number and a unit (90s, 15m, 24h, 7d)"
                )
            }
        })
    }
}

/// A span of time written as a number and a unit: `90s`, `15m`, `24h`,
/// `7d` (what `--since` and `--duration` take).
pub fn span(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: give a number and a unit (90s, 15m, 24h, 7d)"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d (15m, 24h)")),
    };
    match n.checked_mul(seconds) {
        Some(s) if s > 0 => Ok(Duration::from_secs(s)),
        _ => Err(format!(
            "{text:?}: give a span above zero and below ~500 billion years"
        )),
    }
}

impl fmt::Display for Since {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Since::Boot => f.write_str("boot"),
            Since::LastRun => f.write_str("last-run"),
            Since::Last(d) => {
                let s = d.as_secs();
                let (n, unit) = [(86_400, "d"), (3600, "h"), (60, "m")]
                    .into_iter()
                    .find(|(u, _)| s % u == 0)
                    .map_or((s, "s"), |(u, name)| (s / u, name));
                write!(f, "{n}{unit}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn windows_read_and_print_as_given() {
        for (text, want) in [
            ("boot", Since::Boot),
            ("15m", Since::Last(Duration::from_secs(900))),
            ("24h", Since::Last(Duration::from_secs(86_400))),
            ("90s", Since::Last(Duration::from_secs(90))),
            ("last-run", Since::LastRun),
        ] {
            let got: Since = text.parse().unwrap();
            assert_eq!(got, want);
        }
        assert_eq!(Since::Last(Duration::from_secs(86_400)).to_string(), "1d");
        assert_eq!(Since::Last(Duration::from_secs(90)).to_string(), "90s");
        for bad in [
            "",
            "15",
            "m",
            "0m",
            "15 minutes",
            "-1h",
            "99999999999999999999d",
        ] {
            assert!(bad.parse::<Since>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn parsing_never_panics_and_round_trips(s in "\\PC{0,20}") {
            if let Ok(since) = s.parse::<Since>() {
                prop_assert_eq!(since.to_string().parse::<Since>(), Ok(since));
            }
        }
    }
}
