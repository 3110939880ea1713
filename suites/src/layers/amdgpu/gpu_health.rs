//! amdgpu's view of the GPU's health: RAS error counters and retired VRAM
//! pages (`ras/`, amdgpu_ras.c), RAS events in the kernel log, and the
//! GPU's temperatures and power against their limits (hwmon). These read
//! what amdgpu exposes, so they sit in the amdgpu layer.

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{NEEDS_LIVE_AMDGPU, check, list};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, SkipReason, Verdict};
use rocgate_node::facts::NodeFacts;
use rocgate_node::facts::bad_page_threshold::{self, Known};
use rocgate_node::facts::hwmon;
use rocgate_node::facts::kernel_log;
use rocgate_node::facts::ras::{self, Ras};

/// The GPU-health checks of the amdgpu layer.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            ..check(
                "amdgpu::ras_errors",
                stack::AMDGPU,
                ScopeKind::PerGpu,
                "the GPU has no uncorrectable RAS errors (ras/*_err_count, kernel log)",
                ras_errors,
            )
        },
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            gates: false,
            ..check(
                "amdgpu::ras_bad_pages",
                stack::AMDGPU,
                ScopeKind::PerGpu,
                "the GPU's retired VRAM pages are clear of the driver's threshold",
                ras_bad_pages,
            )
        },
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            gates: false,
            ..check(
                "amdgpu::thermals",
                stack::AMDGPU,
                ScopeKind::PerGpu,
                "the GPU is below its temperature and power limits before any load (hwmon)",
                thermals,
            )
        },
        Check {
            gates: false,
            ..check(
                "amdgpu::gpu_events",
                stack::AMDGPU,
                ScopeKind::PerGpu,
                "the kernel log shows no failed reset, thermal shutdown, job timeout, reset, page fault, shader error, RAS event or throttling of the GPU in the run's window (--since); older ones are history",
                gpu_events,
            )
        },
    ]
}

fn gpu_events(ctx: &NodeContext, scope: Scope) -> Outcome {
    crate::layers::support::events::judge(ctx, ctx.gpu(scope)?, false)
}

/// amdgpu's module parameter `name`, when readable as a number.
fn amdgpu_parameter(ctx: &NodeContext, name: &str) -> Option<i64> {
    ctx.facts
        .sysroot
        .read_opt(&format!("/sys/module/amdgpu/parameters/{name}"))
        .ok()
        .flatten()
        .and_then(|t| t.trim().parse().ok())
}

/// The GPU's RAS directory, or why the check cannot look: a GPU without
/// RAS has nothing to check, but one whose RAS the driver was told to turn
/// off (`amdgpu.ras_enable=0`) hides its errors, and a `ras` that is there
/// but no directory is not read.
fn ras_of(ctx: &NodeContext, address: &str) -> Result<Ras, Verdict> {
    let sysroot = &ctx.facts.sysroot;
    ras::read(sysroot, address)
        .map_err(|e| Verdict::unverifiable(e.to_string()))?
        .ok_or_else(|| {
            let dir = format!("/sys/bus/pci/devices/{address}/ras");
            if sysroot.exists(&dir) {
                return Verdict::unverifiable(format!(
                    "{dir} is not a directory: its counters cannot be read"
                ));
            }
            match amdgpu_parameter(ctx, "ras_enable") {
                Some(0) => Verdict::unverifiable(format!(
                    "{address} has no ras/ directory because amdgpu.ras_enable=0 turned RAS off: its errors are not counted"
                )),
                _ => Verdict::not_applicable(format!(
                    "{address} has no ras/ directory: this GPU has no RAS"
                )),
            }
        })
}

/// Kernel log lines about `address` that contain any of `needles`; none
/// when the log cannot be read (the counters still tell).
fn log_lines(facts: &NodeFacts, address: &str, needles: &[&str]) -> Vec<String> {
    let Ok(log) = facts.kernel_log() else {
        return Vec::new();
    };
    log.lines
        .iter()
        .filter(|l| l.contains(address))
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            needles.iter().any(|n| lower.contains(n))
        })
        .cloned()
        .collect()
}

/// What amdgpu prints for an uncorrectable error or consumed poison
/// (amdgpu_ras.c: "uncorrectable hardware error(...) detected!", "N
/// uncorrectable hardware errors detected in <block> block", "GPU reset for
/// <block> RAS poison consumption is issued!"; kfd_int_process_v9.c:
/// "poison is consumed by client N").
const UE_LOG: &[&str] = &[
    "uncorrectable hardware error",
    "poison consumption",
    "poison is consumed",
];

/// Uncorrectable UMC errors that came through the CPU's machine-check path
/// (kernel_log::umc_mce_errors): the lines naming `address`, and those
/// naming no GPU, which concern the whole node (any of its GPUs may hold
/// the error).
fn mce_umc_lines(facts: &NodeFacts, address: &str) -> (Vec<String>, Vec<String>) {
    let Ok(log) = facts.kernel_log() else {
        return (Vec::new(), Vec::new());
    };
    let (mut named, mut unnamed) = (Vec::new(), Vec::new());
    for e in kernel_log::umc_mce_errors(&log.lines) {
        match e.address.as_deref() {
            Some(a) if a == address.to_ascii_lowercase() => named.push(e.line),
            Some(_) => {}
            None => unnamed.push(e.line),
        }
    }
    (named, unnamed)
}

fn ras_errors(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let address = gpu.physical_address();
    // The kernel log is a fact of its own: its uncorrectable errors count
    // even when the counters cannot be read. On a GPU attached to the CPU,
    // UMC errors come through the CPU's MCA and only the log tells.
    let mut logged = log_lines(&ctx.facts, address, UE_LOG);
    let (mce_named, mce_unnamed) = mce_umc_lines(&ctx.facts, address);
    logged.extend(mce_named);
    let node_wide = logged.is_empty() && !mce_unnamed.is_empty();
    logged.extend(mce_unnamed);
    let found = match ras_of(ctx, address) {
        Ok(found) => found,
        Err(skip) if logged.is_empty() => return Err(skip),
        // No RAS directory: the log alone tells.
        Err(skip) if skip.skip_reason == Some(SkipReason::NotApplicable) => Ras::default(),
        Err(skip) => Ras {
            malformed: vec![skip.message],
            ..Ras::default()
        },
    };
    let verdict_metrics = |v: Verdict| {
        let mut v = v
            .with_fact("ras_ue", found.total_ue().to_string())
            .with_fact("ras_ce", found.total_ce().to_string());
        for b in &found.blocks {
            v = v
                .with_counter(&format!("ras_ue.{}", b.block), b.ue as f64, "errors")
                .with_counter(&format!("ras_ce.{}", b.block), b.ce as f64, "errors");
        }
        v
    };
    let bad: Vec<String> = found
        .uncorrectable()
        .map(|b| format!("{}: {} uncorrectable", b.block, b.ue))
        .collect();
    if !bad.is_empty() || !logged.is_empty() {
        let mut what = if bad.is_empty() && node_wide {
            format!(
                "the kernel log reports an uncorrectable UMC error from the CPU's machine-check path that names no GPU, so it may be this one: {}",
                logged[0]
            )
        } else if bad.is_empty() {
            format!("the kernel log reports uncorrectable errors: {}", logged[0])
        } else {
            format!("RAS counts {}", bad.join(", "))
        };
        if !found.malformed.is_empty() {
            what.push_str(&format!(
                " (also unreadable or not as the driver prints it: {})",
                list(&found.malformed, 3)
            ));
        }
        return Ok(verdict_metrics(Verdict::found(
            codes::RAS_UNCORRECTABLE.finding_next(
                format!("{}: {what}", gpu.label()),
                format!(
                    "drain the GPU; read its counters (`grep . /sys/bus/pci/devices/{address}/ras/*`, `amd-smi metric --ecc`) and `dmesg | grep -i -e uncorrectable -e poison`; a reboot clears the counters, not the fault: if uncorrectable errors return, follow AMD's Service Action Guide and RMA the GPU"
                ),
            ),
        ))
        .with_output(logged.join("\n")));
    }
    if !found.malformed.is_empty() {
        return Err(Verdict::unverifiable(format!(
            "RAS counters unreadable: {}",
            found.malformed.join("; ")
        )));
    }
    Ok(verdict_metrics(Verdict::pass(format!(
        "no uncorrectable errors in {} RAS blocks ({} correctable)",
        found.blocks.len(),
        found.total_ce()
    ))))
}

/// Share of the threshold at which the driver itself warns ("RAS
/// records:%u exceeds 90%% of threshold:%d", amdgpu_ras_eeprom.c).
const NEAR_THRESHOLD: f64 = 0.9;

/// What amdgpu_ras_eeprom.c prints as retired pages near or past the
/// threshold ("exceeds 90% of threshold", "exceed threshold", "reaches
/// threshold value", "in BAD status").
const THRESHOLD_LOG: &[&str] = &["threshold", "bad status"];

/// What it prints only past the threshold: "Saved bad pages %d reaches
/// threshold value %d" (`amdgpu_ras_eeprom_update_header`), "RAS
/// records:%d exceed threshold:%d" (`amdgpu_ras_eeprom_check_err_threshold`)
/// and, before 2025, "This GPU is in BAD status".
const PAST_THRESHOLD_LOG: &[&str] = &["reaches threshold value", "exceed threshold", "bad status"];

fn ras_bad_pages(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let address = gpu.physical_address();
    // On the MI300A the driver turns retirement off itself: there is no
    // threshold to be near, and nothing the user could set.
    if bad_page_threshold::driver_disables_retirement(gpu.device_id) {
        return Err(Verdict::not_applicable(format!(
            "{address} is an MI300A: amdgpu turns bad-page retirement off on this APU itself (amdgpu_ras_check_supported: \"bad page feature is not applicable to specific app platform\")"
        )));
    }
    let found = ras_of(ctx, address)?;
    // KFD's VRAM is the partition's on a partitioned GPU: only the whole
    // GPU's counts for the -2 formula.
    let kfd_vram = gpu
        .kfd
        .as_ref()
        .filter(|_| gpu.partition_mode().is_none_or(|m| m == "SPX"))
        .and_then(|k| k.vram_bytes());
    let inputs = bad_page_threshold::inputs(
        &ctx.facts.sysroot,
        address,
        ctx.facts.drm.card_by_device.get(address).copied(),
        gpu.device_id,
        kfd_vram,
    );
    let known = bad_page_threshold::derive(&inputs);
    // A list that is there but did not read whole gives only a lower bound:
    // it still fails when that bound is at the threshold, and otherwise
    // cannot be verified.
    let (count, unread) = match (&found.bad_pages, &found.bad_pages_unread) {
        (Some(pages), _) => (pages.len() as u64, None),
        (None, Some(unread)) => (unread.valid as u64, Some(unread.why.as_str())),
        (None, None) => {
            return Err(match known {
                Known::Off => Verdict::unverifiable(format!(
                    "{address} retires no pages: amdgpu.bad_page_threshold=0 turned page retirement off"
                )),
                _ => Verdict::not_applicable(format!(
                    "{address} has no gpu_vram_bad_pages: its VRAM has no ECC"
                )),
            });
        }
    };
    let (threshold, how) = match &known {
        Known::Threshold(t) => (Some(t), t.how.clone()),
        Known::Off => (
            None,
            "bad_page_threshold=0: page retirement is off".to_string(),
        ),
        Known::Unknown(why) => (None, why.clone()),
    };
    let logged = log_lines(&ctx.facts, address, THRESHOLD_LOG);
    let logged_past = logged.iter().any(|l| {
        let l = l.to_ascii_lowercase();
        PAST_THRESHOLD_LOG.iter().any(|n| l.contains(n))
    });
    // The driver acts past the count, not at it (`ras_num_bad_pages >
    // bad_page_cnt_threshold`).
    let past = threshold.is_some_and(|t| count > t.pages) || logged_past;
    let near = threshold.is_some_and(|t| count as f64 >= NEAR_THRESHOLD * t.pages as f64);
    let at_least = if unread.is_some() { "at least " } else { "" };
    if let Some(why) = unread.filter(|_| !near && !past && logged.is_empty()) {
        return Err(Verdict::unverifiable(why.to_string()));
    }
    let log_note = logged
        .first()
        .map(|l| format!("; kernel log: {l}"))
        .unwrap_or_default();
    let v = if past {
        let (of, does) = match threshold {
            Some(t) if t.marks_bad => (
                format!(" of a threshold of {}", t.pages),
                "the driver marks the GPU bad (RMA) past it",
            ),
            Some(t) => (
                format!(" of a threshold of {}", t.pages),
                "the driver keeps the GPU running past it and asks for AMD's Service Action Guide",
            ),
            None => (String::new(), "the driver reports the threshold reached"),
        };
        Verdict::found(codes::RAS_BAD_PAGES_PAST_THRESHOLD.finding(format!(
            "{}: {at_least}{count} retired VRAM pages{of}, past it ({how}): {does}{log_note}",
            gpu.label(),
        )))
        .with_output(logged.join("\n"))
    } else if near || !logged.is_empty() {
        let of = threshold
            .map(|t| format!(" of a threshold of {}", t.pages))
            .unwrap_or_default();
        Verdict::found(codes::RAS_BAD_PAGES.finding(format!(
            "{}: {at_least}{count} retired VRAM pages{of} ({how}){log_note}",
            gpu.label(),
        )))
        .with_output(logged.join("\n"))
    } else if let Some(t) = threshold {
        Verdict::pass(format!(
            "{count} retired VRAM pages of a threshold of {} ({how})",
            t.pages
        ))
    } else if count == 0 {
        Verdict::pass(format!("no retired VRAM pages ({how})"))
    } else {
        // Pages, but nothing to hold them against: the kernel log's
        // threshold lines are printed once and rotate out of /dev/kmsg.
        return Err(Verdict::unverifiable(format!(
            "{count} retired VRAM pages and no threshold to judge them against ({how}); the kernel log has no threshold message"
        )));
    };
    let v = match threshold {
        Some(t) => v.with_fact("ras_bad_page_threshold", t.pages.to_string()),
        None => v,
    };
    // A lower bound is no count to compare across runs.
    if unread.is_some() {
        return Ok(v.with_fact("ras_bad_pages", format!("{at_least}{count}")));
    }
    Ok(v.with_fact("ras_bad_pages", count.to_string())
        .with_counter("ras_bad_pages", count as f64, "pages"))
}

/// How close to a temperature limit counts as at it: within 5 °C.
const AT_LIMIT_C: f64 = 5.0;

/// Share of the power cap that counts as at it.
const AT_CAP: f64 = 0.95;

fn thermals(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let address = gpu.physical_address();
    let sensors = hwmon::read(&ctx.facts.sysroot, address)
        .map_err(|e| Verdict::unverifiable(e.to_string()))?
        .ok_or_else(|| Verdict::not_applicable(format!("{address} has no hwmon device")))?;
    let mut hot = Vec::new();
    let mut shown = Vec::new();
    let mut metrics = Vec::new();
    // Sensors with no limit to judge them by: the reader drops limits of 0
    // or below, which an MI300 gives under SR-IOV or with PMFW older than
    // 85.69 (no CTF_LIMIT capability, smu_v13_0_6_ppt.c; amdgpu_pm.c
    // `amdgpu_hwmon_show_temp_thresh` then shows 0).
    let mut unlimited = Vec::new();
    for t in &sensors.temperatures {
        if t.crit.is_none() && t.emergency.is_none() {
            unlimited.push(t.label.clone());
        }
        shown.push(format!("{} {:.0} °C", t.label, t.celsius));
        metrics.push((format!("temp_{}", t.label), t.celsius, "°C"));
        if let Some((limit, name)) = t
            .crit
            .map(|c| (c, "critical"))
            .or(t.emergency.map(|e| (e, "emergency")))
            .filter(|(limit, _)| t.celsius >= limit - AT_LIMIT_C)
        {
            hot.push(format!(
                "{} at {:.0} °C, {name} limit {limit:.0} °C",
                t.label, t.celsius
            ));
        }
    }
    if let Some((watts, file)) = sensors.power {
        shown.push(format!("{watts:.0} W ({file})"));
        metrics.push(("power".to_string(), watts, "W"));
        // The reader drops a cap of 0 (none), as it drops limits of 0.
        if let Some(cap) = sensors.power_cap.filter(|c| watts >= AT_CAP * c) {
            hot.push(format!("drawing {watts:.0} W of its {cap:.0} W cap"));
        }
    }
    // A garbled reading (NaN, an infinity, a value past what amdgpu
    // prints) is a failing sensor or a damaged capture: the GPU may be at
    // its limit for all that can be told, so unless another sensor already
    // shows it there, the check could not look. It is never shown or
    // reported as a value.
    if hot.is_empty() && !sensors.garbled.is_empty() {
        return Err(Verdict::unverifiable(format!(
            "{} of the GPU's sensor files hold no reading: {}",
            sensors.garbled.len(),
            sensors.garbled.join("; ")
        )));
    }
    // A hwmon device whose sensors all refused to read showed nothing:
    // that is not a GPU below its limits.
    if shown.is_empty() {
        return Err(Verdict::unverifiable(format!(
            "{} reports no temperature or power",
            sensors.dir
        )));
    }
    let judged_power = sensors.power.is_some() && sensors.power_cap.is_some();
    if hot.is_empty()
        && !unlimited.is_empty()
        && unlimited.len() == sensors.temperatures.len()
        && !judged_power
    {
        return Err(Verdict::unverifiable(format!(
            "{}: {}; no temperature has a limit (temp*_crit and temp*_emergency absent or 0, as an MI300 under SR-IOV or with PMFW older than 85.69 shows them) and there is no power cap, so nothing was judged",
            sensors.dir,
            shown.join(", ")
        )));
    }
    let v = if hot.is_empty() {
        let mut message = shown.join(", ");
        if !unlimited.is_empty() {
            message.push_str(&format!(
                "; not judged, no limit exposed (temp*_crit and temp*_emergency absent or 0, as an MI300 under SR-IOV or with PMFW older than 85.69 shows them): {}",
                unlimited.join(", ")
            ));
        }
        Verdict::pass(message)
    } else {
        let mut message = format!(
            "{} before rocgate loaded it: {}",
            gpu.label(),
            hot.join("; ")
        );
        if !sensors.garbled.is_empty() {
            message.push_str(&format!("; unreadable: {}", sensors.garbled.join("; ")));
        }
        Verdict::found(codes::GPU_AT_LIMIT_IDLE.finding(message))
    };
    Ok(metrics.into_iter().fold(v, |v, (name, value, unit)| {
        v.with_reading(&name, value, unit)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{code, fails_saying, node};

    #[test]
    fn a_healthy_node_has_no_ras_errors_no_retired_pages_near_the_threshold_and_cool_gpus() {
        let n = node("mi300x-8");
        n.assert_pass_on_every_gpu(&[ras_errors, ras_bad_pages, thermals]);
        let v = n.passes(thermals, n.gpus()[0]);
        // The MI300 series has no edge sensor and only an instantaneous power
        // reading (amdgpu_pm.c, smu_v13_0_6).
        assert!(
            v.message.contains("junction") && !v.message.contains("edge"),
            "{}",
            v.message
        );
        assert!(v.message.contains("power1_input"), "{}", v.message);
    }

    #[test]
    fn a_consumer_gpu_without_ras_is_not_applicable() {
        let n = node("rx7900xtx-1");
        n.skips(ras_errors, n.gpus()[0], SkipReason::NotApplicable);
        n.passes(thermals, n.gpus()[0]);
    }

    #[test]
    fn ras_turned_off_by_the_driver_cannot_be_verified() {
        let n = node("ras-disabled");
        let v = n.skips(ras_errors, n.gpus()[0], SkipReason::Unverifiable);
        assert!(v.message.contains("amdgpu.ras_enable=0"), "{}", v.message);
    }

    #[test]
    fn uncorrectable_errors_fail_their_gpu_only_naming_block_and_count() {
        let n = node("ras-uncorrectable");
        let bad = n.gpu("0000:65:00.0");
        let v = n.verdict(ras_errors, bad);
        assert_eq!(code(&v), Some("ras-uncorrectable"), "{}", v.message);
        assert!(v.message.contains("umc: 2 uncorrectable"), "{}", v.message);
        assert!(
            v.metrics
                .iter()
                .any(|m| m.name == "ras_ce.umc" && m.value == 31.0)
        );
        for scope in n.gpus().into_iter().filter(|s| *s != bad) {
            n.passes(ras_errors, scope);
        }
    }

    #[test]
    fn pages_near_the_threshold_and_a_gpu_hot_at_rest_are_advisories_on_their_gpu() {
        fails_saying(
            "ras-bad-pages",
            ras_bad_pages,
            Scope::Gpu(5),
            codes::RAS_BAD_PAGES,
            "470 retired VRAM pages of a threshold of 512 (bad_page_threshold=512)",
        );
        fails_saying(
            "gpu-hot-idle",
            thermals,
            Scope::Gpu(2),
            codes::GPU_AT_LIMIT_IDLE,
            "junction at 97 °C, critical limit 100 °C",
        );
    }
}
