//! Property test: whatever bytes a node's files hold, discovery and every
//! check return values; nothing panics (a panicking check would show up as
//! `crash`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use rocgate_harness::{ExecOptions, Status, Tier, execute, plan};
use rocgate_node::Sysroot;
use rocgate_suites::{NodeContext, RunOptions, registry};
use std::sync::Arc;

/// Files the node layers read, relative to the sysroot.
const TARGETS: &[&str] = &[
    "sys/class/kfd/kfd/topology/nodes/1/properties",
    "sys/class/kfd/kfd/topology/nodes/1/gpu_id",
    "sys/class/kfd/kfd/topology/nodes/1/mem_banks/0/properties",
    "sys/class/kfd/kfd/topology/nodes/1/io_links/0/properties",
    "sys/class/kfd/kfd/topology/generation_id",
    "sys/devices/pci0000:00/0000:03:00.0/vendor",
    "sys/devices/pci0000:00/0000:03:00.0/device",
    "sys/devices/pci0000:00/0000:03:00.0/class",
    "sys/devices/pci0000:00/0000:03:00.0/current_link_width",
    "sys/devices/pci0000:00/0000:03:00.0/fw_version/mec_fw_version",
    "sys/devices/pci0000:00/0000:03:00.0/vbios_version",
    "sys/module/amdgpu/initstate",
    "sys/module/amdgpu/version",
    "proc/sys/kernel/osrelease",
    "proc/cmdline",
    "proc/modules",
    "etc/group",
    "var/log/kern.log",
    "rocgate-capture.toml",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn garbage_in_any_file_never_panics(target in 0..TARGETS.len(), bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("node");
        rocgate_fixtures::scenario("rx7900xtx-1").unwrap().spec.write(&root).unwrap();
        std::fs::write(root.join(TARGETS[target]), &bytes).unwrap();
        match NodeContext::open(Sysroot::at(&root), RunOptions::default(), None) {
            // A malformed capture record is a configuration error, reported as such.
            Err(e) => prop_assert!(matches!(&e, rocgate_suites::context::OpenError::Capture(m) if m.contains("rocgate-capture.toml")), "{}", e),
            Ok(ctx) => {
                let checks = registry();
                let gpus = ctx.selected_gpus();
                let plan = plan(&checks, &gpus, Tier::Quick).unwrap();
                let results = execute(&plan, Arc::new(ctx), &ExecOptions::default(), |_| {});
                for r in &results {
                    prop_assert!(r.status != Status::Crash, "{} crashed: {}", r.test_id, r.message);
                    if r.status == Status::Fail {
                        prop_assert!(r.finding.is_some(), "{} failed without a finding", r.test_id);
                    }
                }
            }
        }
    }
}
