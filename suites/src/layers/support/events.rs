//! A GPU's kernel-log events judged against the run's window
//! ([`crate::gpu_events::Since`]): what happened in the window is the
//! GPU's present, what happened before it is history, said but not held
//! against the GPU.

use super::list;
use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::gpu_events::Since;
use crate::resets::device_part;
use rocgate_harness::{Outcome, Verdict};
use rocgate_node::facts::acs;
use rocgate_node::facts::gpu_events::{EventClass, GpuEvent};
use rocgate_node::facts::gpus::Gpu;
use std::collections::BTreeMap;

/// Where the window starts and where now is, in seconds since boot, and
/// how reports say the window.
struct Window {
    start_s: Option<f64>,
    now_s: Option<f64>,
    said: String,
}

impl Window {
    fn of(ctx: &NodeContext) -> Window {
        let now = rocgate_node::facts::kernel_log::uptime(&ctx.facts.sysroot);
        let now_s = now.as_ref().ok().copied();
        match (ctx.options.since, now) {
            (Since::Boot | Since::LastRun, _) => Window {
                start_s: None,
                now_s,
                said: "since boot".into(),
            },
            (Since::Last(d), Ok(now)) => Window {
                start_s: Some(now - d.as_secs_f64()),
                now_s,
                said: format!("in the last {}", ctx.options.since),
            },
            (Since::Last(_), Err(e)) => Window {
                start_s: None,
                now_s,
                said: format!(
                    "since boot (the {} window cannot be placed: {e})",
                    ctx.options.since
                ),
            },
        }
    }

    /// Whether `e` happened in the window; a line without a time is taken
    /// to.
    fn holds(&self, e: &GpuEvent) -> bool {
        match (self.start_s, e.uptime_s) {
            (Some(start), Some(at)) => at >= start,
            _ => true,
        }
    }

    /// `, 14.5 h ago` for an event with a time, when now is known.
    fn ago(&self, e: &GpuEvent) -> String {
        match (self.now_s, e.uptime_s) {
            (Some(now), Some(at)) if now >= at => {
                let s = now - at;
                if s >= 5400.0 {
                    format!(", {:.1} h ago", s / 3600.0)
                } else if s >= 90.0 {
                    format!(", {:.0} min ago", s / 60.0)
                } else {
                    format!(", {s:.0} s ago")
                }
            }
            _ => String::new(),
        }
    }
}

/// What each class means for the GPU, most telling first: the code a
/// class in the window gives. Classes absent here (a reset's method, a
/// corrected PCIe error, amdgpu's other errors) are counted, not judged.
const JUDGED: &[(EventClass, Code)] = &[
    (EventClass::LinkDown, codes::PCIE_LINK_DOWN),
    (EventClass::AerFatal, codes::PCIE_FATAL_ERROR),
    (EventClass::ResetFailed, codes::GPU_RESET_FAILED),
    (EventClass::ThermalShutdown, codes::GPU_THERMAL_SHUTDOWN),
    (EventClass::AerNonFatal, codes::PCIE_ERROR_LOGGED),
    (EventClass::IommuFault, codes::IOMMU_PAGE_FAULT),
    (EventClass::JobTimeout, codes::GPU_JOB_TIMEOUT),
    (EventClass::ResetBegin, codes::GPU_RESET),
    (EventClass::ResetSucceeded, codes::GPU_RESET),
    (EventClass::PageFault, codes::GPU_PAGE_FAULT),
    (EventClass::ShaderError, codes::GPU_SHADER_ERROR),
    (EventClass::RasEvent, codes::GPU_RAS_EVENT),
    (EventClass::Throttle, codes::GPU_THROTTLED),
];

fn code_of(class: EventClass) -> Option<Code> {
    JUDGED
        .iter()
        .find(|(c, _)| *c == class)
        .map(|(_, code)| *code)
}

/// The events of the kernel log that concern `gpu`: amdgpu's (`bus`
/// false) or the PCI core's and the IOMMU's (`bus` true), the latter also
/// when they name a bridge above the GPU.
fn events_of<'a>(ctx: &'a NodeContext, gpu: &Gpu, bus: bool) -> Vec<&'a GpuEvent> {
    let device = device_part(gpu.physical_address());
    let bridges = if bus {
        acs::bridges_above(&ctx.facts.sysroot, gpu.physical_address()).unwrap_or_default()
    } else {
        Vec::new()
    };
    ctx.facts
        .gpu_events()
        .iter()
        .filter(|e| e.class.is_bus_event() == bus)
        .filter(|e| {
            e.address.as_deref().is_some_and(|a| {
                device_part(a) == device || bridges.iter().any(|b| b.eq_ignore_ascii_case(a))
            })
        })
        .collect()
}

/// `2 job timeouts, 1 page fault`.
fn counted(events: &[&GpuEvent]) -> String {
    let mut by: BTreeMap<EventClass, usize> = BTreeMap::new();
    for e in events {
        *by.entry(e.class).or_default() += 1;
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(c, n)| match n {
            1 => c.name().to_string(),
            n => format!("{} x{n}", c.name()),
        })
        .collect();
    list(&parts, 6)
}

/// What a line says of itself beyond its class: when, which process, and
/// whether rocgate placed it by the lines around it.
fn described(e: &GpuEvent) -> String {
    let mut s = e.line.clone();
    if let Some(p) = &e.process {
        s.push_str(&format!(" [process {p}]"));
    }
    if e.by_context {
        s.push_str(" [names no device: attributed by the lines around it]");
    }
    s
}

/// Judges the GPU's kernel-log events of one kind (`bus`: the PCI core's
/// and the IOMMU's; else amdgpu's) in the run's window.
pub fn judge(ctx: &NodeContext, gpu: &Gpu, bus: bool) -> Outcome {
    let log = ctx
        .facts
        .kernel_log()
        .as_ref()
        .map_err(|e| Verdict::unverifiable(e.clone()))?;
    let window = Window::of(ctx);
    let events = events_of(ctx, gpu, bus);
    let (now, before): (Vec<&GpuEvent>, Vec<&GpuEvent>) =
        events.iter().copied().partition(|e| window.holds(e));
    let output = events
        .iter()
        .map(|e| {
            let when = if window.holds(e) {
                ""
            } else {
                "[before the window] "
            };
            format!("{when}{}", described(e))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let with = |v: Verdict| {
        v.with_count("kernel_events", now.len() as f64, "events")
            .with_output(output.clone())
    };
    let what = if bus { "PCIe or IOMMU" } else { "amdgpu" };
    let worst = JUDGED
        .iter()
        .find(|(class, _)| now.iter().any(|e| e.class == *class));
    let events_in = |n: usize| {
        format!(
            "{n} {what} event{} in {}",
            if n == 1 { "" } else { "s" },
            log.source
        )
    };
    if let Some((class, code)) = worst {
        let Some(first) = now.iter().find(|e| e.class == *class) else {
            return Err(Verdict::unverifiable("internal: the worst event vanished"));
        };
        let process = first
            .process
            .as_deref()
            .map_or_else(String::new, |p| format!(", by {p}"));
        let finding = code.finding(format!(
            "{} on {} {}{}: {}{process} ({}: {})",
            class.name(),
            gpu.label(),
            window.said,
            window.ago(first),
            first.line,
            events_in(now.len()),
            counted(&now)
        ));
        return Err(with(Verdict::found(finding)));
    }
    // Judged events only before the window: the GPU has been through
    // them, and what it does now is for the checks above to say.
    let old: Vec<&GpuEvent> = before
        .iter()
        .copied()
        .filter(|e| code_of(e.class).is_some())
        .collect();
    let worst_old = JUDGED
        .iter()
        .find_map(|(class, _)| old.iter().find(|e| e.class == *class));
    if let Some(first) = worst_old {
        return Err(with(Verdict::found(codes::GPU_EVENT_HISTORY.finding(
            format!(
                "{} on {} before the window{}: {}; nothing judged {} ({} before it: {})",
                first.class.name(),
                gpu.label(),
                window.ago(first),
                first.line,
                window.said,
                events_in(old.len()),
                counted(&old)
            ),
        ))));
    }
    let other = if now.is_empty() {
        String::new()
    } else {
        format!(" ({} not judged: {})", now.len(), counted(&now))
    };
    Ok(with(Verdict::pass(format!(
        "no {what} fault events {} in {}{other}",
        window.said, log.source
    ))))
}
