//! compat: whether the node's firmware, driver, kernel, OS and ROCm release
//! are a combination AMD supports. A mismatch fails this check without
//! blocking the layers above, so the report also shows whether they work.

use crate::compat_matrix::{Evaluation, Fit, evaluate};
use crate::context::NodeContext;
use crate::findings::codes;
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};

/// The compat layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![Check {
        gates: false,
        ..super::support::check(
            "compat::combination",
            stack::COMPAT,
            ScopeKind::Node,
            "the node's GPUs, amdgpu driver, OS and kernel are supported by its ROCm release (compatibility matrix)",
            combination,
        )
    }]
}

fn combination(ctx: &NodeContext, _: Scope) -> Outcome {
    let m = &ctx.matrix;
    Ok(match evaluate(&ctx.facts, m) {
        Evaluation::NoRocm => {
            Verdict::unverifiable("no ROCm release found on the node (/opt/rocm/.info/version; an install elsewhere is read from --rocm-path or ROCM_PATH)")
        }
        Evaluation::UnknownRelease { rocm, span } => Verdict::found(codes::COMPAT_UNKNOWN_RELEASE.finding_next(format!(
                "ROCm {rocm} is not in the compatibility matrix ({}, which covers {span})",
                m.origin
            ), "update the matrix from AMD's compatibility page (ROCm/ROCm docs/compatibility) and pass it with --matrix FILE, or install a listed ROCm release")),
        Evaluation::Checked {
            rocm,
            source,
            components,
        } => {
            let table: Vec<String> = components
                .iter()
                .map(|c| {
                    format!(
                        "{:<8} {:<9} have {} ; matrix: {}",
                        c.name,
                        c.verdict.label(),
                        c.have,
                        c.want
                    )
                })
                .collect();
            let output = format!("ROCm {rocm} ({source})\n{}", table.join("\n"));
            let mismatch = components.iter().find_map(|c| match &c.verdict {
                Fit::Unsupported(code) => Some((c, *code)),
                _ => None,
            });
            let unknown = components.iter().find_map(|c| match &c.verdict {
                Fit::Unknown(why) => Some((c, why)),
                _ => None,
            });
            match (mismatch, unknown) {
                // Nothing that can be checked is out of range, but something
                // could not be: not a pass, not a failure.
                (None, Some((c, why))) => Verdict::unverifiable(format!(
                    "ROCm {rocm}: {} cannot be checked: {why} (the matrix lists {})",
                    c.name, c.want
                ))
                .with_output(output)
                .with_fact("rocm", rocm),
                (None, None) => Verdict::pass(format!(
                    "ROCm {rocm} supports this node: {}",
                    components
                        .iter()
                        .map(|c| {
                            // `gpu gfx942` already says what it has.
                            if c.name.ends_with(c.have.as_str()) {
                                c.name.clone()
                            } else {
                                format!("{} {}", c.name, c.have)
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .with_output(output)
                .with_fact("rocm", rocm),
                (Some((c, code)), _) => {
                    let next = match code.code {
                        "compat-amdgpu-unsupported" => format!(
                            "install the amdgpu driver release ROCm {rocm} lists ({}), or the ROCm release that supports the installed driver",
                            c.want
                        ),
                        "compat-gpu-unsupported" => format!(
                            "ROCm {rocm} does not support {}: use a release that does",
                            c.have
                        ),
                        "compat-os-unsupported" => format!(
                            "ROCm {rocm} supports {}: move the node to one of them or pick a ROCm release that supports {}",
                            c.want, c.have
                        ),
                        _ => format!("ROCm {rocm} lists {} for this OS: boot one of them", c.want),
                    };
                    Verdict::found(code.finding_next(format!(
                            "ROCm {rocm} expects {} {}; this node runs {} (per the {})",
                            c.name,
                            c.want,
                            c.have,
                            source.split(';').next().unwrap_or(&source).trim()
                        ), next))
                    .with_output(output)
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{fails_with, node};
    use rocgate_harness::{SkipReason, Status};

    #[test]
    fn a_listed_combination_passes_and_shows_its_table() {
        let v = node("mi300x-8").verdict(combination, Scope::Node);
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert!(v.output.starts_with("ROCm 7.1.1"), "{}", v.output);
    }

    #[test]
    fn each_unsupported_component_is_named_by_its_code() {
        for (scenario, want) in [
            ("compat-driver-mismatch", codes::COMPAT_AMDGPU_UNSUPPORTED),
            ("compat-unknown-release", codes::COMPAT_UNKNOWN_RELEASE),
            ("compat-os-unsupported", codes::COMPAT_OS_UNSUPPORTED),
        ] {
            fails_with(scenario, combination, Scope::Node, want);
        }
    }

    #[test]
    fn a_node_without_rocm_cannot_be_checked() {
        node("mi210-8-two-hives").skips(combination, Scope::Node, SkipReason::Unverifiable);
    }
}
