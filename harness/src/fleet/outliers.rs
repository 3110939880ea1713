//! Outliers: every compared metric's distribution over the fleet, per GPU
//! model, partition mode and tier, with robust statistics (median, MAD)
//! over the nodes that passed, and the GPUs and nodes far on its bad side,
//! whether or not they pass their floors.

use super::digest::{GroupKey, Samples, Side};
use serde::Serialize;
use std::collections::HashMap;

/// How far from the fleet a value must be to be called an outlier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutlierRule {
    /// How many robust standard deviations (1.4826 MAD) on the bad side.
    pub mads: f64,
    /// And at least this share of the median (0.05 = 5% slower), so a
    /// fleet of near-identical GPUs does not call 1% an outlier.
    pub min_shortfall: f64,
    /// The least number of healthy nodes a metric needs to be judged.
    pub min_nodes: usize,
}

impl Default for OutlierRule {
    fn default() -> Self {
        OutlierRule {
            mads: 4.0,
            min_shortfall: 0.05,
            min_nodes: 5,
        }
    }
}

/// The scale factor that makes a MAD estimate a normal distribution's
/// standard deviation.
const MAD_TO_SIGMA: f64 = 1.4826;

/// How many bins each histogram has.
const BINS: usize = 24;

/// One sample kept: which node, where on it, the value. Zeros are only
/// counted (most error counters of a healthy fleet read 0), so a fleet's
/// counters cost memory only where they are not.
#[derive(Clone, Copy)]
struct Kept {
    node: u32,
    subject: u32,
    value: f64,
}

#[derive(Default)]
struct Group {
    kept: Vec<Kept>,
    zeros: usize,
    healthy_zeros: usize,
    nodes: usize,
    healthy_nodes: usize,
    last_node: Option<u32>,
}

/// The fleet's metrics, gathered one node at a time.
#[derive(Default)]
pub(super) struct MetricTally {
    keys: Vec<GroupKey>,
    ids: HashMap<GroupKey, u32>,
    groups: Vec<Group>,
    subjects: Vec<String>,
    subject_ids: HashMap<String, u32>,
    /// Per node, whether it passed (its samples count for the statistics).
    passed: Vec<bool>,
}

impl MetricTally {
    /// Adds node `node`'s samples (nodes are added in order, once each).
    pub(super) fn add(&mut self, node: u32, passed: bool, samples: Samples) {
        if self.passed.len() <= node as usize {
            self.passed.resize(node as usize + 1, false);
        }
        self.passed[node as usize] = passed;
        // The report's own groups and subjects, each looked up once.
        let groups: Vec<u32> = samples
            .groups
            .into_iter()
            .map(|key| {
                let g = super::drift::intern(&mut self.keys, &mut self.ids, key);
                if g as usize == self.groups.len() {
                    self.groups.push(Group::default());
                }
                g
            })
            .collect();
        let subjects: Vec<u32> = samples
            .subjects
            .into_iter()
            .map(|subject| super::drift::intern(&mut self.subjects, &mut self.subject_ids, subject))
            .collect();
        for s in samples.values {
            let (Some(&g), Some(&subject)) = (
                groups.get(s.group as usize),
                subjects.get(s.subject as usize),
            ) else {
                continue;
            };
            let group = &mut self.groups[g as usize];
            if group.last_node != Some(node) {
                group.last_node = Some(node);
                group.nodes += 1;
                group.healthy_nodes += usize::from(passed);
            }
            if s.value == 0.0 {
                group.zeros += 1;
                group.healthy_zeros += usize::from(passed);
                continue;
            }
            group.kept.push(Kept {
                node,
                subject,
                value: s.value,
            });
        }
    }

    /// Each metric's spread and outliers, `names` the nodes' names in the
    /// order they were added; also, per node, the metrics it is an
    /// outlier in.
    pub(super) fn finish(
        self,
        names: &[&str],
        rule: &OutlierRule,
    ) -> (Vec<MetricSpread>, Vec<Vec<String>>) {
        let mut per_node: Vec<Vec<String>> = vec![Vec::new(); names.len()];
        let mut out = Vec::new();
        for (key, group) in self.keys.into_iter().zip(self.groups) {
            let healthy: Vec<f64> = group
                .kept
                .iter()
                .filter(|k| self.passed.get(k.node as usize).copied().unwrap_or(false))
                .map(|k| k.value)
                .collect();
            let stats = Stats::of(healthy, group.healthy_zeros, group.healthy_nodes);
            let all: Vec<f64> = group.kept.iter().map(|k| k.value).collect();
            let (min, max) = bounds(&all, group.zeros > 0);
            let judged = group.healthy_nodes >= rule.min_nodes;
            let mut outliers = Vec::new();
            if judged {
                for k in &group.kept {
                    if let Some(mads) = stats.outlier(k.value, key.side, rule) {
                        let node = names.get(k.node as usize).copied().unwrap_or("?");
                        let subject = self.subjects[k.subject as usize].clone();
                        let tag = format!("{} {subject}", key.metric);
                        if let Some(list) = per_node.get_mut(k.node as usize) {
                            if !list.contains(&tag) {
                                list.push(tag);
                            }
                        }
                        outliers.push(Outlier {
                            node: node.to_string(),
                            subject,
                            value: k.value,
                            mads,
                            off_median: if stats.median != 0.0 {
                                Some((k.value - stats.median) / stats.median)
                            } else {
                                None
                            },
                        });
                    }
                }
                outliers.sort_by(|a, b| b.mads.total_cmp(&a.mads));
            }
            out.push(MetricSpread {
                tier: key.tier,
                model: key.model,
                partition: key.partition,
                metric: key.metric,
                unit: key.unit,
                bad_side: key.side,
                samples: group.kept.len() + group.zeros,
                nodes: group.nodes,
                healthy: stats,
                min,
                max,
                histogram: histogram(&group.kept, group.zeros, min, max),
                judged,
                outliers,
            });
        }
        out.sort_by(|a, b| {
            (&a.tier, &a.model, &a.partition, &a.metric).cmp(&(
                &b.tier,
                &b.model,
                &b.partition,
                &b.metric,
            ))
        });
        (out, per_node)
    }
}

fn bounds(values: &[f64], zero: bool) -> (f64, f64) {
    let mut lo = if zero { 0.0 } else { f64::INFINITY };
    let mut hi = if zero { 0.0 } else { f64::NEG_INFINITY };
    for &v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi { (0.0, 0.0) } else { (lo, hi) }
}

fn histogram(kept: &[Kept], zeros: usize, min: f64, max: f64) -> Vec<usize> {
    let bins = if max > min { BINS } else { 1 };
    let mut counts = vec![0usize; bins];
    let bin = |v: f64| {
        if max > min {
            (((v - min) / (max - min) * bins as f64) as usize).min(bins - 1)
        } else {
            0
        }
    };
    if zeros > 0 {
        counts[bin(0.0)] += zeros;
    }
    for k in kept {
        counts[bin(k.value)] += 1;
    }
    counts
}

/// Robust statistics of the healthy fleet's values of one metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Stats {
    /// How many values (GPUs, links or nodes) of nodes that passed.
    pub samples: usize,
    /// How many nodes they came from.
    pub nodes: usize,
    /// Their median.
    pub median: f64,
    /// Their median absolute deviation from the median.
    pub mad: f64,
}

impl Stats {
    /// Of `values` and `zeros` more zeros, from `nodes` nodes.
    fn of(mut values: Vec<f64>, zeros: usize, nodes: usize) -> Stats {
        values.extend(std::iter::repeat_n(0.0, zeros));
        if values.is_empty() {
            return Stats::default();
        }
        let middle = median(&mut values);
        let mut dev: Vec<f64> = values.iter().map(|v| (v - middle).abs()).collect();
        Stats {
            samples: values.len(),
            nodes,
            median: middle,
            mad: median(&mut dev),
        }
    }

    /// The robust standard deviation (1.4826 MAD).
    pub fn sigma(&self) -> f64 {
        MAD_TO_SIGMA * self.mad
    }

    /// How many robust standard deviations `value` is on the bad side,
    /// when that makes it an outlier by `rule`.
    fn outlier(&self, value: f64, side: Side, rule: &OutlierRule) -> Option<f64> {
        let off = match side {
            Side::Low => self.median - value,
            Side::High => value - self.median,
        };
        // A counter's least step is 1; a throughput's the rule's share.
        let least = match side {
            Side::Low => rule.min_shortfall * self.median.abs(),
            Side::High => (rule.min_shortfall * self.median.abs()).max(1.0),
        };
        if off <= 0.0 || off < least || off <= rule.mads * self.sigma() {
            return None;
        }
        Some(if self.sigma() > 0.0 {
            off / self.sigma()
        } else {
            f64::INFINITY
        })
    }
}

/// The median of `values` (the mean of the middle two of an even count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// One metric across the fleet.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MetricSpread {
    /// The tier it was measured at.
    pub tier: String,
    /// The GPU model.
    pub model: String,
    /// The partition mode (empty where reports do not say).
    pub partition: String,
    /// The metric (a GPU-pair metric's family: `p2p_gbps`).
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which side is worse: `low` (a throughput) or `high` (errors).
    pub bad_side: Side,
    /// How many values the fleet has of it.
    pub samples: usize,
    /// From how many nodes.
    pub nodes: usize,
    /// The healthy nodes' statistics, which outliers are judged against.
    pub healthy: Stats,
    /// The least value.
    pub min: f64,
    /// The greatest value.
    pub max: f64,
    /// How many values fall in each of equal bins from `min` to `max`.
    pub histogram: Vec<usize>,
    /// Whether enough healthy nodes had it to judge outliers.
    pub judged: bool,
    /// The values far on the bad side, farthest first.
    pub outliers: Vec<Outlier>,
}

impl MetricSpread {
    /// What it is, for people: `gemm_tflops.fp16 (AMD Instinct MI300X SPX, extended)`.
    pub fn title(&self) -> String {
        let mut on = self.model.clone();
        if !self.partition.is_empty() {
            on = format!("{on} {}", self.partition);
        }
        format!("{} ({on}, {})", self.metric, self.tier)
    }
}

/// A value far on its metric's bad side.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Outlier {
    /// The node.
    pub node: String,
    /// Where on it (`gpu3`, `gpu0>gpu1`, `node`).
    pub subject: String,
    /// The value.
    pub value: f64,
    /// How many robust standard deviations from the median (infinite when
    /// the healthy fleet has no spread at all).
    #[schemars(with = "Option<f64>")]
    #[serde(serialize_with = "finite_or_null")]
    pub mads: f64,
    /// Its distance from the median, as a share of it (-0.2 = 20% below);
    /// none when the median is zero (an error counter most nodes never
    /// count), where a share means nothing.
    pub off_median: Option<f64>,
}

fn finite_or_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sample: (metric, side, subject, value).
    type One = (String, Side, String, f64);

    fn sample(metric: &str, side: Side, subject: &str, value: f64) -> One {
        (metric.into(), side, subject.into(), value)
    }

    /// A report's samples, of an extended run of MI300Xs in SPX.
    fn samples(all: impl IntoIterator<Item = One>) -> Samples {
        let mut out = Samples::default();
        for (metric, side, subject, value) in all {
            let group = crate::fleet::digest::GroupRef {
                tier: "extended",
                model: "MI300X",
                partition: "SPX",
                metric: &metric,
                unit: "TFLOP/s",
                side,
            };
            out.push(group, &subject, value);
        }
        out
    }

    #[test]
    fn one_gpu_slower_than_its_siblings_is_named_even_when_the_fleet_does_not_spread() {
        let mut t = MetricTally::default();
        let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        for n in 0..10u32 {
            let all = (0..8)
                .map(|g| {
                    let v = if n == 4 && g == 3 {
                        575.0
                    } else {
                        719.0 + f64::from(g % 2)
                    };
                    sample("gemm_tflops.fp16", Side::Low, &format!("gpu{g}"), v)
                })
                .chain([sample(
                    "ras_ue",
                    Side::High,
                    "gpu0",
                    if n == 7 { 2.0 } else { 0.0 },
                )]);
            t.add(n, n != 9, samples(all));
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (spreads, per_node) = t.finish(&names, &OutlierRule::default());
        let gemm = &spreads[0];
        assert_eq!(gemm.metric, "gemm_tflops.fp16");
        assert_eq!((gemm.samples, gemm.nodes, gemm.healthy.nodes), (80, 10, 9));
        assert_eq!(gemm.healthy.median, 719.0);
        assert_eq!(gemm.outliers.len(), 1);
        let o = &gemm.outliers[0];
        assert_eq!(
            (o.node.as_str(), o.subject.as_str(), o.value),
            ("n4", "gpu3", 575.0)
        );
        assert!((o.off_median.unwrap() + 0.2).abs() < 0.001, "{o:?}");
        assert_eq!(gemm.histogram.iter().sum::<usize>(), 80);
        assert_eq!((gemm.min, gemm.max), (575.0, 720.0));
        let ras = &spreads[1];
        assert_eq!((ras.samples, ras.healthy.median), (10, 0.0));
        assert_eq!(ras.outliers[0].node, "n7");
        assert_eq!(per_node[4], ["gemm_tflops.fp16 gpu3"]);
        assert_eq!(per_node[7], ["ras_ue gpu0"]);
        assert!(per_node[0].is_empty());
    }

    #[test]
    fn a_small_fleet_or_a_small_shortfall_is_not_called_an_outlier() {
        let mut t = MetricTally::default();
        for n in 0..4u32 {
            t.add(
                n,
                true,
                samples([sample(
                    "h2d_gbps",
                    Side::Low,
                    "gpu0",
                    if n == 0 { 10.0 } else { 50.0 },
                )]),
            );
        }
        let (spreads, _) = t.finish(&["a", "b", "c", "d"], &OutlierRule::default());
        assert!(!spreads[0].judged && spreads[0].outliers.is_empty());
        // 3% slower than identical siblings: far in MADs, but within the
        // shortfall a fleet tolerates.
        let mut t = MetricTally::default();
        for n in 0..8u32 {
            t.add(
                n,
                true,
                samples([sample(
                    "h2d_gbps",
                    Side::Low,
                    "gpu0",
                    if n == 0 { 48.5 } else { 50.0 },
                )]),
            );
        }
        let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let (spreads, _) = t.finish(&names, &OutlierRule::default());
        assert!(spreads[0].judged && spreads[0].outliers.is_empty());
        // Faster is never worse.
        let mut t = MetricTally::default();
        for n in 0..8u32 {
            t.add(
                n,
                true,
                samples([sample(
                    "h2d_gbps",
                    Side::Low,
                    "gpu0",
                    if n == 0 { 90.0 } else { 50.0 },
                )]),
            );
        }
        let (spreads, _) = t.finish(&names, &OutlierRule::default());
        assert!(spreads[0].outliers.is_empty());
    }
}
