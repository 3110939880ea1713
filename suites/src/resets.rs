//! GPU resets in the kernel log, as the all-reduce search needs them: a try
//! that a reset overlapped failed because of the reset, not because of the
//! GPUs it held.
//!
//! amdgpu resets a GPU of an XGMI hive together with every GPU of the hive.
//! `amdgpu_device_gpu_recover` (drivers/gpu/drm/amd/amdgpu/amdgpu_device.c,
//! ROCm/amdgpu DKMS 2025 and mainline 6.x) prints `GPU reset begin!`
//! (newer drivers add `. Source:  N`; `GPU jobs stop begin!` when
//! RAS stops jobs instead) for the GPU that triggered it, puts every device
//! of the hive on its reset list (`amdgpu_device_recovery_prepare`), and
//! `amdgpu_device_sched_resume` then prints, for each of them, `GPU reset(N)
//! succeeded!` or `GPU reset(N) failed with error E`; a recovery that fails
//! before then ends with `GPU reset end with ret = E`. Every line carries
//! `dev_info`'s device prefix, `amdgpu 0000:05:00.0: amdgpu: `. (`GPU reset
//! succeeded, trying to resume` is printed mid-reset, before the devices
//! resume, so it is no end.)

use rocgate_node::facts::gpus::Gpu;
use rocgate_node::facts::kernel_log::line_address;

/// What a reset line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A reset (or RAS's job stop) began.
    Begin,
    /// A device of the reset came back.
    Succeeded,
    /// A device of the reset did not come back, or the recovery ended in
    /// error.
    Failed,
}

/// One reset line of the kernel log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What it says.
    pub kind: Kind,
    /// The PCI device it names (`0000:05:00`, without the function), when
    /// it names one.
    pub device: Option<String>,
}

/// The reset event `line` records, if it is one.
pub fn event(line: &str) -> Option<Event> {
    let kind = if line.contains("GPU reset begin!") || line.contains("GPU jobs stop begin!") {
        Kind::Begin
    } else if let Some(at) = line.find("GPU reset(") {
        let rest = &line[at..];
        if rest.contains(") succeeded!") {
            Kind::Succeeded
        } else if rest.contains(") failed") {
            Kind::Failed
        } else {
            return None;
        }
    } else if line.contains("GPU reset end with ret") {
        Kind::Failed
    } else {
        return None;
    };
    Some(Event {
        kind,
        device: line_address(line).as_deref().map(device_part),
    })
}

/// `0000:05:00` of the address `0000:05:00.0`: a reset is the device's,
/// whichever function (or partition) the line names; lower case.
pub fn device_part(address: &str) -> String {
    address
        .rsplit_once('.')
        .map_or(address, |(device, _)| device)
        .to_ascii_lowercase()
}

/// A GPU's PCI device as reset lines name it.
fn device_of(gpu: &Gpu) -> String {
    device_part(gpu.physical_address())
}

/// Where the log stood: lines after it are new.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    len: usize,
    last: Option<String>,
}

impl Mark {
    /// The end of `lines`.
    pub fn at(lines: &[String]) -> Mark {
        Mark {
            len: lines.len(),
            last: lines.last().cloned(),
        }
    }

    /// The lines of `lines` (the log read again) written after the mark: by
    /// position when the marked line is still there, else after the last
    /// copy of it (older lines rotated out), else all of them.
    pub fn since<'a>(&self, lines: &'a [String]) -> &'a [String] {
        let Some(last) = &self.last else {
            return lines;
        };
        if self.len > 0 && lines.get(self.len - 1) == Some(last) {
            return &lines[self.len..];
        }
        match lines.iter().rposition(|l| l == last) {
            Some(i) => &lines[i + 1..],
            None => lines,
        }
    }
}

/// A reset that touched a try's GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The PCI devices its lines name, in the order they appear.
    pub devices: Vec<String>,
    /// The device whose reset began it, when its begin line was seen.
    pub trigger: Option<String>,
    /// Whether it ended: a device came back (or failed) after the last
    /// begin, or only its end was seen.
    pub ended: bool,
    /// Whether a device did not come back.
    pub failed: bool,
}

impl Overlap {
    /// The devices, for messages: the one whose reset began it and how
    /// many more its lines name, else all of them.
    pub fn named(&self) -> String {
        let others = self
            .devices
            .iter()
            .filter(|d| Some(*d) != self.trigger.as_ref())
            .count();
        match (&self.trigger, others) {
            (Some(t), 0) => t.clone(),
            (Some(t), n) => format!(
                "{t} and {n} more GPU device{}",
                if n == 1 { "" } else { "s" }
            ),
            (None, _) if self.devices.is_empty() => "a GPU".to_string(),
            (None, _) => self.devices.join(", "),
        }
    }
}

/// The reset among `lines` (new since a try began) that touched the GPUs
/// `set` (inventory indices of `gpus`): a line naming one of their PCI
/// devices, a GPU of the same XGMI hive (KFD's `hive_id`), or no device.
/// `None` when no reset touched them.
pub fn overlap(lines: &[String], gpus: &[Gpu], set: &[u32]) -> Option<Overlap> {
    let held: Vec<&Gpu> = gpus.iter().filter(|g| set.contains(&g.index)).collect();
    let hive = |g: &Gpu| g.kfd.as_ref().and_then(|k| k.hive_id).filter(|&h| h != 0);
    let touches = |device: &Option<String>| {
        let Some(device) = device else {
            return true;
        };
        gpus.iter().filter(|g| device_of(g) == *device).any(|g| {
            held.iter()
                .any(|h| h.index == g.index || hive(h).is_some_and(|x| Some(x) == hive(g)))
        }) || held.iter().any(|h| device_of(h) == *device)
    };
    let events: Vec<Event> = lines
        .iter()
        .filter_map(|l| event(l))
        .filter(|e| touches(&e.device))
        .collect();
    if events.is_empty() {
        return None;
    }
    let mut devices: Vec<String> = Vec::new();
    for d in events.iter().filter_map(|e| e.device.clone()) {
        if !devices.contains(&d) {
            devices.push(d);
        }
    }
    let ended = match events.iter().rposition(|e| e.kind == Kind::Begin) {
        Some(i) => events[i + 1..].iter().any(|e| e.kind != Kind::Begin),
        None => true,
    };
    let trigger = events
        .iter()
        .rev()
        .find(|e| e.kind == Kind::Begin)
        .and_then(|e| e.device.clone());
    Some(Overlap {
        devices,
        trigger,
        ended,
        failed: events.iter().any(|e| e.kind == Kind::Failed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn reset_lines_are_read_as_amdgpu_prints_them() {
        let begin =
            event("[ 1927.068934] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!. Source:  3")
                .unwrap();
        assert_eq!(begin.kind, Kind::Begin);
        assert_eq!(begin.device.as_deref(), Some("0000:03:00"));
        let old = event("[ 1927.068934] amdgpu 0000:C6:00.0: GPU reset begin!").unwrap();
        assert_eq!(old.device.as_deref(), Some("0000:c6:00"));
        let ok =
            event("Dec  2 kernel: [ 5.1] amdgpu 0000:05:00.0: amdgpu: GPU reset(2) succeeded!")
                .unwrap();
        assert_eq!(ok.kind, Kind::Succeeded);
        let bad =
            event("amdgpu 0000:05:00.0: amdgpu: GPU reset(2) failed with error -110 ").unwrap();
        assert_eq!(bad.kind, Kind::Failed);
        assert_eq!(
            event("amdgpu 0000:05:00.0: amdgpu: GPU reset end with ret = -22")
                .unwrap()
                .kind,
            Kind::Failed
        );
        // Mid-reset, not an end; and unrelated lines.
        assert!(
            event("amdgpu 0000:05:00.0: amdgpu: GPU reset succeeded, trying to resume").is_none()
        );
        assert!(event("amdgpu 0000:05:00.0: amdgpu: ring gfx_0.0.0 timeout").is_none());
        let bare = event("[drm] GPU reset begin!").unwrap();
        assert_eq!(bare.device, None);
    }

    #[test]
    fn a_mark_finds_new_lines_when_old_ones_rotate_out() {
        let before = lines("a\nb\nc");
        let mark = Mark::at(&before);
        assert_eq!(mark.since(&lines("a\nb\nc\nd")), ["d"]);
        assert_eq!(mark.since(&lines("c\nd\ne")), ["d", "e"]);
        assert_eq!(mark.since(&lines("x\ny")), ["x", "y"]);
        assert!(mark.since(&before).is_empty());
        assert_eq!(Mark::default().since(&lines("x")), ["x"]);
    }

    #[test]
    fn a_reset_of_the_hive_touches_every_gpu_of_it_and_only_those() {
        let node = crate::layers::fixture::node("mi300x-8");
        let facts = &node.ctx.facts;
        let gpu = |i: u32| facts.gpu(i).unwrap().physical_address().to_string();
        let begin = format!(
            "[ 9.0] amdgpu {}: amdgpu: GPU reset begin!. Source:  3",
            gpu(6)
        );
        // One hive: a reset begun on gpu6 touches a try on gpu1 and gpu2,
        // and has not ended until a device comes back.
        let o = overlap(&lines(&begin), &facts.gpus, &[1, 2]).unwrap();
        assert!(!o.ended && !o.failed, "{o:?}");
        assert_eq!(o.named(), gpu(6).trim_end_matches(".0"));
        let back = format!(
            "{begin}\n[ 9.5] amdgpu {}: amdgpu: GPU reset(1) succeeded!",
            gpu(1)
        );
        let o = overlap(&lines(&back), &facts.gpus, &[1, 2]).unwrap();
        assert!(o.ended);
        assert_eq!(
            o.named(),
            format!("{} and 1 more GPU device", gpu(6).trim_end_matches(".0"))
        );
        // A device rocgate does not know is not of the try's hive.
        let other = "amdgpu 0000:ff:1f.0: amdgpu: GPU reset begin!. Source:  3".to_string();
        assert!(overlap(&[other], &facts.gpus, &[1, 2]).is_none());
        assert!(overlap(&lines("nothing to see"), &facts.gpus, &[1]).is_none());
    }

    proptest! {
        #[test]
        fn no_line_makes_the_reader_panic(s in "\\PC*") {
            let _ = event(&s);
            let _ = overlap(std::slice::from_ref(&s), &[], &[0, 1]);
        }

        #[test]
        fn any_begun_reset_is_seen_with_its_device(bus in 0u32..256, n in 0u32..100) {
            let line = format!("[ 1.0] amdgpu 0000:{bus:02x}:00.0: amdgpu: GPU reset begin!. Source:  {n}");
            let e = event(&line).unwrap();
            prop_assert_eq!(e.kind, Kind::Begin);
            prop_assert_eq!(e.device, Some(format!("0000:{bus:02x}:00")));
        }
    }
}
