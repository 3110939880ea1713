//! The GPU behind a collective that hangs or fails: when the all-reduce
//! across every GPU does not complete, it is run again on halves of the
//! GPUs, then on pairs, each try in a fresh worker under its own short
//! deadline, and the GPU present in every failing try and absent from every
//! completing one is named. The search is bounded: it never recurses into
//! both halves (two failing halves mean more than one GPU, or the fabric),
//! so 8 GPUs take at most 8 tries. What it names keeps the all-reduce's own
//! fault: a hang is `rccl-hang-isolated`, wrong sums stay wrong sums and an
//! error its error, with the GPU the search isolated.

use crate::findings::{Category, codes};
use rocgate_harness::{Finding, Scope};
use rocgate_node::facts::NodeFacts;

/// The check whose failure starts the search.
pub const ALLREDUCE: &str = "rccl::allreduce";

/// The check whose peer copies follow a search: between the GPU it named
/// and one that completed, or among all the GPUs when none stood out.
pub const PEER_COPIES: &str = "hip::p2p_bandwidth";

/// The most tries one search makes.
pub const MAX_TRIES: usize = 12;

/// One try of the all-reduce on a subset of the GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Try {
    /// The GPUs (inventory indices) it ran on.
    pub gpus: Vec<u32>,
    /// Whether it completed with the right sums.
    pub completed: bool,
    /// What it did, for the log: `completed`, `did not complete (...)`,
    /// `failed (...)`.
    pub outcome: String,
}

impl Try {
    /// A try on `gpus` that completed (or not), said as `outcome`.
    pub fn new(gpus: &[u32], completed: bool, outcome: impl Into<String>) -> Try {
        Try {
            gpus: gpus.to_vec(),
            completed,
            outcome: outcome.into(),
        }
    }
}

/// What the search found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Narrowed {
    /// The GPUs (inventory indices) every failing try had and every
    /// completing try lacked; empty when none stands out.
    pub culprits: Vec<u32>,
    /// Each try that ran to its end (a try a signal cut short is not one).
    pub tries: Vec<Try>,
    /// Why the search stopped before it could decide, when it did.
    pub stopped: Option<String>,
}

/// Searches `gpus` for the GPU that keeps the all-reduce from completing;
/// `attempt` runs the all-reduce on a subset of two or more GPUs, or
/// returns why the search must end instead (no time left for another try,
/// an interruption): the tries made so far stand, and name a GPU only if
/// they already do.
pub fn narrow(gpus: &[u32], mut attempt: impl FnMut(&[u32]) -> Result<Try, String>) -> Narrowed {
    let mut found = Narrowed::default();
    let mut run = |set: &[u32], found: &mut Narrowed| -> Option<bool> {
        if found.tries.len() >= MAX_TRIES {
            found.stopped = Some("it made the most tries a search may".to_string());
            return None;
        }
        match attempt(set) {
            Ok(t) => {
                let ok = t.completed;
                found.tries.push(t);
                Some(ok)
            }
            Err(why) => {
                found.stopped = Some(why);
                None
            }
        }
    };
    // The suspects shrink while a known-good GPU is kept to pair them with.
    let mut suspects = gpus.to_vec();
    let mut good: Option<u32> = None;
    while suspects.len() >= 4 {
        let (a, b) = suspects.split_at(suspects.len() / 2);
        let (a, b) = (a.to_vec(), b.to_vec());
        let (Some(a_ok), Some(b_ok)) = (run(&a, &mut found), run(&b, &mut found)) else {
            return found;
        };
        match (a_ok, b_ok) {
            (false, true) => {
                good = b.first().copied();
                suspects = a;
            }
            (true, false) => {
                good = a.first().copied();
                suspects = b;
            }
            // Both complete: it takes every GPU together; both fail: more
            // than one GPU, or the fabric. Either way no single GPU.
            _ => return found,
        }
    }
    // Two or three suspects left: each with a GPU known to be good, or,
    // without one (three GPUs in all), each pair of them.
    let verdicts: Vec<(u32, bool)> = match good {
        Some(g) => suspects
            .iter()
            .map_while(|&s| run(&[s, g], &mut found).map(|ok| (s, ok)))
            .collect(),
        None => {
            let pairs: Vec<[u32; 2]> = suspects
                .iter()
                .enumerate()
                .flat_map(|(i, &x)| suspects[i + 1..].iter().map(move |&y| [x, y]))
                .collect();
            let results: Vec<([u32; 2], bool)> = pairs
                .iter()
                .map_while(|p| run(p, &mut found).map(|ok| (*p, ok)))
                .collect();
            // Guilty: in every pair that failed, in none that completed.
            suspects
                .iter()
                .map(|&s| {
                    let guilty = results.iter().all(|(p, ok)| p.contains(&s) != *ok);
                    (s, !guilty)
                })
                .collect()
        }
    };
    let failing: Vec<u32> = verdicts
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(s, _)| *s)
        .collect();
    // One GPU, not all of them: otherwise the pairs say nothing of a GPU.
    if failing.len() == 1 {
        found.culprits = failing;
    }
    found
}

/// The finding for a search that named its GPUs, or `None`. `original` is
/// the all-reduce's own finding across every GPU: when it is not a hang
/// (`timed_out` false and its code no hang's), the finding keeps it (wrong
/// sums stay a corruption, an error its error, with their words) and adds
/// the GPU the search isolated; a hang becomes `rccl-hang-isolated`.
pub fn finding(
    facts: &NodeFacts,
    narrowed: &Narrowed,
    original: Option<&Finding>,
    timed_out: bool,
) -> Option<Finding> {
    let &first = narrowed.culprits.first()?;
    let named: Vec<String> = narrowed
        .culprits
        .iter()
        .map(|&i| match facts.gpu(i) {
            Some(g) => format!("gpu{i} ({})", g.pci_address),
            None => format!("gpu{i}"),
        })
        .collect();
    let (bad, good): (Vec<&Try>, Vec<&Try>) = narrowed.tries.iter().partition(|t| !t.completed);
    let address = facts
        .gpu(first)
        .map_or_else(|| format!("gpu{first}"), |g| g.pci_address.clone());
    let evidence = format!(
        "{} tries with it failed, {} without it completed",
        bad.len(),
        good.len()
    );
    let hang = timed_out
        || original.is_none_or(|f| {
            crate::findings::lookup(&f.code).is_some_and(|c| c.category == Category::Hang)
        });
    let finding = match original {
        Some(f) if !hang => Finding {
            message: format!(
                "{}; narrowing isolated {}: {evidence}",
                f.message,
                named.join(", ")
            ),
            next_step: format!(
                "the all-reduce fails only with gpu{first}: drain it and check it alone (`rocgate run --tier standard --gpus {first}`) and its links (`amd-smi xgmi`, `dmesg | grep -i {address}`); {}",
                f.next_step
            ),
            ..f.clone()
        },
        _ => codes::RCCL_HANG_ISOLATED.finding_next(
            format!(
                "the all-reduce does not complete with {}: {evidence}",
                named.join(", "),
            ),
            format!(
                "drain gpu{first}; check it alone (`rocgate run --tier standard --gpus {first}`), its links (`amd-smi xgmi`, `dmesg | grep -i {address}`), reset it (<reset>) or power-cycle the node; if the all-reduce still hangs with it, RMA the GPU"
            ),
        ),
    };
    Some(Finding {
        blames: Some(Scope::Gpu(first)),
        ..finding
    })
}

/// The GPUs whose peer copies say whether a link is at fault: the first GPU
/// the search named and a GPU of a completing try, or all of `gpus` when
/// the search named none (a link between two GPUs fails every try that
/// holds both, so it can name neither).
pub fn peer_copy_set(gpus: &[u32], narrowed: &Narrowed) -> Vec<u32> {
    let good = narrowed
        .tries
        .iter()
        .filter(|t| t.completed)
        .flat_map(|t| &t.gpus)
        .find(|g| !narrowed.culprits.contains(g));
    match (narrowed.culprits.first(), good) {
        (Some(&culprit), Some(&good)) => vec![culprit.min(good), culprit.max(good)],
        _ => gpus.to_vec(),
    }
}

/// The tries as lines for the result's output.
pub fn log(narrowed: &Narrowed) -> String {
    let tries = narrowed.tries.iter().map(|t| {
        let gpus: Vec<String> = t.gpus.iter().map(|g| format!("gpu{g}")).collect();
        format!("all-reduce on {}: {}", gpus.join(","), t.outcome)
    });
    let stopped = narrowed
        .stopped
        .as_ref()
        .map(|why| format!("search stopped: {why}"));
    tries.chain(stopped).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hangs_with(culprits: &'static [u32]) -> impl FnMut(&[u32]) -> Result<Try, String> {
        move |set| {
            let ok = !set.iter().any(|g| culprits.contains(g));
            Ok(Try::new(
                set,
                ok,
                if ok { "completed" } else { "did not complete" },
            ))
        }
    }

    #[test]
    fn one_bad_gpu_among_eight_is_found_in_a_few_tries() {
        for bad in 0..8 {
            let culprit: &'static [u32] = Box::leak(Box::new([bad]));
            let n = narrow(&[0, 1, 2, 3, 4, 5, 6, 7], hangs_with(culprit));
            assert_eq!(n.culprits, vec![bad], "{n:?}");
            assert!(n.tries.len() <= 8, "{} tries", n.tries.len());
        }
    }

    #[test]
    fn three_gpus_are_settled_by_their_pairs() {
        let n = narrow(&[0, 1, 2], hangs_with(&[1]));
        assert_eq!(n.culprits, vec![1], "{n:?}");
    }

    #[test]
    fn two_bad_gpus_or_a_fabric_fault_name_no_single_gpu() {
        let n = narrow(&[0, 1, 2, 3, 4, 5, 6, 7], hangs_with(&[1, 6]));
        assert!(n.culprits.is_empty(), "{n:?}");
        assert_eq!(n.tries.len(), 2);
        let all = narrow(&[0, 1, 2, 3, 4, 5, 6, 7], |set| {
            Ok(Try::new(set, false, "failed"))
        });
        assert!(all.culprits.is_empty());
        let together = narrow(&[0, 1, 2, 3], |set| Ok(Try::new(set, true, "completed")));
        assert!(together.culprits.is_empty());
    }

    #[test]
    fn a_search_out_of_time_names_nobody_on_half_the_evidence() {
        let mut left = 2;
        let mut tries = hangs_with(&[3]);
        let n = narrow(&[0, 1, 2, 3, 4, 5, 6, 7], |set| {
            left -= 1;
            if left < 0 {
                Err("no time was left for another try".to_string())
            } else {
                tries(set)
            }
        });
        assert_eq!(n.tries.len(), 2, "{n:?}");
        assert!(n.culprits.is_empty(), "{n:?}");
        assert!(log(&n).ends_with("search stopped: no time was left for another try"));
    }

    #[test]
    fn the_search_is_bounded() {
        let gpus: Vec<u32> = (0..64).collect();
        let n = narrow(&gpus, hangs_with(&[37]));
        assert!(n.tries.len() <= MAX_TRIES, "{}", n.tries.len());
        assert_eq!(n.culprits, vec![37]);
    }

    #[test]
    fn peer_copies_pair_the_named_gpu_with_a_completing_one_else_take_all() {
        let named = Narrowed {
            culprits: vec![3],
            tries: vec![
                Try::new(&[0, 1, 2, 3], false, ""),
                Try::new(&[4, 5, 6, 7], true, ""),
            ],
            stopped: None,
        };
        assert_eq!(peer_copy_set(&[0, 1, 2, 3, 4, 5, 6, 7], &named), [3, 4]);
        let none = Narrowed {
            culprits: vec![],
            tries: vec![Try::new(&[0, 1], false, ""), Try::new(&[2, 3], false, "")],
            stopped: None,
        };
        assert_eq!(peer_copy_set(&[0, 1, 2, 3], &none), [0, 1, 2, 3]);
    }
}
