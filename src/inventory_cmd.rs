//! `rocgate inventory`: what the node has.

use crate::cli::InventoryArgs;
use crate::error::{Error, Result};
use crate::output::Output;
use crate::ui::style::Style;
use rocgate::exit::Exit;
use rocgate::inventory::{Inventory, build};
use rocgate::session::Session;
use rocgate_harness::{Scope, Status};
use std::time::Duration;

/// Prints the inventory.
pub fn run(args: &InventoryArgs) -> Result<Exit> {
    // Owns an archive's unpacked directory: dropped (and removed) when this
    // command returns, after everything that reads the node.
    let node = args.node.open()?;
    let session = Session::open(
        node.sysroot(),
        args.node.options(&args.node.config()?, None, None),
    )?;
    let mut inv = build(session.facts(), &session.ctx.matrix.drivers);
    runtime_versions(&session, &mut inv)?;
    let runtime: Vec<(String, String)> = inv
        .runtime
        .iter()
        .filter(|(k, _)| k.ends_with("_version") || k.ends_with("_library"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(node) = inv.versions.get_mut("node") {
        node.extend(runtime);
        rocgate_node::versions::add_loaded_rocm(node);
    }
    if let Some(json) = &args.json {
        let text = serde_json::to_string_pretty(&inv)
            .map_err(|e| Error::internal(format!("failed to serialise the inventory: {e}")))?;
        json.json(&text)?;
    } else {
        Output::Stdout.text(&render(&inv, Style::for_stdout()))?;
    }
    Ok(Exit::Pass)
}

/// Loads the runtime libraries in a worker (as `run` does) and records where
/// they came from and their versions.
fn runtime_versions(session: &Session, inv: &mut Inventory) -> Result<()> {
    if let Some((_, why)) = &session.ctx.runtime.disabled {
        inv.runtime.insert("note".into(), why.clone());
        return Ok(());
    }
    let interrupt = crate::signals::interrupt_flag()?;
    let pool = crate::worker_cmd::pool(session, &interrupt)?;
    // The checks that load each library and learn its version, as in `run`.
    for (check, key) in [
        ("hsa::runtime", "hsa_error"),
        ("hsa::init", "hsa_init_error"),
        ("hip::runtime", "hip_error"),
        ("rocblas::runtime", "rocblas_error"),
        ("miopen::runtime", "miopen_error"),
        ("rccl::runtime", "rccl_error"),
    ] {
        let v = pool.run(check, Scope::Node, Duration::from_secs(30));
        inv.runtime.extend(v.facts);
        if v.status != Status::Pass {
            inv.runtime.insert(key.into(), v.message);
        }
    }
    Ok(())
}

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "-".into(),
        |b| format!("{:.0} GiB", b as f64 / f64::from(1u32 << 30)),
    )
}

/// A node value for the terminal, `-` when absent.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| t(&v.to_string()))
}

/// Node text for one line of the terminal: no escape sequence (an OSC 52
/// clipboard write, a screen clear in a VBIOS string), no line break, as
/// run, doctor and health print it.
fn t(s: &str) -> String {
    rocgate_harness::output::one_line(s)
}

fn render(inv: &Inventory, style: Style) -> String {
    let n = &inv.node;
    let driver = match (&n.amdgpu_initstate, &n.amdgpu_version, &n.amdgpu_srcversion) {
        (None, _, _) => "amdgpu not loaded".to_string(),
        (Some(s), None, _) if n.amdgpu_version_error.is_some() => {
            format!("amdgpu, version unreadable ({})", t(s))
        }
        (Some(s), Some(v), _) => format!("amdgpu {} (DKMS, {})", t(v), t(s)),
        (Some(s), None, Some(src)) => {
            format!("inbox amdgpu srcversion {} ({})", t(src), t(s))
        }
        (Some(s), None, None) => format!("amdgpu ({})", t(s)),
    };
    let mut out = format!(
        "{} {} · kernel {} · {driver} · {} AMD GPUs on PCI, {} GPU scopes\n",
        style.bold("node"),
        t(&inv.sysroot),
        t(n.kernel.as_deref().unwrap_or("unknown")),
        n.pci_gpus,
        inv.gpus.len()
    );
    if !n.dkms_kernels.is_empty() {
        out.push_str(&format!(
            "DKMS amdgpu built for: {}\n",
            t(&n.dkms_kernels.join(", "))
        ));
    }
    out.push('\n');
    let head = format!(
        "{:<7}{:<15}{:<8}{:<28}{:<9}{:>5}{:>5} {:>9}  {:<20}{:<20}{:>5}{:>7}  {}",
        "gpu",
        "pci address",
        "device",
        "product",
        "gfx",
        "CUs",
        "XCC",
        "VRAM",
        "serial",
        "hive",
        "kfd",
        "render",
        "driver"
    );
    out.push_str(&style.bold(&head));
    out.push('\n');
    for g in &inv.gpus {
        out.push_str(&format!(
            "{:<7}{:<15}{:<8}{:<28}{:<9}{:>5}{:>5} {:>9}  {:<20}{:<20}{:>5}{:>7}  {}\n",
            format!("gpu{}", g.index),
            t(&g.pci_address),
            opt(g.device_id.as_deref()),
            opt(g.product.as_deref()),
            opt(g.gfx_target.as_deref()),
            opt(g.compute_units),
            opt(g.num_xcc),
            gib(g.vram_bytes),
            opt(g.unique_id.as_deref()),
            opt(g.hive_id.as_deref()),
            opt(g.kfd_node),
            opt(g.drm_render_minor),
            opt(g.driver.as_deref()),
        ));
    }
    if inv.gpus.is_empty() {
        out.push_str("(no AMD GPU found)\n");
    }
    if let Some(node) = inv.versions.get("node") {
        out.push_str("\nversions\n");
        for (k, v) in node {
            out.push_str(&format!("  {:<20} {}\n", t(k), t(v)));
        }
    }
    if let Some(first) = inv.gpus.first() {
        if let Some(v) = inv.versions.get(&format!("gpu{}", first.index)) {
            let same = inv
                .gpus
                .iter()
                .all(|g| inv.versions.get(&format!("gpu{}", g.index)) == Some(v));
            out.push_str(&format!(
                "firmware ({}):\n",
                if same {
                    "all GPUs".to_string()
                } else {
                    format!("gpu{}; `--json` has every GPU", first.index)
                }
            ));
            for (k, x) in v {
                out.push_str(&format!("  {:<20} {}\n", t(k), t(x)));
            }
        }
    }
    let health: Vec<String> = inv
        .gpus
        .iter()
        .filter(|g| !g.health.is_empty())
        .map(|g| {
            let facts: Vec<String> = g
                .health
                .iter()
                .map(|(k, v)| format!("{} {}", t(k), t(v)))
                .collect();
            format!("  gpu{:<4} {}\n", g.index, facts.join(" · "))
        })
        .collect();
    if !health.is_empty() {
        out.push_str("\nhealth (RAS errors, retired pages, °C, W)\n");
        health.iter().for_each(|l| out.push_str(l));
    }
    // Versions are listed above; what remains is why a library gave none.
    let problems: Vec<_> = inv
        .runtime
        .iter()
        .filter(|(k, _)| !k.ends_with("_version") && !k.ends_with("_library"))
        .collect();
    if !problems.is_empty() {
        out.push_str("\nruntime libraries\n");
        for (k, v) in problems {
            out.push_str(&format!("  {:<20} {}\n", t(k), t(v)));
        }
    }
    out
}
