//! The fleet pieces against the real tools they plug into: Kubernetes'
//! schemas (kubernetes-validate), LBNL NHC's calling convention, promtool
//! and node_exporter's textfile collector, and a one-node Slurm cluster
//! (munge, slurmctld, slurmd from the distribution) whose
//! HealthCheckProgram is rocgate.
//!
//! A trial whose tool is missing is ignored with the reason; under CI=true
//! it fails instead (ci/test installs every tool and starts munged).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{check, have, missing, node, repo, rocgate_bin};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let trials = vec![
        Trial::ignorable_test("kubernetes_manifests_pass_the_schema", kubernetes_manifests),
        Trial::ignorable_test("the_nhc_check_fails_only_a_broken_node", nhc_check),
        Trial::ignorable_test("promtool_accepts_the_textfile", promtool),
        Trial::ignorable_test("node_exporter_serves_the_textfile", node_exporter),
        Trial::ignorable_test(
            "slurm_drains_and_resumes_through_its_daemons",
            slurm_cluster,
        ),
    ];
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

fn kubernetes_manifests() -> Result<Completion, Failed> {
    if !have("kubernetes-validate") {
        return missing("kubernetes-validate (PyPI) is not installed");
    }
    let dir = repo().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    check(files.len() >= 3, format!("{files:?}"))?;
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--quiet"])
        .args(&files)
        .output()?;
    check(
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )?;
    // The validator refuses what it should: a selector that is no object.
    let bad = tempfile::NamedTempFile::new()?;
    std::fs::write(
        bad.path(),
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  selector: 3\n",
    )?;
    let refused = Command::new("kubernetes-validate")
        .arg("--quiet")
        .arg(bad.path())
        .output()?;
    check(
        !refused.status.success(),
        "kubernetes-validate passed a broken DaemonSet",
    )?;
    // node-problem-detector reads the plugin config as JSON.
    let npd = std::fs::read_to_string(dir.join("node-problem-detector.yaml"))?;
    let start = npd.find("    {\n").ok_or("no plugin config")?;
    let end = npd[start..].find("\n---").map_or(npd.len(), |e| start + e);
    let config: serde_json::Value = serde_json::from_str(&npd[start..end])?;
    check(
        config["rules"][0]["condition"] == "AMDGPUStackProblem"
            && config["conditions"][0]["type"] == "AMDGPUStackProblem"
            && config["pluginConfig"]["max_output_length"] == 80
            && config["rules"][0]["args"][0] == "health",
        format!("{config}"),
    )?;
    Ok(Completion::Completed)
}

/// NHC sources its checks into bash and provides `die`, `log` and `dbg`;
/// these stand-ins record what the check called.
fn nhc_check() -> Result<Completion, Failed> {
    if !have("bash") {
        return missing("bash is not installed");
    }
    // Every shipped script parses in the shell that runs it.
    for (shell, file) in [
        ("bash", "rocgate.nhc"),
        ("bash", "rocgate-fleet.sbatch"),
        ("sh", "rocgate-healthcheck"),
        ("sh", "rocgate-prolog"),
    ] {
        let path = repo().join("deploy/slurm").join(file);
        let ok = Command::new(shell).arg("-n").arg(&path).status()?.success();
        check(ok, format!("{shell} -n {}", path.display()))?;
    }
    let script = repo().join("deploy/slurm/rocgate.nhc");
    let run = |root: &Path| -> Result<String, Failed> {
        let out = Command::new("bash")
            .arg("-c")
            .arg(
                "die() { echo \"die $1 $2\"; }; log() { echo \"log $*\"; }; dbg() { echo \"dbg $*\"; }; \
                 source \"$1\"; check_rocgate --sysroot \"$2\"; echo \"rc $?\"",
            )
            .arg("nhc")
            .arg(&script)
            .arg(root)
            .env("ROCGATE", rocgate_bin())
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (ok, broken) = (node("mi300x-8"), node("kfd-missing"));
    // Healthy passes quietly, broken dies with rocgate's line, unknown is
    // only logged: NHC must not drain a node on rocgate's own trouble.
    for (root, said, rc) in [
        (
            ok.root.as_path(),
            "dbg check_rocgate: rocgate: ok 8 GPUs",
            0,
        ),
        (
            broken.root.as_path(),
            "die 1 rocgate: kfd-missing /dev/kfd does not exist",
            1,
        ),
        (
            Path::new("/nonexistent/node"),
            "log check_rocgate: rocgate could not decide (exit 2)",
            0,
        ),
    ] {
        let out = run(root)?;
        let died = out.contains("die ");
        check(
            out.contains(said) && out.ends_with(&format!("rc {rc}\n")) && died == (rc == 1),
            &out,
        )?;
    }
    Ok(Completion::Completed)
}

/// A textfile of a broken node, as `rocgate health --prom` writes it.
fn textfile(dir: &Path) -> Result<PathBuf, Failed> {
    let broken = node("kfd-missing");
    let prom = dir.join("rocgate.prom");
    Command::new(rocgate_bin())
        .args(["health", "--sysroot"])
        .arg(&broken.root)
        .arg("--prom")
        .arg(&prom)
        .output()?;
    check(prom.is_file(), "no textfile written")?;
    Ok(prom)
}

fn promtool() -> Result<Completion, Failed> {
    if !have("promtool") {
        return missing("promtool (package prometheus) is not installed");
    }
    let dir = tempfile::tempdir()?;
    let prom = textfile(dir.path())?;
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&prom)?)
        .output()?;
    check(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )?;
    Ok(Completion::Completed)
}

/// Kills a daemon the test started, however the test ends.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP port nothing listens on now.
fn free_port() -> Result<u16, Failed> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The body of `GET path` from 127.0.0.1:port, or `None` while nothing
/// answers there.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

fn node_exporter() -> Result<Completion, Failed> {
    if !have("prometheus-node-exporter") {
        return missing("prometheus-node-exporter is not installed");
    }
    let dir = tempfile::tempdir()?;
    textfile(dir.path())?;
    let port = free_port()?;
    let _exporter = Daemon(
        Command::new("prometheus-node-exporter")
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .arg(format!(
                "--collector.textfile.directory={}",
                dir.path().display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Some(body) = http_get(port, "/metrics") {
            break body;
        }
        check(
            Instant::now() < deadline,
            "node_exporter did not answer in 30 s",
        )?;
        std::thread::sleep(Duration::from_millis(200));
    };
    for line in [
        "node_textfile_scrape_error 0",
        "rocgate_check_failures{code=\"kfd-missing\"} 1",
        "rocgate_layer_up{layer=\"kfd\",pci_address=\"\",scope=\"node\"} 0",
        "rocgate_run_passed 0",
    ] {
        check(
            body.lines().any(|l| l == line),
            format!("no {line:?} in\n{body}"),
        )?;
    }
    Ok(Completion::Completed)
}

/// A one-node Slurm cluster in a temporary directory: slurmctld and slurmd
/// on free ports, with rocgate as the HealthCheckProgram, checking the
/// node named in `current`.
struct Cluster {
    dir: tempfile::TempDir,
    _daemons: Vec<Daemon>,
}

impl Cluster {
    fn start() -> Result<Cluster, Failed> {
        let dir = tempfile::tempdir()?;
        let d = dir.path();
        for sub in ["state", "spool"] {
            std::fs::create_dir_all(d.join(sub))?;
        }
        let conf = d.join("slurm.conf");
        let health = d.join("healthcheck");
        // The shipped HealthCheckProgram, told where this test's rocgate,
        // node, textfile directory and cluster are. slurmd runs it with
        // SLURMD_NODENAME set.
        std::fs::create_dir_all(d.join("textfile"))?;
        std::fs::write(
            &health,
            format!(
                "#!/bin/sh\nexport SLURM_CONF={conf}\nexport PATH=/usr/bin:/bin:/usr/sbin:/sbin\n\
                 export ROCGATE={bin} ROCGATE_BUDGET=20 ROCGATE_TEXTFILE_DIR={d}/textfile\n\
                 export ROCGATE_ARGS=\"--sysroot $(cat {d}/current)\"\n\
                 exec {wrapper} >> {d}/health.log 2>&1\n",
                conf = conf.display(),
                bin = rocgate_bin().display(),
                d = d.display(),
                wrapper = repo().join("deploy/slurm/rocgate-healthcheck").display()
            ),
        )?;
        std::fs::set_permissions(&health, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let (ctl, slurmd) = (free_port()?, free_port()?);
        std::fs::write(
            &conf,
            format!(
                "ClusterName=rocgate-test\nSlurmctldHost=localhost(127.0.0.1)\n\
                 SlurmctldPort={ctl}\nSlurmdPort={slurmd}\nSlurmUser=root\nSlurmdUser=root\n\
                 AuthType=auth/munge\nCredType=cred/munge\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
                 SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\nSchedulerType=sched/builtin\n\
                 SelectType=select/linear\nMpiDefault=none\nReturnToService=2\n\
                 HealthCheckProgram={health}\nHealthCheckInterval=3\nHealthCheckNodeState=ANY\n\
                 NodeName=rg1 NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n\
                 PartitionName=debug Nodes=rg1 Default=YES State=UP\n",
                d = d.display(),
                health = health.display()
            ),
        )?;
        let daemon = |program: &str, args: &[&str]| -> Result<Daemon, Failed> {
            Ok(Daemon(
                Command::new(program)
                    .args(args)
                    .env("SLURM_CONF", &conf)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?,
            ))
        };
        // In the foreground (-D), so dropping the handle ends each daemon.
        let ctld = daemon("slurmctld", &["-D", "-i"])?;
        let cluster_ctl = Cluster {
            dir,
            _daemons: vec![ctld],
        };
        cluster_ctl.wait_for("slurmctld to answer", |c| {
            c.scontrol(&["ping"]).contains("UP")
        })?;
        let mut cluster = cluster_ctl;
        cluster
            ._daemons
            .push(daemon("slurmd", &["-D", "-N", "rg1"])?);
        Ok(cluster)
    }

    fn checks(&self, root: &Path) -> Result<(), Failed> {
        std::fs::write(self.dir.path().join("current"), root.display().to_string())?;
        Ok(())
    }

    fn slurm(&self, tool: &str, args: &[&str]) -> String {
        Command::new(tool)
            .args(args)
            .env("SLURM_CONF", self.dir.path().join("slurm.conf"))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn scontrol(&self, args: &[&str]) -> String {
        self.slurm("scontrol", args)
    }

    /// `sinfo -R` as `reason|state` lines.
    fn reasons(&self) -> String {
        self.slurm("sinfo", &["-R", "-h", "-o", "%E|%T"])
    }

    fn state(&self) -> String {
        self.slurm("sinfo", &["-h", "-n", "rg1", "-o", "%T"])
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&Cluster) -> bool) -> Result<(), Failed> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ok(self) {
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(self.dir.path().join("health.log")).unwrap_or_default();
                let slurmd =
                    std::fs::read_to_string(self.dir.path().join("slurmd.log")).unwrap_or_default();
                let ctld = std::fs::read_to_string(self.dir.path().join("slurmctld.log"))
                    .unwrap_or_default();
                return Err(format!(
                    "waited 60 s for {what}; sinfo -R: {:?}, state: {:?}\nhealth log:\n{log}\nslurmd log:\n{slurmd}\nslurmctld log:\n{ctld}",
                    self.reasons(),
                    self.state()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    }
}

/// Whether munged issues and checks a credential: a socket file alone may
/// be left by a munged that no longer runs.
fn munged_answers() -> bool {
    Command::new("sh")
        .args(["-c", "munge -n | unmunge"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn slurm_cluster() -> Result<Completion, Failed> {
    for tool in ["slurmctld", "slurmd", "scontrol", "sinfo"] {
        if !have(tool) {
            return missing(&format!("{tool} (Slurm) is not installed"));
        }
    }
    if !munged_answers() {
        return missing("munged does not answer (`munge -n | unmunge` fails)");
    }
    if !nix::unistd::Uid::effective().is_root() {
        return missing("the Slurm daemons need root");
    }
    let broken = node("kfd-missing");
    let healthy = node("mi300x-8");
    let cluster = Cluster::start()?;
    // A broken layer drains the node with rocgate's reason.
    cluster.checks(&broken.root)?;
    cluster.wait_for("the drain", |c| {
        c.reasons()
            .starts_with("rocgate: kfd-missing /dev/kfd does not exist|")
    })?;
    // The shipped wrapper also feeds the textfile collector.
    let prom = std::fs::read_to_string(cluster.dir.path().join("textfile/rocgate.prom"))?;
    check(
        prom.contains("rocgate_check_failures{code=\"kfd-missing\"} 1"),
        &prom,
    )?;
    // Healthy again: rocgate resumes the node it drained.
    cluster.checks(&healthy.root)?;
    cluster.wait_for("the resume", |c| {
        c.reasons().trim().is_empty() && c.state().trim() == "idle"
    })?;
    // A node drained by hand stays drained with its reason, broken or not.
    cluster.scontrol(&["update", "NodeName=rg1", "State=DRAIN", "Reason=bad DIMM"]);
    cluster.wait_for("the manual drain", |c| c.reasons().starts_with("bad DIMM|"))?;
    let log = cluster.dir.path().join("health.log");
    for root in [&broken.root, &healthy.root] {
        let before = std::fs::read_to_string(&log).unwrap_or_default().len();
        cluster.checks(root)?;
        cluster.wait_for("two health checks", |_| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.len() > before && text[before..].matches("not rocgate's").count() >= 2
        })?;
        check(
            cluster.reasons().starts_with("bad DIMM|"),
            cluster.reasons(),
        )?;
    }
    Ok(Completion::Completed)
}
