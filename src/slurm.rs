//! Draining and resuming a Slurm node through `scontrol`, with the manners
//! of LBNL NHC: rocgate's reasons start with `rocgate:`, a reason someone
//! else set is never overwritten, and only a node rocgate drained is
//! resumed. `scontrol` is taken from PATH and given a deadline, since a
//! health check that waits on an unreachable slurmctld is killed at 60 s.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// How rocgate's drain reasons start.
pub const REASON_PREFIX: &str = "rocgate:";

/// slurmdbd keeps at most this many bytes of a reason.
const MAX_REASON_BYTES: usize = 255;

/// How long one `scontrol` call may take.
const SCONTROL_DEADLINE: Duration = Duration::from_secs(10);

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

    /// Whether the reason is rocgate's own.
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
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty() && r != "(null)");
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

/// Runs `scontrol args` and returns its standard output.
fn scontrol(args: &[&str]) -> Result<String, String> {
    let shown = format!("scontrol {}", args.join(" "));
    let mut child = Command::new("scontrol")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{shown} could not start: {e} (is Slurm's scontrol on PATH?)"))?;
    let status = match child.wait_timeout(SCONTROL_DEADLINE) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{shown} did not answer within {} s (is slurmctld reachable?)",
                SCONTROL_DEADLINE.as_secs()
            ));
        }
        Err(e) => return Err(format!("{shown}: {e}")),
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if status.success() {
        Ok(out)
    } else {
        Err(format!("{shown} failed ({status}): {}", err.trim()))
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

/// `node` as `scontrol show node` shows it now.
pub fn show(node: &str) -> Result<NodeState, String> {
    let shown = scontrol(&["show", "node", node])?;
    parse_show_node(&shown).ok_or_else(|| {
        format!(
            "scontrol show node {node} printed no State=: {}",
            shown.trim()
        )
    })
}

/// Drains or resumes `node` for `verdict`; returns what was done, for the
/// log, or why nothing could be.
pub fn act(node: &str, verdict: Verdict<'_>) -> Result<String, String> {
    if verdict == Verdict::Unknown {
        return Ok(format!("{node} left as it is: the verdict is unknown"));
    }
    let current = show(node)?;
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
            scontrol(&[
                "update",
                &format!("NodeName={node}"),
                "State=DRAIN",
                &format!("Reason={reason}"),
            ])?;
            Ok(format!("drained {node}: {reason}"))
        }
        Verdict::Healthy if current.drained() && current.reason_is_ours() => {
            scontrol(&["update", &format!("NodeName={node}"), "State=RESUME"])?;
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
    }

    #[test]
    fn reasons_fit_slurmdbd() {
        let long = format!("rocgate: {}", "é".repeat(200));
        let r = bounded_reason(&long);
        assert!(r.len() <= 255 && long.starts_with(&r), "{}", r.len());
        assert_eq!(bounded_reason("rocgate: ok"), "rocgate: ok");
    }
}
