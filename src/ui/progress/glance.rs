//! The latest telemetry of a GPU under sustained load, for the progress
//! lines: read from sysfs by the front end itself (the workers send
//! nothing until a check ends), at most every few seconds per GPU.

use rocgate_harness::Scope;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long one reading is shown before it is read again.
const FRESH: Duration = Duration::from_secs(5);

/// A reader of one scope's telemetry as a short text, and its last answers.
pub struct Glance {
    read: Box<dyn Fn(Scope) -> Option<String>>,
    last: RefCell<HashMap<Scope, (Instant, Option<String>)>>,
}

impl std::fmt::Debug for Glance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Glance").finish_non_exhaustive()
    }
}

impl Glance {
    /// A glance through `read`, which says a scope's telemetry now (or
    /// nothing, for a scope without any).
    pub fn new(read: impl Fn(Scope) -> Option<String> + 'static) -> Glance {
        Glance {
            read: Box::new(read),
            last: RefCell::new(HashMap::new()),
        }
    }

    /// `scope`'s telemetry as of at most [`FRESH`] before `now`.
    pub fn at(&self, scope: Scope, now: Instant) -> Option<String> {
        let mut last = self.last.borrow_mut();
        match last.get(&scope) {
            Some((when, text)) if now.saturating_duration_since(*when) < FRESH => text.clone(),
            _ => {
                let text = (self.read)(scope);
                last.insert(scope, (now, text.clone()));
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_reading_is_kept_for_a_few_seconds_per_scope() {
        let reads = Rc::new(std::cell::Cell::new(0));
        let counted = Rc::clone(&reads);
        let g = Glance::new(move |s| {
            counted.set(counted.get() + 1);
            matches!(s, Scope::Gpu(_)).then(|| format!("{} read {}", s.label(), counted.get()))
        });
        let t = Instant::now();
        assert_eq!(g.at(Scope::Gpu(1), t).as_deref(), Some("gpu1 read 1"));
        assert_eq!(
            g.at(Scope::Gpu(1), t + Duration::from_secs(2)).as_deref(),
            Some("gpu1 read 1")
        );
        assert_eq!(g.at(Scope::Node, t), None);
        assert_eq!(
            g.at(Scope::Gpu(1), t + FRESH).as_deref(),
            Some("gpu1 read 3")
        );
        assert_eq!(reads.get(), 3);
    }
}
