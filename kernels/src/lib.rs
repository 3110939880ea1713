//! rocgate's GPU kernels, embedded as AMDGPU code objects.
//!
//! `device/kernels.cl` holds `vector_add`, `fill`, the memory-bandwidth
//! kernels `triad` and `stream_copy`, the device-memory test's
//! `memtest_write` and `memtest_check`, and the burn-in's `burn_hash`; the build
//! compiles it for every supported gfx target when an AMDGPU-capable clang is
//! available. Checks look their GPU's target up with [`code_object`] and skip
//! with [`missing_reason`] when this build has none.

/// One compiled code object (an AMDGPU ELF shared object).
#[derive(Debug)]
pub struct CodeObject {
    /// The gfx target (`gfx942`).
    pub target: &'static str,
    /// The ELF bytes.
    pub bytes: &'static [u8],
}

/// Page-aligned storage: ELF readers and code object loaders expect aligned headers.
#[repr(C, align(4096))]
#[allow(dead_code, reason = "unused when the build found no compiler")]
struct Aligned<T: ?Sized>(T);

include!(concat!(env!("OUT_DIR"), "/code_objects.rs"));

/// `e_ident[EI_OSABI]` of an AMDGPU code object: `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;

/// `e_ident[EI_ABIVERSION]` of code object v5 (`ELFABIVERSION_AMDGPU_HSA_V5`
/// in llvm/BinaryFormat/ELF.h; v4 is 2, v6 is 4). The build pins v5 because
/// ROCr before ROCm 6.3 rejects v6.
pub const ABI_VERSION_V5: u8 = 3;

/// The code object version an AMDGPU ELF declares (two more than
/// `e_ident[EI_ABIVERSION]` for an `ELFOSABI_AMDGPU_HSA` object), if it is one.
pub fn code_object_version(elf: &[u8]) -> Option<u8> {
    if elf.len() < 16 || &elf[..4] != b"\x7fELF" || elf[7] != ELFOSABI_AMDGPU_HSA {
        return None;
    }
    elf[8].checked_add(2)
}

/// Kernel names in every code object.
pub const KERNELS: [&str; 7] = [
    "vector_add",
    "fill",
    "triad",
    "memtest_write",
    "memtest_check",
    "stream_copy",
    "burn_hash",
];

/// The code object for `target` (`gfx942`; feature suffixes such as
/// `:sramecc+:xnack-` are ignored).
pub fn code_object(target: &str) -> Option<&'static CodeObject> {
    let base = target.split(':').next().unwrap_or(target);
    CODE_OBJECTS.iter().find(|c| c.target == base)
}

/// Why this build has no code object for `target`, as a skip reason.
pub fn missing_reason(target: &str) -> String {
    let base = target.split(':').next().unwrap_or(target);
    match SKIPPED_TARGETS.iter().find(|(t, _)| *t == base) {
        Some((_, why)) => format!("no code object for {base} in this build ({why})"),
        None => format!(
            "no code object for {base} in this build (rocgate builds kernels for {})",
            CODE_OBJECTS
                .iter()
                .map(|c| c.target)
                .chain(SKIPPED_TARGETS.iter().map(|(t, _)| *t))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSymbol};

    /// `EF_AMDGPU_MACH` values (llvm/BinaryFormat/ELF.h).
    fn mach(target: &str) -> u32 {
        match target {
            "gfx908" => 0x30,
            "gfx90a" => 0x3f,
            "gfx942" => 0x4c,
            "gfx950" => 0x4f,
            "gfx1100" => 0x41,
            "gfx1101" => 0x46,
            "gfx1200" => 0x48,
            "gfx1201" => 0x4e,
            other => panic!("no EF_AMDGPU_MACH for {other}"),
        }
    }

    #[test]
    #[cfg_attr(
        rocgate_kernels_optional_and_absent,
        ignore = "no AMDGPU-capable clang at build time (ci/test installs clang-19)"
    )]
    fn code_objects_are_amdgpu_elves_for_their_target_with_every_kernel() {
        assert!(
            COMPILER.is_some(),
            "CI=true but this build found no AMDGPU clang (ci/test installs clang-19)"
        );
        for t in [
            "gfx908", "gfx90a", "gfx942", "gfx1100", "gfx1101", "gfx1200", "gfx1201",
        ] {
            assert!(code_object(t).is_some(), "{t}: {}", missing_reason(t));
        }
        for co in CODE_OBJECTS {
            let file = object::File::parse(co.bytes).unwrap();
            let object::FileFlags::Elf { e_flags, .. } = file.flags() else {
                panic!("{}: not an ELF", co.target)
            };
            // e_machine (bytes 18..20): EM_AMDGPU = 224.
            assert_eq!(
                u16::from_le_bytes([co.bytes[18], co.bytes[19]]),
                224,
                "{}",
                co.target
            );
            assert_eq!(
                e_flags & 0xff,
                mach(co.target),
                "{}: e_flags {e_flags:#x}",
                co.target
            );
            // Code object v5 (EI_ABIVERSION 3), loadable by ROCr 5.2 to 7.x.
            assert_eq!(co.bytes[7], ELFOSABI_AMDGPU_HSA, "{}: EI_OSABI", co.target);
            assert_eq!(
                co.bytes[8],
                ABI_VERSION_V5,
                "{}: EI_ABIVERSION {} is code object v{}, not v5",
                co.target,
                co.bytes[8],
                co.bytes[8] + 2
            );
            assert_eq!(code_object_version(co.bytes), Some(5));
            let names: Vec<String> = file
                .dynamic_symbols()
                .filter_map(|s| s.name().ok().map(str::to_string))
                .collect();
            for k in KERNELS {
                assert!(
                    names.iter().any(|n| *n == format!("{k}.kd")),
                    "{}: no {k}.kd in {names:?}",
                    co.target
                );
            }
        }
    }

    #[test]
    fn the_code_object_version_comes_from_the_abi_byte() {
        let mut head = [0u8; 64];
        head[..4].copy_from_slice(b"\x7fELF");
        head[7] = ELFOSABI_AMDGPU_HSA;
        for (abi, version) in [(2, 4), (3, 5), (4, 6)] {
            head[8] = abi;
            assert_eq!(code_object_version(&head), Some(version));
        }
        head[7] = 0;
        assert_eq!(code_object_version(&head), None, "not ELFOSABI_AMDGPU_HSA");
        assert_eq!(code_object_version(b"\x7fELF"), None, "truncated");
    }

    #[test]
    fn lookups_ignore_target_features_and_explain_misses() {
        if let Some(first) = CODE_OBJECTS.first() {
            assert!(code_object(&format!("{}:sramecc+:xnack-", first.target)).is_some());
        }
        assert!(code_object("gfx900").is_none());
        assert!(missing_reason("gfx900").starts_with("no code object for gfx900 in this build"));
    }
}
