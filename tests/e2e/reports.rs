//! Report files and terminal output under hostile inputs, through the real
//! binary: report paths that are devices, FIFOs, symlinks or one path given
//! twice; node strings XML cannot carry; terminals that take no colour.

use crate::util;
use crate::util::{
    HANG_GUARD, OnPty, assert_has, assert_lacks, node, rocgate, run_on_pty, wait_guarded,
};
use rocgate_fixtures::hostile::{char_device, is_char_device};
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `rocgate run --sysroot ROOT ARGS...`: (exit code, stdout, stderr).
fn run_reports(root: &Path, args: &[&Path]) -> (i32, String, String) {
    let f = util::finish(rocgate().arg("run").arg("--sysroot").arg(root).args(args));
    (f.code, f.stdout, f.stderr)
}

/// Makes `dir/name` a symbolic link to `target` (relative to `dir`, or
/// absolute, and need not exist yet); the link's path.
fn link_in(dir: &Path, name: &str, target: &str) -> PathBuf {
    let link = dir.join(name);
    symlink(target, &link).unwrap();
    link
}

/// Whether XML 1.0 allows `c` anywhere in a document.
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Reads `xml` to the end as a strict consumer would: XML 1.0 characters
/// only (quick-xml does not check them), balanced elements, attributes and
/// text that unescape, and quick-junit's reader.
fn assert_well_formed(xml: &str) {
    use quick_xml::Reader;
    use quick_xml::events::Event;
    if let Some((at, c)) = xml.char_indices().find(|&(_, c)| !is_xml_char(c)) {
        panic!(
            "U+{:04X} at byte {at} is not an XML 1.0 character:\n{xml}",
            c as u32
        );
    }
    let mut reader = Reader::from_str(xml);
    let mut depth = 0usize;
    loop {
        let event = reader.read_event().unwrap();
        match &event {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                for a in e.attributes() {
                    a.unwrap()
                        .normalized_value(quick_xml::XmlVersion::Explicit1_0)
                        .unwrap();
                }
                if matches!(event, Event::Start(_)) {
                    depth += 1;
                }
            }
            Event::End(_) => depth -= 1,
            Event::Text(t) => {
                t.decode().unwrap();
            }
            _ => {}
        }
    }
    assert_eq!(depth, 0, "{xml}");
    quick_junit::Report::deserialize_from_str(xml).unwrap();
}

// A report path is never replaced by something else: a device, a link or
// a FIFO is written through.

#[test]
fn character_devices_are_written_through_and_a_full_one_is_named() {
    let n = node("rx7900xtx-1");
    let dir = tempfile::tempdir().unwrap();
    let null = char_device(dir.path(), "null", 3);
    let full = char_device(dir.path(), "full", 7);
    let (code, stdout, stderr) = run_reports(
        &n.root,
        &[Path::new("--junit"), &null, Path::new("--json"), &full],
    );
    assert!(is_char_device(&null), "{} was replaced", null.display());
    assert!(is_char_device(&full), "{} was replaced", full.display());
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert_has(
        &stderr,
        format!("JSON report not written to {}", full.display()),
    );
    assert_has(&stderr, "No space left on device");
    assert_has(&stdout, format!("JUnit: {}", null.display()));
    assert_lacks(&stdout, "JSON:");
}

#[test]
fn a_symlink_is_followed_to_its_target_and_stays_a_symlink() {
    let n = node("rx7900xtx-1");
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    fs::create_dir(&reports).unwrap();
    let target = reports.join("junit.xml");
    fs::write(&target, "old").unwrap();
    let junit = link_in(dir.path(), "junit-link.xml", "reports/junit.xml");
    // A dangling link: its target is created.
    let json = link_in(dir.path(), "json-link.json", "reports/new.json");
    let (code, stdout, stderr) = run_reports(
        &n.root,
        &[Path::new("--junit"), &junit, Path::new("--json"), &json],
    );
    assert!(matches!(code, 0 | 1), "{stdout}\n{stderr}");
    for link in [&junit, &json] {
        assert!(
            fs::symlink_metadata(link).unwrap().file_type().is_symlink(),
            "{} was replaced",
            link.display()
        );
    }
    assert_well_formed(&fs::read_to_string(&target).unwrap());
    let doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(reports.join("new.json")).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 1);
    // Nothing is left behind: no temporary file beside the links or targets.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 3);
    assert_eq!(fs::read_dir(&reports).unwrap().count(), 2);
}

#[test]
fn a_fifo_gets_the_report_and_one_nobody_reads_fails_at_once() {
    let n = node("rx7900xtx-1");
    let dir = tempfile::tempdir().unwrap();
    let read_fifo = dir.path().join("junit.fifo");
    let lonely_fifo = dir.path().join("json.fifo");
    for f in [&read_fifo, &lonely_fifo] {
        nix::unistd::mkfifo(f, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    // Opened before rocgate runs, without waiting for a writer: rocgate
    // finds its reader there whenever it writes.
    let mut reader = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&read_fifo)
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let drain = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            loop {
                // Empty or no writer yet: only the end of rocgate ends this.
                match reader.read(&mut buf) {
                    Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                    _ if done.load(Ordering::SeqCst) => break,
                    _ => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            got
        })
    };
    let start = Instant::now();
    let (code, stdout, stderr) = run_reports(
        &n.root,
        &[
            Path::new("--junit"),
            &read_fifo,
            Path::new("--json"),
            &lonely_fifo,
        ],
    );
    done.store(true, Ordering::SeqCst);
    let junit = String::from_utf8(drain.join().unwrap()).unwrap();
    for f in [&read_fifo, &lonely_fifo] {
        assert!(
            fs::symlink_metadata(f).unwrap().file_type().is_fifo(),
            "{} was replaced",
            f.display()
        );
    }
    assert_well_formed(&junit);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert_has(
        &stderr,
        format!("JSON report not written to {}", lonely_fifo.display()),
    );
    assert_has(&stderr, "nothing is reading it");
    assert!(start.elapsed() < HANG_GUARD);
}

#[test]
fn a_report_to_rocgates_own_stdout_joins_what_it_prints() {
    let n = node("rx7900xtx-1");
    let dir = tempfile::tempdir().unwrap();
    // `/dev/stdout` made here, so that a rocgate which replaced the link
    // would not take the host's own.
    let stdout_link = link_in(dir.path(), "stdout", "/proc/self/fd/1");
    // stdout redirected to a file (`--junit /dev/stdout >log`): the log is
    // not swapped for the report, and what follows the report still lands.
    let log = dir.path().join("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocgate"))
        .arg("run")
        .arg("--sysroot")
        .arg(&n.root)
        .arg("--junit")
        .arg(&stdout_link)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let code = wait_guarded(&mut child);
    assert!(matches!(code, 0 | 1), "exit {code}");
    assert!(fs::symlink_metadata(&stdout_link).unwrap().is_symlink());
    let log = fs::read_to_string(&log).unwrap();
    assert_report_between_header_and_summary(&log, &stdout_link);

    // stdout a pipe: the same.
    let (code, stdout, stderr) = run_reports(&n.root, &[Path::new("--junit"), &stdout_link]);
    assert!(matches!(code, 0 | 1), "{stderr}");
    assert!(fs::symlink_metadata(&stdout_link).unwrap().is_symlink());
    assert_report_between_header_and_summary(&stdout, &stdout_link);
}

/// `out` holds rocgate's header, a whole JUnit report sent to `path`, then
/// the summary.
fn assert_report_between_header_and_summary(out: &str, path: &Path) {
    let start = out
        .find("<?xml")
        .unwrap_or_else(|| panic!("no report:\n{out}"));
    let end = out
        .find("</testsuites>")
        .unwrap_or_else(|| panic!("no report end:\n{out}"))
        + "</testsuites>".len();
    assert!(out[..start].contains("rocgate "), "{out}");
    assert_well_formed(&out[start..end]);
    assert!(
        out[end..].contains(&format!("JUnit: {}", path.display())),
        "{out}"
    );
}

#[test]
fn one_character_device_takes_both_reports() {
    let n = node("rx7900xtx-1");
    let dir = tempfile::tempdir().unwrap();
    let null = char_device(dir.path(), "null", 3);
    // Written through, neither report replaces the other: not refused.
    let (code, stdout, stderr) = run_reports(
        &n.root,
        &[Path::new("--junit"), &null, Path::new("--json"), &null],
    );
    assert!(matches!(code, 0 | 1), "{stdout}\n{stderr}");
    assert!(is_char_device(&null), "{} was replaced", null.display());
    assert_has(&stdout, format!("JUnit: {}", null.display()));
    assert_has(&stdout, format!("JSON:  {}", null.display()));
}

// Node strings that XML cannot carry: the JUnit stays well-formed.

#[test]
fn junit_is_well_formed_when_node_strings_hold_noncharacters() {
    let n = node("rx7900xtx-1");
    // The sysroot's own path lands in the node suite's properties.
    let root = n.root.with_file_name("node\u{FFFF}\u{1}");
    fs::rename(&n.root, &root).unwrap();
    let vbios = glob_one(&root.join("sys/bus/pci/devices"), "vbios_version");
    let weird = "113-D\u{FFFE}70\u{FFFF}\u{1b}[31m]]>\"";
    fs::write(&vbios, weird).unwrap();
    let (code, _, json, junit) = util::run(&root, &[]);
    assert!(matches!(code, 0 | 1));
    assert_well_formed(&junit);
    assert_has(
        &junit,
        r#"<property name="vbios" value="113-D70]]&gt;&quot;"/>"#,
    );
    // JSON carries the exact text.
    let props = &json["scopes"][1]["properties"];
    assert_eq!(props["vbios"], weird, "{props}");
    assert_eq!(
        json["node"]["sysroot"].as_str().unwrap(),
        root.to_str().unwrap()
    );
}

/// The first `name` file in a PCI device directory under `dir`.
fn glob_one(dir: &Path, name: &str) -> PathBuf {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no {name} under {}", dir.display()))
}

// Two reports given one path; reports that cannot be written.

#[test]
fn one_path_for_both_reports_is_refused_before_anything_runs() {
    let n = node("rx7900xtx-1");
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("target.xml"), "").unwrap();
    link_in(dir.path(), "link.xml", "target.xml");
    for (junit, json) in [("r", "./r"), ("r", "sub/../r"), ("link.xml", "target.xml")] {
        fs::create_dir_all(dir.path().join("sub")).unwrap();
        let out = rocgate()
            .current_dir(dir.path())
            .arg("run")
            .arg("--sysroot")
            .arg(&n.root)
            .args(["--junit", junit, "--json", json])
            .timeout(HANG_GUARD)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{junit} {json}: {stderr}");
        assert_has(&stderr, "name the same file");
        // Nothing ran: no header, no ladder, no report.
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!dir.path().join("r").exists());
        assert_eq!(
            fs::read_to_string(dir.path().join("target.xml")).unwrap(),
            ""
        );
    }
}

#[test]
fn every_report_that_can_be_written_is_and_each_one_that_cannot_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-such-dir/r.xml");
    // A passing node and a failing one: exit 2 over both verdicts.
    for name in ["mi300x-8", "amdgpu-not-loaded"] {
        let n = node(name);
        let json = dir.path().join(format!("{name}.json"));
        let (code, stdout, stderr) = run_reports(
            &n.root,
            &[Path::new("--junit"), &nowhere, Path::new("--json"), &json],
        );
        assert_eq!(code, 3, "{name}: {stdout}\n{stderr}");
        assert_has(
            &stderr,
            format!("JUnit report not written to {}", nowhere.display()),
        );
        assert_lacks(&stdout, "JUnit:");
        assert_has(&stdout, format!("JSON:  {}", json.display()));
        let doc: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["passed"], name == "mi300x-8");
    }
    // Both unwritable: both named.
    let n = node("rx7900xtx-1");
    let other = dir.path().join("no-such-dir/r.json");
    let (code, _, stderr) = run_reports(
        &n.root,
        &[Path::new("--junit"), &nowhere, Path::new("--json"), &other],
    );
    assert_eq!(code, 3);
    assert_has(&stderr, "JUnit report not written");
    assert_has(&stderr, "JSON report not written");
}

// Colour and cursor control, per stream: a dumb terminal, NO_COLOR, a
// stream that is not the terminal.

/// Colour sequences (SGR: `ESC [ ... m`).
fn has_colour(text: &str) -> bool {
    text.split('\u{1b}').skip(1).any(|seq| {
        seq.strip_prefix('[').is_some_and(|rest| {
            rest.chars()
                .find(|c| !(c.is_ascii_digit() || *c == ';'))
                .is_some_and(|c| c == 'm')
        })
    })
}

/// A carriage return that is not the terminal's own `\r\n`: a redraw.
fn has_redraw(text: &str) -> bool {
    text.replace("\r\n", "\n").contains('\r')
}

#[test]
fn a_dumb_terminal_gets_no_colour_and_no_cursor_control() {
    let n = node("amdgpu-not-loaded");
    let run = run_on_pty(&n.root, &[], OnPty::Both, &[("TERM", "dumb")]);
    assert!(run.terminal.contains("FAILED"), "{}", run.terminal);
    assert!(!run.terminal.contains('\u{1b}'), "{:?}", run.terminal);
    assert!(!has_redraw(&run.terminal), "{:?}", run.terminal);
}

#[test]
fn no_color_turns_colour_off_on_a_terminal_unless_empty() {
    let n = node("amdgpu-not-loaded");
    let run = run_on_pty(
        &n.root,
        &[],
        OnPty::Both,
        &[("TERM", "xterm"), ("NO_COLOR", "1")],
    );
    assert!(run.terminal.contains("FAILED"), "{}", run.terminal);
    assert!(!has_colour(&run.terminal), "{:?}", run.terminal);
    // An empty NO_COLOR is no request (no-color.org).
    let run = run_on_pty(
        &n.root,
        &[],
        OnPty::Both,
        &[("TERM", "xterm"), ("NO_COLOR", "")],
    );
    assert!(has_colour(&run.terminal), "{:?}", run.terminal);
}

#[test]
fn each_stream_is_coloured_only_when_it_is_the_terminal() {
    let n = node("amdgpu-not-loaded");
    let run = run_on_pty(&n.root, &[], OnPty::StdoutOnly, &[("TERM", "xterm")]);
    assert!(has_colour(&run.terminal), "{:?}", run.terminal);
    // The failures as they happen go to stderr, here a file.
    assert!(run.other.contains("FAIL"), "{}", run.other);
    assert!(!run.other.contains('\u{1b}'), "{:?}", run.other);
    assert!(!run.other.contains('\r'), "{:?}", run.other);

    let run = run_on_pty(&n.root, &[], OnPty::StderrOnly, &[("TERM", "xterm")]);
    assert!(has_colour(&run.terminal), "{:?}", run.terminal);
    assert!(run.other.contains("FAILED"), "{}", run.other);
    assert!(!run.other.contains('\u{1b}'), "{:?}", run.other);
}

// Report paths another user planted: the kernel's fs.protected_symlinks
// rule, applied by rocgate (which resolves links itself).

/// A sticky world-writable directory (mode 1777, as /tmp) in a temporary
/// one, when the test runs as root: only root can give a link to another
/// user. `None` (the test is then vacuous) otherwise.
fn sticky_dir() -> Option<(tempfile::TempDir, PathBuf)> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not root: cannot plant another user's link; skipped");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let sticky = dir.path().join("tmp");
    fs::create_dir(&sticky).unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
    Some((dir, sticky))
}

/// `link`, a symlink to `target` owned by nobody (uid 65534).
fn planted(target: &Path, link: &Path) -> PathBuf {
    symlink(target, link).unwrap();
    std::os::unix::fs::lchown(link, Some(65534), Some(65534)).unwrap();
    link.to_path_buf()
}

#[test]
fn a_link_another_user_planted_in_a_sticky_directory_is_not_followed() {
    let Some((dir, sticky)) = sticky_dir() else {
        return;
    };
    let n = node("rx7900xtx-1");
    let victims = dir.path().join("victims");
    fs::create_dir(&victims).unwrap();
    let victim = victims.join("shadow");
    fs::write(&victim, "precious").unwrap();
    // The final link to a file, a dangling one, one to a directory on the
    // way, and a device (a tty, say) behind a link.
    let json = planted(&victim, &sticky.join("x.json"));
    let junit = planted(&victims.join("new.xml"), &sticky.join("x.xml"));
    let through = planted(&victims, &sticky.join("d"));
    let html = through.join("page.html");
    let null = char_device(dir.path(), "null", 3);
    let prom = planted(&null, &sticky.join("x.prom"));
    let (code, stdout, stderr) = run_reports(
        &n.root,
        &[
            Path::new("--json"),
            &json,
            Path::new("--junit"),
            &junit,
            Path::new("--html"),
            &html,
            Path::new("--prom"),
            &prom,
        ],
    );
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    for (what, path) in [
        ("JSON", &json),
        ("JUnit", &junit),
        ("HTML", &html),
        ("Prometheus", &prom),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("{what} report not written to {}", path.display())))
            .unwrap_or_else(|| panic!("no {what} error in\n{stderr}"));
        assert_has(line, "fs.protected_symlinks");
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!victims.join("new.xml").exists());
    assert_eq!(fs::read_dir(&victims).unwrap().count(), 1);
    assert!(is_char_device(&null));
}

#[test]
fn links_the_kernel_would_follow_are_followed_in_a_sticky_directory() {
    let Some((dir, sticky)) = sticky_dir() else {
        return;
    };
    let n = node("rx7900xtx-1");
    let target = dir.path().join("target.json");
    // rocgate's own link; another user's in a sticky directory that user
    // owns (the directory's owner may link in it).
    let own = sticky.join("own.json");
    symlink(&target, &own).unwrap();
    let theirs_dir = dir.path().join("theirs");
    fs::create_dir(&theirs_dir).unwrap();
    fs::set_permissions(&theirs_dir, fs::Permissions::from_mode(0o1777)).unwrap();
    std::os::unix::fs::lchown(&theirs_dir, Some(65534), Some(65534)).unwrap();
    let junit_target = dir.path().join("target.xml");
    let theirs = planted(&junit_target, &theirs_dir.join("r.xml"));
    let (code, stdout, stderr) = run_reports(
        &n.root,
        &[Path::new("--json"), &own, Path::new("--junit"), &theirs],
    );
    assert!(matches!(code, 0 | 1), "{stdout}\n{stderr}");
    assert!(
        fs::read_to_string(&target)
            .unwrap()
            .contains("\"schema_version\"")
    );
    assert!(
        fs::read_to_string(&junit_target)
            .unwrap()
            .contains("<testsuites")
    );
}

// Commands whose stdout is their document: a full disk is an error.

#[test]
fn a_document_on_a_full_stdout_fails_with_exit_3_naming_stdout() {
    let n = node("kfd-missing");
    let dir = tempfile::tempdir().unwrap();
    let full = char_device(dir.path(), "full", 7);
    let json = dir.path().join("r.json");
    let (code, _, stderr) = run_reports(&n.root, &[Path::new("--json"), &json]);
    assert_eq!(code, 1, "{stderr}");
    let root = n.root.to_str().unwrap();
    let report = json.to_str().unwrap();
    let commands: [&[&str]; 9] = [
        &["inventory", "--json", "--sysroot", root],
        &["inventory", "--sysroot", root],
        &["fleet", "report", report],
        &["compare", report, report],
        &["codes"],
        &["codes", "--format", "markdown"],
        &["doctor", "--json", "--sysroot", root],
        &["list"],
        &["matrix", "check", "--sysroot", root],
    ];
    for args in commands {
        let err_path = dir.path().join("stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rocgate"))
            .args(args)
            .env("NO_COLOR", "1")
            .env("ROCGATE_CONFIG", "")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("ROCGATE_NODE_NAME")
            .stdin(Stdio::null())
            .stdout(File::options().write(true).open(&full).unwrap())
            .stderr(File::create(&err_path).unwrap())
            .spawn()
            .unwrap();
        let code = wait_guarded(&mut child);
        let stderr = fs::read_to_string(&err_path).unwrap();
        assert_eq!(code, 3, "{args:?}: {stderr}");
        assert!(
            stderr.contains("stdout") && stderr.contains("No space left on device"),
            "{args:?}: {stderr}"
        );
    }
}

// Node text on stdout: no terminal control, no workflow command.

#[test]
fn inventory_prints_no_terminal_control_from_the_node() {
    let n = node("rx7900xtx-1");
    let vbios = glob_one(&n.root.join("sys/bus/pci/devices"), "vbios_version");
    // An OSC 52 clipboard write, a screen clear, a carriage return that
    // would draw over the line.
    fs::write(
        &vbios,
        "113-\u{1b}]52;c;ZXZpbA==\u{7}D\u{1b}[2J\u{1b}[H70\rfake",
    )
    .unwrap();
    let out = rocgate()
        .args(["inventory", "--sysroot"])
        .arg(&n.root)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains(['\u{1b}', '\u{7}', '\r']), "{stdout:?}");
    // What is left of it is on one line.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("113-D70") && l.contains("fake")),
        "{stdout}"
    );
    // JSON keeps the exact text, escaped as JSON.
    let out = util::inventory_json(&n.root);
    assert!(!out.stdout.contains(&0x1b), "raw escape in the JSON");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc.to_string().contains("113-\\u001b]52;c;"), "{doc}");
}

/// Whether a GitHub Actions runner would take a line of `text` for a
/// workflow command (actions/runner ActionCommand.cs: `::` after leading
/// white space, `##[` anywhere; lines split at `\n` and `\r`).
fn workflow_commands(text: &str) -> Vec<&str> {
    text.split(['\n', '\r'])
        .filter(|l| l.trim_start().starts_with("::") || l.contains("##["))
        .collect()
}

#[test]
fn node_text_on_stdout_is_never_a_workflow_command() {
    let n = node("rx7900xtx-1");
    fs::write(
        n.root.join("proc/sys/kernel/osrelease"),
        "6.8.0-##[add-mask]generic",
    )
    .unwrap();
    let vbios = glob_one(&n.root.join("sys/bus/pci/devices"), "vbios_version");
    fs::write(&vbios, "::add-mask::113-D70 ##[error]x").unwrap();
    let mut runs: Vec<(Vec<&str>, String)> = Vec::new();
    for args in [
        vec!["run", "--sysroot"],
        vec!["inventory", "--sysroot"],
        vec!["inventory", "--json", "--sysroot"],
        vec!["doctor", "--sysroot"],
        vec!["doctor", "--json", "--sysroot"],
    ] {
        let out = rocgate()
            .args(&args)
            .arg(&n.root)
            .timeout(HANG_GUARD)
            .output()
            .unwrap();
        runs.push((args, String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    for (args, stdout) in &runs {
        assert!(workflow_commands(stdout).is_empty(), "{args:?}:\n{stdout}");
    }
    // The text is still there, and JSON says exactly what the node said.
    assert!(
        runs[0].1.contains("6.8.0-#\u{2060}#[add-mask]generic"),
        "{}",
        runs[0].1
    );
    let doc: serde_json::Value = serde_json::from_str(&runs[2].1).unwrap();
    assert!(
        doc.to_string().contains("6.8.0-##[add-mask]generic"),
        "{doc}"
    );
}

#[test]
fn a_closed_stdout_ends_the_output_not_the_command() {
    let n = node("kfd-permission");
    let junit = n.root.with_extension("junit.xml");
    for args in [
        &["doctor", "--json"][..],
        &["inventory"][..],
        &["run", "--junit"][..],
    ] {
        // The reader is gone before rocgate writes a byte, as after `| head -1`.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("rocgate"));
        cmd.args(args);
        if args[0] == "run" {
            cmd.arg(&junit);
        }
        let out = cmd
            .arg("--sysroot")
            .arg(&n.root)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {out:?}"
        );
    }
    // The run still wrote its report.
    quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
}

#[test]
fn a_report_given_dash_is_stdout_alone_and_the_run_speaks_on_stderr() {
    let n = node("kfd-permission");
    let (code, stdout, stderr) = run_reports(&n.root, &[Path::new("--json"), Path::new("-")]);
    assert_eq!(code, 1, "{stderr}");
    // stdout is the document and nothing else: a pipe reads it whole.
    let doc: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not only the report ({e}): {stdout}"));
    assert_eq!(doc["passed"], false);
    assert!(
        stderr.contains("FAILED") && stderr.contains("kfd-permission"),
        "the ladder and the failures go to stderr: {stderr}"
    );
    assert_has(&stderr, "JSON:  stdout");
    assert!(!n.root.join("-").exists() && !Path::new("-").exists());
    // JUnit alike; and two reports cannot share stdout.
    let (_, stdout, _) = run_reports(&n.root, &[Path::new("--junit"), Path::new("-")]);
    assert!(stdout.starts_with("<?xml"), "{stdout}");
    let (code, _, stderr) = run_reports(
        &n.root,
        &[
            Path::new("--junit"),
            Path::new("-"),
            Path::new("--json"),
            Path::new("-"),
        ],
    );
    assert_eq!(code, 2);
    assert_has(&stderr, "both print to stdout");
    // health's stdout is its verdict line: a report there is refused.
    let out = rocgate()
        .args(["health", "--json", "-", "--sysroot"])
        .arg(&n.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("give the report a file"));
}

#[test]
fn clicolor_force_colours_a_log_and_no_color_still_wins() {
    let n = node("amdgpu-not-loaded");
    // The tests' rocgate sets NO_COLOR; empty, it is no request.
    let run = |env: &[(&str, &str)]| {
        let mut all = vec![("NO_COLOR", "")];
        all.extend_from_slice(env);
        let (out, _, _) = util::run_finished(&n.root, &["--progress", "none"], &all);
        out.stdout
    };
    assert!(!has_colour(&run(&[])), "a log gets no colour by default");
    let forced = run(&[("CLICOLOR_FORCE", "1")]);
    assert!(has_colour(&forced), "{forced:?}");
    assert!(
        !has_redraw(&forced),
        "colour, not cursor control: {forced:?}"
    );
    assert!(!has_colour(&run(&[
        ("CLICOLOR_FORCE", "1"),
        ("NO_COLOR", "1")
    ])));
}
