//! Looking things up from an installed binary: one finding code explained,
//! the built-in matrix and thresholds, the exit codes in every `--help`,
//! shell completions and the man page, the tiers with their typical times.

use crate::util::{assert_has, assert_lacks, finish, rocgate};

#[test]
fn one_code_is_explained_and_a_wrong_one_names_those_like_it() {
    let out = finish(rocgate().args(["codes", "kfd-permission"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("kfd-permission\n"), "{}", out.stdout);
    assert_has(&out.stdout, "severity  fail");
    assert_has(&out.stdout, "layers    kfd");
    assert_has(&out.stdout, "usermod -aG render");
    // Any case, underscores for dashes.
    let out = finish(rocgate().args(["codes", "GPU_WEDGED"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        "<reset> amd-smi's reset of that GPU by its address",
    );
    let json = finish(rocgate().args(["codes", "gpu-wedged", "--format", "json"]));
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["code"], "gpu-wedged", "{doc}");
    let out = finish(rocgate().args(["codes", "kfd-perm"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_has(&out.stderr, "no finding code \"kfd-perm\": did you mean");
    assert_has(&out.stderr, "kfd-permission");
}

#[test]
fn the_builtin_matrix_and_thresholds_print_as_the_files_they_are() {
    for (args, file, table) in [
        (["matrix", "show"], "suites/compat.toml", "[[release]]"),
        (
            ["thresholds", "show"],
            "suites/thresholds.toml",
            "[[floor]]",
        ),
    ] {
        let out = finish(rocgate().args(args));
        assert_eq!(out.code, 0, "{}", out.stderr);
        let builtin = std::fs::read_to_string(crate::util::repo().join(file)).unwrap();
        assert_eq!(out.stdout, builtin, "{args:?}");
        assert_has(&out.stdout, table);
    }
}

#[test]
fn every_commands_help_ends_with_its_exit_codes() {
    for command in [
        "run",
        "doctor",
        "fleet",
        "inventory",
        "list",
        "matrix",
        "thresholds",
        "snapshot",
        "compare",
        "codes",
    ] {
        let out = finish(rocgate().args([command, "--help"]));
        assert_eq!(out.code, 0, "{command}: {}", out.stderr);
        assert_has(&out.stdout, "Exit codes:\n    0  nothing fails the run");
        assert_has(&out.stdout, "  130  a signal stopped the command");
    }
    let out = finish(rocgate().args(["health", "--help"]));
    assert_has(&out.stdout, "Exit codes:\n    0  healthy");
    assert_has(&out.stdout, "never drains");
    assert_lacks(&out.stdout, "130");
}

#[test]
fn completions_and_man_pages_come_from_the_command_line() {
    let bash = finish(rocgate().args(["completions", "bash"]));
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    assert_has(&bash.stdout, "complete -F _rocgate");
    assert_has(&bash.stdout, "--heartbeat");
    // The script bash reads must parse.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("rocgate.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let parsed = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(parsed.success());
    for shell in ["zsh", "fish"] {
        let out = finish(rocgate().args(["completions", shell]));
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert_has(&out.stdout, "rocgate");
    }
    let man = finish(rocgate().arg("man"));
    assert_eq!(man.code, 0, "{}", man.stderr);
    assert_has(&man.stdout, ".TH rocgate 1");
    assert_has(&man.stdout, "doctor");
    let run = finish(rocgate().args(["man", "run"]));
    assert_has(&run.stdout, ".TH rocgate-run 1");
    assert_has(&run.stdout, "heartbeat");
    let nope = finish(rocgate().args(["man", "nope"]));
    assert_eq!(nope.code, 2, "{}", nope.stderr);
    assert_has(&nope.stderr, "the commands are run, doctor");
}

#[test]
fn the_tiers_say_what_they_run_and_about_how_long_it_takes() {
    let out = rocgate().args(["list", "--tiers"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<(&str, f64)> = text
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let secs: f64 = cols[2].trim_start_matches('~').parse().unwrap();
            let unit = if cols[3] == "min" { 60.0 } else { 1.0 };
            (cols[0], secs * unit)
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        ["passive", "quick", "standard", "extended", "burnin"],
        "{text}"
    );
    // The burn-in lasts its default duration, 30 minutes, and a little.
    assert!((1800.0..1900.0).contains(&rows[4].1), "{text}");
    // Each tier runs what the one below runs and more, so takes longer;
    // the passive tier reads files only, well under a second.
    assert!(rows.windows(2).all(|w| w[0].1 < w[1].1), "{text}");
    assert!(rows[0].1 < 1.0, "{text}");
    assert_has(&text, "an estimate for a healthy 8x MI300X node");
}
