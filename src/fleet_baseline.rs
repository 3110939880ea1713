//! `rocgate fleet baseline`: a thresholds file whose floors come from the
//! healthy fleet. Each floor is one GPU model's median in one partition
//! mode for one metric, with a margin that puts the least accepted value K
//! robust standard deviations (1.4826 MAD) below it, or at least
//! `--min-margin` below it: a GPU that the fleet's own spread would never
//! produce fails, one within it passes. Every row says how many nodes it
//! came from, their median and MAD, and when; metrics the fleet did not
//! measure keep the built-in floors after the fleet's.

use crate::cli::FleetBaselineArgs;
use crate::error::{Error, Result};
use rocgate::exit::Exit;
use rocgate_harness::fleet::MetricSpread;
use rocgate_harness::fleet::digest::Side;
use rocgate_suites::thresholds::{self, Floor, Thresholds};

/// The largest margin written: a floor at a tenth of the median judges
/// nothing a fleet would want judged.
const MAX_MARGIN: f64 = 0.9;

/// Runs `fleet baseline`.
pub fn run(args: &FleetBaselineArgs) -> Result<Exit> {
    let now = chrono::Utc::now().fixed_offset();
    let options = crate::fleet_cmd::options(&args.read)?;
    let fleet = crate::fleet_cmd::read_fleet(&args.read.inputs, options, now)?;
    for r in &fleet.not_read {
        errln!("rocgate: not read: {}", r.why);
    }
    let healthy = fleet.nodes.iter().filter(|n| n.passed).count();
    let date = now.format("%Y-%m-%d").to_string();
    let rule = Rule {
        mads: args.mads,
        min_margin: args.min_margin,
        min_nodes: args.min_nodes,
    };
    let floors: Vec<Floor> = fleet
        .metrics
        .iter()
        .filter_map(|m| rule.floor(m, &date))
        .collect();
    if floors.is_empty() {
        return Err(Error::usage(format!(
            "no floor could be made: no metric a floor may name ({}) was measured on {} healthy nodes of one GPU model (of {} nodes read, {healthy} passed); floors come from the extended tier: run `rocgate run --tier extended --json NODE.json` on the fleet",
            thresholds::METRICS.join(", "),
            args.min_nodes,
            fleet.nodes.len()
        )));
    }
    let builtin = Thresholds::builtin().map_err(|e| Error::internal(e.to_string()))?;
    let made = floors.len();
    let text = render(builtin, floors, healthy, fleet.nodes.len(), &date, &rule)?;
    args.out.text(&text)?;
    errln!(
        "rocgate: {made} floors from {healthy} healthy nodes (of {} read); use them with `rocgate run --thresholds FILE`",
        fleet.nodes.len()
    );
    Ok(Exit::Pass)
}

/// How a floor is made from a metric's spread.
struct Rule {
    mads: f64,
    min_margin: f64,
    min_nodes: usize,
}

impl Rule {
    /// The floor for `m`, when it is a metric a floor may name, of one GPU
    /// model in one partition mode, measured on enough healthy nodes.
    fn floor(&self, m: &MetricSpread, date: &str) -> Option<Floor> {
        let one_kind = !m.model.contains(", ") && !m.partition.contains(", ");
        let usable = m.bad_side == Side::Low
            && thresholds::METRICS.contains(&m.metric.as_str())
            && one_kind
            && m.healthy.nodes >= self.min_nodes
            && m.healthy.median > 0.0;
        if !usable {
            return None;
        }
        let spread = self.mads * m.healthy.sigma() / m.healthy.median;
        let margin = spread.max(self.min_margin).min(MAX_MARGIN);
        // Three significant figures are what a fleet's spread supports.
        let median = (m.healthy.median * 1000.0).round() / 1000.0;
        let margin = (margin * 10_000.0).round() / 10_000.0;
        Some(Floor {
            gpu: m.model.clone(),
            metric: m.metric.clone(),
            value: median,
            margin: Some(margin),
            partition: if m.partition.is_empty() {
                "SPX".to_string()
            } else {
                m.partition.clone()
            },
            workload: Some(format!("as rocgate measures it, at the {} tier", m.tier)),
            source: format!(
                "rocgate fleet baseline {date}: median of {} values on {} healthy nodes, MAD {:.4} {}; margin = max({} x 1.4826 MAD, {})",
                m.healthy.samples,
                m.healthy.nodes,
                m.healthy.mad,
                m.unit,
                self.mads,
                self.min_margin
            ),
        })
    }
}

/// The thresholds file: the built-in one with the fleet's floors first
/// (the first matching row wins) and the built-in rows they do not cover
/// after them, read back before it is written, so a file `run` would refuse
/// is never written.
fn render(
    mut base: Thresholds,
    floors: Vec<Floor>,
    healthy: usize,
    nodes: usize,
    date: &str,
    rule: &Rule,
) -> Result<String> {
    let covered = |f: &Floor| {
        floors.iter().any(|g| {
            g.metric == f.metric && g.gpu == f.gpu && g.partition.eq_ignore_ascii_case(&f.partition)
        })
    };
    base.floors.retain(|f| !covered(f));
    let mut all = floors;
    all.append(&mut base.floors);
    base.floors = all;
    let body = toml::to_string(&base)
        .map_err(|e| Error::internal(format!("failed to write the thresholds as TOML: {e}")))?;
    let text = format!(
        "# rocgate thresholds from `rocgate fleet baseline` ({date}): {healthy} healthy nodes of {nodes}.\n\
         # Each fleet floor is the healthy nodes' median with a margin of\n\
         # max({} x 1.4826 MAD, {}) below it; built-in floors follow for what the\n\
         # fleet did not measure. Use with `rocgate run --thresholds FILE`.\n\n{body}",
        rule.mads, rule.min_margin
    );
    Thresholds::parse(&text, "the generated thresholds")
        .map_err(|e| Error::internal(format!("the baseline would not read back: {e}")))?;
    Ok(text)
}
