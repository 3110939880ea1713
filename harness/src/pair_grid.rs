//! Metrics measured between two scopes (a copy from one GPU to another),
//! gathered into grids: rows are where a measurement starts, columns
//! where it ends. The engine only groups and draws them; which scopes and
//! what was measured is the check's. How such a metric is named, and its
//! family read back, is [`Metric`]'s own (`Metric::pair_name`,
//! `Metric::family`): this module only reads metrics.

use crate::verdict::Metric;
use std::collections::BTreeMap;

/// One measured cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The value.
    pub value: f64,
    /// The least value the check accepted, when it judged against a floor.
    pub floor: Option<f64>,
}

impl Cell {
    /// Whether the value fell below the floor it was judged against.
    pub fn below_floor(&self) -> bool {
        self.floor.is_some_and(|f| self.value < f)
    }
}

/// The metrics of one family between scopes.
#[derive(Clone, Debug, PartialEq)]
pub struct PairGrid {
    /// The family (`p2p_gbps`).
    pub family: String,
    /// The unit of every cell.
    pub unit: String,
    /// Every scope named on either side, in natural order (`gpu2` before
    /// `gpu10`).
    pub scopes: Vec<String>,
    /// Cells by (from, to).
    pub cells: BTreeMap<(String, String), Cell>,
}

/// The GPU-pair grids among `metrics`, one per family, in the order families
/// first appear; metrics not between two scopes are left out.
pub fn pair_grids(metrics: &[Metric]) -> Vec<PairGrid> {
    let mut out: Vec<PairGrid> = Vec::new();
    for m in metrics {
        let Some((from, to)) = &m.between else {
            continue;
        };
        let family = m.family().to_string();
        let at = match out.iter().position(|x| x.family == family) {
            Some(i) => i,
            None => {
                out.push(PairGrid {
                    family,
                    unit: m.unit.clone(),
                    scopes: Vec::new(),
                    cells: BTreeMap::new(),
                });
                out.len() - 1
            }
        };
        let matrix = &mut out[at];
        for s in [from, to] {
            if !matrix.scopes.contains(s) {
                matrix.scopes.push(s.clone());
            }
        }
        let cell = Cell {
            value: m.value,
            floor: m.floor,
        };
        matrix.cells.insert((from.clone(), to.clone()), cell);
    }
    for m in &mut out {
        m.scopes.sort_by_key(|s| natural_key(s));
    }
    out
}

/// Sorts `gpu10` after `gpu9`: the text before the trailing digits, then
/// their value.
fn natural_key(s: &str) -> (String, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0))
}

impl PairGrid {
    /// The cell from `from` to `to`, when measured.
    pub fn cell(&self, from: &str, to: &str) -> Option<&Cell> {
        self.cells.get(&(from.to_string(), to.to_string()))
    }

    /// The grid as fixed-width text: a header row of destinations, a row
    /// per source, `-` on the diagonal, `.` where nothing was measured, and
    /// `!` after a value below its floor.
    pub fn text(&self) -> String {
        let width = self
            .cells
            .values()
            .map(|c| format!("{:.1}!", c.value).len())
            .chain(self.scopes.iter().map(String::len))
            .max()
            .unwrap_or(1)
            + 1;
        let label = self.scopes.iter().map(String::len).max().unwrap_or(0);
        let mut out = format!(
            "{} ({}), from row to column; ! below its floor\n{:label$}",
            self.family, self.unit, ""
        );
        for to in &self.scopes {
            out.push_str(&format!("{to:>width$}"));
        }
        out.push('\n');
        for from in &self.scopes {
            out.push_str(&format!("{from:<label$}"));
            for to in &self.scopes {
                let cell = match self.cell(from, to) {
                    _ if from == to => "-".to_string(),
                    Some(c) if c.below_floor() => format!("{:.1}!", c.value),
                    Some(c) => format!("{:.1}", c.value),
                    None => ".".to_string(),
                };
                out.push_str(&format!("{cell:>width$}"));
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Verdict;
    use proptest::prelude::*;

    fn measured(pairs: &[(&str, &str, f64)], floor: f64) -> Vec<Metric> {
        let mut v = Verdict::pass("");
        for &(from, to, value) in pairs {
            let m = Verdict::pass("").with_metric_against("p2p_gbps", value, "GB/s", floor);
            v = v.with_metrics_between(m.metrics, from, to);
        }
        v.with_throughput("h2d_gbps", 50.0, "GB/s").metrics
    }

    #[test]
    fn pairs_become_one_grid_in_natural_order_with_low_cells_marked() {
        let metrics = measured(&[("gpu10", "gpu2", 48.0), ("gpu2", "gpu10", 12.5)], 40.0);
        assert_eq!(metrics[0].name, "p2p_gbps.gpu10>gpu2");
        let all = pair_grids(&metrics);
        assert_eq!(all.len(), 1, "the plain metric is not a grid");
        let m = &all[0];
        assert_eq!(m.scopes, ["gpu2", "gpu10"]);
        assert!(m.cell("gpu2", "gpu10").unwrap().below_floor());
        assert!(!m.cell("gpu10", "gpu2").unwrap().below_floor());
        let text = m.text();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 4, "{text}");
        assert!(
            rows[2].starts_with("gpu2") && rows[2].ends_with("12.5!"),
            "{text}"
        );
        assert!(rows[3].contains("48.0") && rows[3].ends_with('-'), "{text}");
    }

    proptest! {
        #[test]
        fn any_metrics_give_grids_without_panicking(
            pairs in proptest::collection::vec(("\\PC{0,6}", "\\PC{0,6}", -1e9f64..1e9), 0..20)
        ) {
            let pairs: Vec<(&str, &str, f64)> =
                pairs.iter().map(|(a, b, v)| (a.as_str(), b.as_str(), *v)).collect();
            for m in pair_grids(&measured(&pairs, 1.0)) {
                let _ = m.text();
            }
        }
    }
}
