//! Draining and resuming a Slurm node through `scontrol`, with the manners
//! of LBNL NHC: rocgate's reasons start with `rocgate:`, a reason someone
//! else set is never overwritten, and only a node rocgate drained is
//! resumed. `scontrol` is taken from PATH and given a deadline inside the
//! health check's budget, since a health check that waits on an
//! unreachable slurmctld is killed at 60 s; it runs in a process group of
//! its own, so a wrapper's children die with it
//! (`rocgate_node::subprocess`).

use rocgate_node::subprocess::{self, SubprocessError};
use std::process::Command;
use std::time::{Duration, Instant};

/// How rocgate's drain reasons start.
pub const REASON_PREFIX: &str = "rocgate:";

/// slurmdbd keeps at most this many bytes of a reason.
const MAX_REASON_BYTES: usize = 255;

/// How long one `scontrol` call may take at most.
const SCONTROL_DEADLINE: Duration = Duration::from_secs(10);

/// Whether `name` can be given to scontrol as one node's name: a host name
/// (letters, digits, `-`, `_`, `.`), not starting with `-` (scontrol would
/// take it for an option) and holding no `[`, `,` or space (a hostlist
/// expression that names other nodes, or several).
pub fn valid_node_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a Slurm node name rocgate passes to scontrol (letters, digits, '-', '_' and '.', not starting with '-'; no hostlist expression): set --node-name or SLURMD_NODENAME to this node's own name"
        ))
    }
}

/// A node as `scontrol show node` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// `IDLE`, `MIXED+DRAIN`, `DOWN+NOT_RESPONDING`.
    pub state: String,
    /// Why it is drained or down, without the `[user@time]` Slurm adds.
    pub reason: Option<String>,
}

impl NodeState {
    /// Whether the node is drained or draining.
    pub fn drained(&self) -> bool {
        self.state.split('+').any(|s| s.starts_with("DRAIN"))
    }

    /// Whether jobs hold the node (or some of it), so a health check must
    /// not touch its GPUs: `ALLOCATED`, `MIXED` or `COMPLETING`.
    pub fn runs_jobs(&self) -> bool {
        self.state
            .split('+')
            .any(|s| s.starts_with("ALLOC") || s.starts_with("MIX") || s.starts_with("COMPLETING"))
    }

    /// Whether the reason is rocgate's own: it starts with `rocgate:`
    /// exactly (an administrator's `" rocgate: ..."` is theirs).
    pub fn reason_is_ours(&self) -> bool {
        self.reason
            .as_deref()
            .is_some_and(|r| r.starts_with(REASON_PREFIX))
    }
}

/// Reads `State=` and `Reason=` from `scontrol show node` output.
pub fn parse_show_node(text: &str) -> Option<NodeState> {
    let state = text
        .split_whitespace()
        .find_map(|t| t.strip_prefix("State="))?
        .to_string();
    // The reason runs to the end of its line and may hold spaces; Slurm
    // appends who set it and when.
    let reason = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("Reason="))
        .map(|r| match r.rfind(" [") {
            Some(i) if r.ends_with(']') => &r[..i],
            _ => r,
        })
        // Only the end is trimmed: a reason that starts with a space is
        // not rocgate's, which never writes one.
        .map(|r| r.trim_end().to_string())
        .filter(|r| !r.trim().is_empty() && r != "(null)");
    Some(NodeState { state, reason })
}

/// `reason` cut to what slurmdbd stores, on a character boundary.
pub fn bounded_reason(reason: &str) -> String {
    let mut end = reason.len().min(MAX_REASON_BYTES);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

/// Runs `scontrol args`, ending it by `until` (and within
/// [`SCONTROL_DEADLINE`]), and returns its standard output.
fn scontrol(args: &[&str], until: Instant) -> Result<String, String> {
    let shown = format!("scontrol {}", args.join(" "));
    let deadline = until
        .saturating_duration_since(Instant::now())
        .min(SCONTROL_DEADLINE);
    if deadline.is_zero() {
        return Err(format!(
            "{shown} not run: the health budget has no time left for it (raise --budget)"
        ));
    }
    let mut command = Command::new("scontrol");
    command.args(args);
    // Its output is a node's record or an error line: a megabyte is more
    // than it ever prints.
    match subprocess::run(&mut command, deadline, 1 << 20) {
        Ok(done) if done.status.success() => Ok(done.stdout_text()),
        Ok(done) => Err(format!(
            "{shown} failed ({}): {}",
            done.status,
            done.stderr_text().trim()
        )),
        Err(SubprocessError::Spawn { source, .. }) => Err(format!(
            "{shown} could not start: {source} (is Slurm's scontrol on PATH?)"
        )),
        Err(SubprocessError::TimedOut { .. }) => Err(format!(
            "{shown} did not answer within {:.1} s (is slurmctld reachable?)",
            deadline.as_secs_f64()
        )),
        Err(SubprocessError::Wait { source, .. }) => Err(format!("{shown}: {source}")),
    }
}

/// What rocgate decided about the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Healthy: resume it if rocgate drained it.
    Healthy,
    /// Unhealthy, with the reason to drain it with.
    Unhealthy(&'a str),
    /// Unknown: touch nothing.
    Unknown,
}

/// `node` as `scontrol show node` shows it now, asked by `until`.
pub fn show(node: &str, until: Instant) -> Result<NodeState, String> {
    valid_node_name(node)?;
    let shown = scontrol(&["show", "node", node], until)?;
    parse_show_node(&shown).ok_or_else(|| {
        format!(
            "scontrol show node {node} printed no State=: {}",
            shown.trim()
        )
    })
}

/// Drains or resumes `node` for `verdict`, by `until`; returns what was
/// done, for the log, or why nothing could be.
pub fn act(node: &str, verdict: Verdict<'_>, until: Instant) -> Result<String, String> {
    if verdict == Verdict::Unknown {
        return Ok(format!("{node} left as it is: the verdict is unknown"));
    }
    let current = show(node, until)?;
    match verdict {
        Verdict::Unhealthy(reason) => {
            if current.reason.is_some() && !current.reason_is_ours() {
                return Ok(format!(
                    "{node} left as it is: its reason {:?} is not rocgate's",
                    current.reason.unwrap_or_default()
                ));
            }
            let reason = bounded_reason(reason);
            if current.drained() && current.reason.as_deref() == Some(reason.as_str()) {
                return Ok(format!("{node} is already drained: {reason}"));
            }
            scontrol(
                &[
                    "update",
                    &format!("NodeName={node}"),
                    "State=DRAIN",
                    &format!("Reason={reason}"),
                ],
                until,
            )?;
            Ok(format!("drained {node}: {reason}"))
        }
        Verdict::Healthy if current.drained() && current.reason_is_ours() => {
            scontrol(
                &["update", &format!("NodeName={node}"), "State=RESUME"],
                until,
            )?;
            Ok(format!("resumed {node}, which rocgate had drained"))
        }
        Verdict::Healthy if current.drained() => Ok(format!(
            "{node} stays drained: its reason {:?} is not rocgate's",
            current.reason.unwrap_or_default()
        )),
        _ => Ok(format!("{node} left as it is ({})", current.state)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAINED: &str = "NodeName=n1 Arch=x86_64 CoresPerSocket=1\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Partitions=debug\n   Reason=rocgate: kfd-missing node [root@2026-12-01T06:00:00]\n";

    #[test]
    fn state_and_reason_are_read_without_who_set_it() {
        let n = parse_show_node(DRAINED).unwrap();
        assert_eq!(n.state, "IDLE+DRAIN");
        assert_eq!(n.reason.as_deref(), Some("rocgate: kfd-missing node"));
        assert!(n.drained() && n.reason_is_ours());
        let idle = parse_show_node("NodeName=n1\n   State=IDLE ThreadsPerCore=1\n").unwrap();
        assert!(!idle.drained() && idle.reason.is_none());
        assert!(!idle.runs_jobs() && !n.runs_jobs());
        for busy in ["ALLOCATED", "MIXED+DRAIN", "COMPLETING", "IDLE+COMPLETING"] {
            let s = NodeState {
                state: busy.into(),
                reason: None,
            };
            assert!(s.runs_jobs(), "{busy}");
        }
        let theirs =
            parse_show_node("State=DOWN+DRAIN\n   Reason=bad DIMM [admin@2026-11-30T10:00:00]\n")
                .unwrap();
        assert_eq!(theirs.reason.as_deref(), Some("bad DIMM"));
        assert!(theirs.drained() && !theirs.reason_is_ours());
        assert_eq!(parse_show_node("Node n1 not found"), None);
        // An administrator's reason that starts with a space is theirs.
        let spaced = parse_show_node(
            "State=IDLE+DRAIN\n   Reason= rocgate: kfd-missing node [admin@2026-11-30T10:00:00]\n",
        )
        .unwrap();
        assert_eq!(spaced.reason.as_deref(), Some(" rocgate: kfd-missing node"));
        assert!(!spaced.reason_is_ours());
    }

    #[test]
    fn node_names_are_never_options_or_hostlists() {
        assert!(valid_node_name("gpu-node07.cluster").is_ok());
        for bad in ["-h", "--help", "adv[1-1]", "a,b", "a b", "", "n1\n"] {
            assert!(valid_node_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reasons_fit_slurmdbd() {
        let long = format!("rocgate: {}", "é".repeat(200));
        let r = bounded_reason(&long);
        assert!(r.len() <= 255 && long.starts_with(&r), "{}", r.len());
        assert_eq!(bounded_reason("rocgate: ok"), "rocgate: ok");
    }
}
