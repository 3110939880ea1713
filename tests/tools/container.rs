//! The container image as far as a machine without a container engine can
//! hold it: the Containerfile read by a real parser (PyPI
//! `dockerfile-parse`), the binary's needs checked against the slim runtime
//! it promises (glibc alone, no newer than 2.34), and the binary run in an
//! otherwise empty root that holds only it and those libraries, as the
//! runtime stage does.
//!
//! A trial whose tool is missing is ignored with the reason; under CI=true
//! it fails instead (ci/test installs every tool).

use crate::util::{check, have, missing, node, repo, rocgate_bin};
use libtest_mimic::{Completion, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::ignorable_test(
            "the_containerfile_builds_with_kernels_and_ships_the_binary_alone",
            containerfile,
        ),
        Trial::ignorable_test("the_binary_needs_only_glibc_2_34_or_older", binary_needs),
        Trial::ignorable_test(
            "the_binary_runs_in_a_root_holding_only_it_and_glibc",
            empty_root,
        ),
    ]
}

fn output(cmd: &mut Command) -> Result<String, Failed> {
    let out = cmd.stderr(Stdio::piped()).output()?;
    check(
        out.status.success(),
        format!(
            "{cmd:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    )?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The Containerfile's instructions as `dockerfile-parse` reads them:
/// `(instruction, value)` per line, stages in order.
fn instructions() -> Result<Vec<(String, String)>, Failed> {
    let script = "import json, sys\n\
                  from dockerfile_parse import DockerfileParser\n\
                  p = DockerfileParser(fileobj=open(sys.argv[1], 'rb'))\n\
                  print(json.dumps([[i['instruction'], i['value']] for i in p.structure]))";
    let text = output(
        Command::new("python3")
            .args(["-c", script])
            .arg(repo().join("Containerfile")),
    )?;
    Ok(serde_json::from_str(&text)?)
}

fn containerfile() -> Result<Completion, Failed> {
    let parser = Command::new("python3")
        .args(["-c", "import dockerfile_parse"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !parser {
        return missing("Python's dockerfile-parse is not installed");
    }
    let steps = instructions()?;
    let froms: Vec<&str> = steps
        .iter()
        .filter(|(i, _)| i == "FROM")
        .map(|(_, v)| v.as_str())
        .collect();
    check(
        froms.len() == 2 && froms[0].ends_with(" AS build") && froms[1] == "${RUNTIME}",
        format!("stages {froms:?}: expected a build stage and the runtime"),
    )?;
    let runtime_default = steps
        .iter()
        .find(|(i, v)| i == "ARG" && v.starts_with("RUNTIME="))
        .map(|(_, v)| v.clone());
    check(
        runtime_default
            .as_deref()
            .is_some_and(|v| v.ends_with("-slim")),
        format!("the runtime base defaults to {runtime_default:?}, not a slim image"),
    )?;
    let build_stage: Vec<&(String, String)> = steps
        .iter()
        .skip_while(|(i, _)| i != "FROM")
        .skip(1)
        .take_while(|(i, _)| i != "FROM")
        .collect();
    let runs: String = build_stage
        .iter()
        .filter(|(i, _)| i == "RUN")
        .map(|(_, v)| v.as_str())
        .collect();
    // gfx950 (MI355X) needs LLVM 20: an older clang builds an image
    // without its kernels.
    check(
        runs.contains("clang-20") && runs.contains("lld-20"),
        "the build stage does not install clang-20 and lld-20: the image would carry no gfx950 kernels",
    )?;
    // A third-party repository is trusted only under its own key, checked
    // against the fingerprint it publishes.
    check(
        runs.contains("signed-by=/etc/apt/keyrings/apt.llvm.org.asc")
            && runs.contains("gpg --show-keys --with-colons")
            && steps.iter().any(|(i, v)| {
                i == "ARG" && v == "LLVM_KEY_FINGERPRINT=6084F3CF814B57C1CF12EFD515CF4D18AF4F7421"
            }),
        "apt.llvm.org is not held to its key's fingerprint",
    )?;
    check(
        runs.contains("cargo build --release --locked"),
        "the build stage does not build with the lock file",
    )?;
    let runtime_stage: Vec<&(String, String)> = steps
        .iter()
        .skip_while(|(i, v)| !(i == "FROM" && v == "${RUNTIME}"))
        .skip(1)
        .collect();
    let kinds: Vec<&str> = runtime_stage.iter().map(|(i, _)| i.as_str()).collect();
    check(
        kinds == ["COPY", "ENTRYPOINT", "CMD"],
        format!("the runtime stage does {kinds:?}; it should copy the binary and nothing else"),
    )?;
    check(
        runtime_stage[0].1 == "--from=build /rocgate /usr/local/bin/rocgate"
            && runtime_stage[1].1.contains("/usr/local/bin/rocgate"),
        format!("the runtime stage: {runtime_stage:?}"),
    )?;
    // What `COPY . .` sends: build output would make the context huge.
    let ignored = std::fs::read_to_string(repo().join(".dockerignore"))?;
    check(
        ignored.lines().any(|l| l.trim() == "target"),
        ".dockerignore does not leave out target/",
    )?;
    Ok(Completion::Completed)
}

/// The libraries a slim Debian or Ubuntu base always has: glibc's and
/// libgcc's (both essential packages).
const GLIBC_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
];

/// The newest glibc among the oldest bases ROCm images use (RHEL 9: 2.34;
/// Ubuntu 22.04 has 2.35).
const NEWEST_GLIBC: (u32, u32) = (2, 34);

fn binary_needs() -> Result<Completion, Failed> {
    if !have("readelf") {
        return missing("readelf (binutils) is not installed");
    }
    let dynamic = output(Command::new("readelf").arg("-d").arg(rocgate_bin()))?;
    let needed: Vec<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    check(!needed.is_empty(), "readelf lists no NEEDED library")?;
    let foreign: Vec<&&str> = needed.iter().filter(|l| !GLIBC_LIBS.contains(l)).collect();
    check(
        foreign.is_empty(),
        format!(
            "the binary needs {foreign:?}, which a slim base lacks; load it at run time instead"
        ),
    )?;
    let versions = output(Command::new("readelf").arg("-V").arg(rocgate_bin()))?;
    let newest = versions
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()?.unwrap_or(0)))
        })
        .max();
    check(
        newest.is_some_and(|v| v <= NEWEST_GLIBC),
        format!("the binary needs glibc {newest:?}, newer than {NEWEST_GLIBC:?}"),
    )?;
    Ok(Completion::Completed)
}

fn empty_root() -> Result<Completion, Failed> {
    if !nix::unistd::Uid::effective().is_root() {
        return missing("chroot needs root");
    }
    if !have("ldd") || !have("chroot") {
        return missing("ldd or chroot is not installed");
    }
    let root = tempfile::tempdir()?;
    let put = |from: &Path, to: &str| -> Result<(), Failed> {
        let dest = root.path().join(to.trim_start_matches('/'));
        std::fs::create_dir_all(dest.parent().unwrap())?;
        std::fs::copy(from, &dest)?;
        Ok(())
    };
    put(rocgate_bin(), "/usr/local/bin/rocgate")?;
    // Each library where the loader looks for it (the paths ldd prints),
    // and nothing else of this machine.
    let libs = output(Command::new("ldd").arg(rocgate_bin()))?;
    for path in libs
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
    {
        put(&std::fs::canonicalize(&path)?, &path.display().to_string())?;
    }
    let n = node("kfd-missing");
    let inside = root.path().join("node");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&n.root)
        .arg(&inside)
        .status()?;
    check(status.success(), "copying the fixture node failed")?;
    let chrooted = |args: &[&str]| {
        Command::new("chroot")
            .arg(root.path())
            .arg("/usr/local/bin/rocgate")
            .args(args)
            // Nothing of this machine's environment, as in a fresh image.
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("NO_COLOR", "1")
            .output()
    };
    let version = chrooted(&["--version"])?;
    check(
        version.status.success()
            && String::from_utf8_lossy(&version.stdout).starts_with("rocgate "),
        format!("rocgate --version in the empty root: {version:?}"),
    )?;
    let doctor = chrooted(&["doctor", "--sysroot", "/node"])?;
    let text = String::from_utf8_lossy(&doctor.stdout);
    check(
        doctor.status.code() == Some(1) && text.contains("kfd-missing"),
        format!("rocgate doctor in the empty root: {doctor:?}"),
    )?;
    Ok(Completion::Completed)
}
