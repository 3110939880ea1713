//! The fleet pieces against the real tools they plug into: Kubernetes'
//! schemas (kubernetes-validate), LBNL NHC's calling convention, promtool
//! and node_exporter's textfile collector, GitHub Actions' path matching
//! (the minimatch and yaml npm packages, as @actions/glob uses them), and a
//! one-node Slurm cluster (munge, slurmctld, slurmd from the distribution)
//! whose HealthCheckProgram is rocgate and which runs the fleet sbatch.
//!
//! A trial whose tool is missing is ignored with the reason; under CI=true
//! it fails instead (ci/test installs every tool and starts munged).

use crate::util;
use crate::util::{check, have, missing, node, repo, rocgate_bin};
use libtest_mimic::{Completion, Failed, Trial};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::ignorable_test("kubernetes_manifests_pass_the_schema", kubernetes_manifests),
        Trial::ignorable_test("the_nhc_check_fails_only_a_broken_node", nhc_check),
        Trial::test(
            "one_textfile_directory_across_slurm_and_kubernetes",
            one_textfile_directory,
        ),
        Trial::ignorable_test(
            "github_actions_upload_what_the_readme_writes",
            github_actions_artifacts,
        ),
        Trial::ignorable_test("promtool_accepts_the_textfile", promtool),
        Trial::ignorable_test("node_exporter_serves_the_textfile", node_exporter),
        Trial::ignorable_test(
            "node_exporter_serves_health_and_run_textfiles_side_by_side",
            textfiles_side_by_side,
        ),
        Trial::ignorable_test(
            "slurm_drains_and_resumes_through_its_daemons",
            slurm_cluster,
        ),
    ]
}

/// The Kubernetes versions the manifests are validated against: the oldest
/// they serve (1.29, where an Indexed Job's `backoffLimitPerIndex` and the
/// `FailIndex` pod failure action are on by default) and the validator's
/// newest.
const KUBERNETES_VERSIONS: [Option<&str>; 2] = [Some("1.29.0"), None];

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
    for version in KUBERNETES_VERSIONS {
        let mut validate = Command::new("kubernetes-validate");
        validate.args(["--strict", "--quiet"]);
        if let Some(v) = version {
            validate.args(["-k", v]);
        }
        let out = validate.args(&files).output()?;
        check(
            out.status.success(),
            format!(
                "kubernetes {version:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )?;
    }
    // The validator refuses what it should: a selector that is no object,
    // and a pod failure rule 1.29 does not know without its status.
    for bad in [
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  selector: 3\n",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\nspec:\n  podFailurePolicy:\n    rules:\n      - action: Ignore\n        onPodConditions:\n          - type: DisruptionTarget\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: x\n          image: x\n",
    ] {
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), bad)?;
        let refused = Command::new("kubernetes-validate")
            .args(["--quiet", "-k", "1.29.0"])
            .arg(file.path())
            .output()?;
        check(
            !refused.status.success(),
            format!("kubernetes-validate passed\n{bad}"),
        )?;
    }
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
    let plugin: Vec<&str> = config["rules"][0]["args"]
        .as_array()
        .ok_or("no plugin args")?
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    check(
        plugin.windows(2).any(|w| w == ["--tier", "passive"])
            && plugin.windows(2).any(|w| w == ["--host-root", "/host"]),
        format!("the plugin runs {plugin:?}"),
    )?;
    let Some(docs) = yaml_documents(&files)? else {
        return missing(
            "python3's yaml module (PyYAML, which kubernetes-validate needs) is missing",
        );
    };
    manifests_do_what_they_say(&docs)?;
    a_night_of_the_cronjobs(&docs)?;
    plugin_decides(&plugin)?;
    Ok(Completion::Completed)
}

/// The NPD plugin's command on a broken and a healthy node: NPD's exit
/// codes, one line of at most 80 characters, the passive tier.
fn plugin_decides(plugin: &[&str]) -> Result<(), Failed> {
    for (scenario, rc, said) in [
        (
            "kfd-missing",
            1,
            "rocgate: kfd-missing /dev/kfd does not exist",
        ),
        ("mi300x-8", 0, "rocgate: ok 8 GPUs (passive)"),
    ] {
        let n = node(scenario);
        let out = util::rocgate()
            .args(plugin)
            .arg("--sysroot")
            .arg(&n.root)
            .output()?;
        let line = String::from_utf8_lossy(&out.stdout);
        check(
            out.status.code() == Some(rc)
                && line.starts_with(said)
                && line.lines().count() == 1
                && line.trim_end().chars().count() <= 80,
            format!("{scenario}: exit {:?}, {line:?}", out.status.code()),
        )?;
    }
    Ok(())
}

/// The two CronJobs' commands as their pods run them, on a sysroot instead
/// of the host: two nodes write their reports into tonight's directory,
/// one of them broken (exit 1, which the pod failure policy fails without
/// a retry), and the fleet report reads tonight's only, says what failed,
/// fails, keeps fleet.md and fleet.html, counts the nodes that did not
/// report and removes nights older than 14 days.
fn a_night_of_the_cronjobs(docs: &[(String, Value)]) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let reports = dir.path().join("reports");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin)?;
    // `rocgate run` reads the node's sysroot; everything else as it is.
    std::fs::write(
        bin.join("rocgate"),
        format!(
            "#!/bin/sh\nif [ \"$1\" = run ]; then exec {bin} \"$@\" --sysroot \"$NODE_SYSROOT\"; fi\n\
             exec {bin} \"$@\"\n",
            bin = rocgate_bin().display()
        ),
    )?;
    std::fs::set_permissions(
        bin.join("rocgate"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = |cronjob: &str| -> Result<String, Failed> {
        let pod = pod_spec(named(docs, "CronJob", cronjob)?).ok_or("no pod")?;
        let args = list(&pod["containers"][0]["args"]);
        check(
            list(&pod["containers"][0]["command"]) == [Value::from("/bin/sh"), Value::from("-c")]
                && args.len() == 1,
            format!("{cronjob} runs no shell script"),
        )?;
        Ok(args[0]
            .as_str()
            .unwrap_or_default()
            .replace("/reports", &reports.display().to_string()))
    };
    let sh = |script: &str, env: &[(&str, &str)]| -> Result<std::process::Output, Failed> {
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(script)
            .env("PATH", &path)
            .env("ROCGATE_CONFIG", "");
        c.env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_STEP_SUMMARY");
        for (k, v) in env {
            c.env(k, v);
        }
        Ok(c.output()?)
    };
    let (old, stale) = (
        reports.join("rocgate-standard-29000000"),
        reports.join("rocgate-standard-28970000"),
    );
    for (night, report) in [(&old, "gpu-z.json"), (&stale, "gpu-y.json")] {
        std::fs::create_dir_all(night)?;
        std::fs::write(night.join(report), "{}")?;
    }
    let touched = Command::new("touch")
        .args(["-d", "20 days ago"])
        .arg(&stale)
        .status()?;
    check(touched.success(), "touch -d failed")?;
    let standard = script("rocgate-standard")?;
    for (name, scenario, rc) in [("gpu-a", "mi300x-8", 0), ("gpu-b", "gpu-count-mismatch", 1)] {
        let n = node(scenario);
        let out = sh(
            &standard,
            &[
                ("JOB_NAME", "rocgate-standard-29001440"),
                ("ROCGATE_NODE_NAME", name),
                ("NODE_SYSROOT", n.root.to_str().unwrap()),
            ],
        )?;
        check(
            out.status.code() == Some(rc),
            format!(
                "{name}: exit {:?}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ),
        )?;
        let json: Value = serde_json::from_slice(&std::fs::read(
            reports.join(format!("rocgate-standard-29001440/{name}.json")),
        )?)?;
        check(
            json["node"]["hostname"] == name && json["tier"] == "standard",
            format!("{name}'s report: {}", json["node"]),
        )?;
    }
    let tonight = reports.join("rocgate-standard-29001440");
    let report = script("rocgate-fleet-report")?;
    for (expected, said) in [("2", None), ("3", Some("2 of 3 nodes reported"))] {
        let out = sh(&report, &[("ROCGATE_EXPECT_NODES", expected)])?;
        let text = String::from_utf8_lossy(&out.stdout);
        check(
            out.status.code() == Some(1)
                && text.contains("gpu-b")
                && text.contains("gpu-count-mismatch")
                && !text.contains("gpu-z")
                && said.is_none_or(|s| text.contains(s)),
            format!("the fleet report: exit {:?}\n{text}", out.status.code()),
        )?;
    }
    check(
        std::fs::read_to_string(tonight.join("fleet.md"))?.contains("gpu-b")
            && std::fs::metadata(tonight.join("fleet.html"))?.len() > 0,
        "no fleet.md or fleet.html beside tonight's reports",
    )?;
    check(
        old.is_dir() && !stale.exists(),
        "the report removed the wrong nights",
    )?;
    Ok(())
}

/// Every document of `files` as JSON, each with the text of its file, read
/// by PyYAML (kubernetes-validate's own parser); `None` without it.
fn yaml_documents(files: &[PathBuf]) -> Result<Option<Vec<(String, Value)>>, Failed> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sys, yaml\n\
             json.dump([[d for d in yaml.safe_load_all(open(f)) if d] for f in sys.argv[1:]], sys.stdout)",
        )
        .args(files)
        .output()?;
    if !out.status.success() {
        return Ok(None);
    }
    let per_file: Vec<Vec<Value>> = serde_json::from_slice(&out.stdout)?;
    let mut docs = Vec::new();
    for (file, list) in files.iter().zip(per_file) {
        let text = std::fs::read_to_string(file)?;
        docs.extend(list.into_iter().map(|d| (text.clone(), d)));
    }
    Ok(Some(docs))
}

/// The pod spec a workload runs: a DaemonSet's, a CronJob's Job's.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match doc["kind"].as_str()? {
        "DaemonSet" => Some(&doc["spec"]["template"]["spec"]),
        "CronJob" => Some(&doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
        _ => None,
    }
}

fn named<'a>(docs: &'a [(String, Value)], kind: &str, name: &str) -> Result<&'a Value, Failed> {
    docs.iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .ok_or_else(|| format!("no {kind} {name}").into())
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// The node's GPU taint is tolerated.
fn tolerates_gpu_taint(pod: &Value) -> bool {
    list(&pod["tolerations"]).iter().any(|t| {
        t["key"] == "amd.com/gpu" && t["operator"] == "Exists" && t["effect"] == "NoSchedule"
    })
}

/// The container learns its node's name as ROCGATE_NODE_NAME.
fn names_its_node(container: &Value) -> bool {
    list(&container["env"]).iter().any(|e| {
        e["name"] == "ROCGATE_NODE_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    })
}

/// The host path mounted at `at` in the container (and whether read-only).
fn host_mount<'a>(pod: &'a Value, container: &Value, at: &str) -> Option<(&'a str, bool)> {
    let mount = list(&container["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == at)?;
    let volume = list(&pod["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])?;
    Some((
        volume["hostPath"]["path"].as_str()?,
        mount["readOnly"] == true,
    ))
}

/// The claim mounted at `at` in the container.
fn claim_at<'a>(pod: &'a Value, container: &Value, at: &str) -> Option<&'a str> {
    let mount = list(&container["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == at)?;
    list(&pod["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])?["persistentVolumeClaim"]["claimName"]
        .as_str()
}

/// The command line a container runs, as one string.
fn command_line(container: &Value) -> String {
    list(&container["command"])
        .iter()
        .chain(list(&container["args"]))
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the manifests' comments promise: every pod on a GPU
/// node tolerates the GPU taint, names its node, reads the host at /host;
/// the monitors run the passive tier; the CronJob's Job lets each node fail
/// alone and ends by a deadline before its fleet report starts; every
/// namespace and claim used is defined or its creation documented.
fn manifests_do_what_they_say(docs: &[(String, Value)]) -> Result<(), Failed> {
    let defined: Vec<&str> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "Namespace")
        .filter_map(|(_, d)| d["metadata"]["name"].as_str())
        .collect();
    for (text, doc) in docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        if let Some(ns) = doc["metadata"]["namespace"].as_str() {
            check(
                ns == "kube-system"
                    || defined.contains(&ns)
                    || text.contains(&format!("kubectl create namespace {ns}")),
                format!("{kind} uses namespace {ns}, neither defined nor documented"),
            )?;
        }
        let Some(pod) = pod_spec(doc) else { continue };
        for claim in list(&pod["volumes"])
            .iter()
            .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
        {
            let pvc = named(docs, "PersistentVolumeClaim", claim)?;
            check(
                pvc["metadata"]["namespace"] == doc["metadata"]["namespace"]
                    && list(&pvc["spec"]["accessModes"]).contains(&Value::from("ReadWriteMany")),
                format!("{kind}'s claim {claim}: {pvc}"),
            )?;
        }
    }
    for name in ["node-problem-detector-rocgate", "rocgate-textfile"] {
        let pod = pod_spec(named(docs, "DaemonSet", name)?).ok_or("no pod")?;
        let container = &pod["containers"][0];
        check(
            tolerates_gpu_taint(pod),
            format!("{name}: {}", pod["tolerations"]),
        )?;
        check(
            names_its_node(container),
            format!("{name}: {}", container["env"]),
        )?;
        check(
            host_mount(pod, container, "/host") == Some(("/", true)),
            format!("{name} does not mount the host's / read-only at /host"),
        )?;
    }
    let textfile = pod_spec(named(docs, "DaemonSet", "rocgate-textfile")?).ok_or("no pod")?;
    let line = command_line(&textfile["containers"][0]);
    check(
        line.contains("rocgate health --tier passive") && line.contains("--host-root /host"),
        format!("the textfile DaemonSet runs {line}"),
    )?;
    check(
        host_mount(textfile, &textfile["containers"][0], "/textfile")
            == Some((TEXTFILE_DIR, false)),
        format!("the textfile DaemonSet does not write to {TEXTFILE_DIR}"),
    )?;

    let standard = named(docs, "CronJob", "rocgate-standard")?;
    let job = &standard["spec"]["jobTemplate"]["spec"];
    let completions = job["completions"].as_u64().ok_or("no completions")?;
    check(
        job["completionMode"] == "Indexed"
            && job["backoffLimitPerIndex"].is_u64()
            && job["maxFailedIndexes"]
                .as_u64()
                .is_some_and(|m| m <= completions)
            && job["backoffLimit"].is_null(),
        format!("the standard Job's failures end other nodes' pods: {job}"),
    )?;
    let rules = list(&job["podFailurePolicy"]["rules"]);
    check(
        rules.iter().any(|r| {
            r["action"] == "FailIndex"
                && list(&r["onExitCodes"]["values"]).contains(&Value::from(1))
        }),
        format!("a broken node (exit 1) is retried: {rules:?}"),
    )?;
    let pod = pod_spec(standard).ok_or("no pod")?;
    let container = &pod["containers"][0];
    let line = command_line(container);
    check(
        tolerates_gpu_taint(pod),
        format!("the standard pod: {}", pod["tolerations"]),
    )?;
    check(
        names_its_node(container),
        format!("the standard pod: {}", container["env"]),
    )?;
    check(
        host_mount(pod, container, "/host") == Some(("/", true)),
        "the standard pod does not mount the host's / read-only at /host",
    )?;
    check(
        container["resources"]["limits"]["amd.com/gpu"] == 8
            && line.contains("rocgate run --tier standard")
            && line.contains("--expect-gpus 8"),
        format!(
            "the standard pod holds {} GPUs and runs {line}",
            container["resources"]
        ),
    )?;

    // The fleet report reads the claim the nodes write to, after the
    // standard Job's deadline has ended it.
    let report = named(docs, "CronJob", "rocgate-fleet-report")?;
    let report_pod = pod_spec(report).ok_or("no pod")?;
    let written = claim_at(pod, container, "/reports");
    check(
        command_line(&report_pod["containers"][0]).contains("rocgate fleet report"),
        "the report CronJob runs no fleet report",
    )?;
    check(
        written.is_some()
            && claim_at(report_pod, &report_pod["containers"][0], "/reports") == written,
        format!("the nodes write to {written:?}, the report reads another claim"),
    )?;
    let deadline = job["activeDeadlineSeconds"].as_u64().ok_or("no deadline")?;
    let (at, report_at) = (
        daily_minute(&standard["spec"]["schedule"])?,
        daily_minute(&report["spec"]["schedule"])?,
    );
    let gap = (report_at + 24 * 60 - at) % (24 * 60) * 60;
    check(
        deadline > 0 && deadline < gap && standard["spec"]["concurrencyPolicy"] == "Forbid",
        format!("the standard Job may run {deadline} s, its report starts {gap} s after it"),
    )?;
    Ok(())
}

/// The minute of the day a daily `M H * * *` schedule starts.
fn daily_minute(schedule: &Value) -> Result<u64, Failed> {
    let fields: Vec<&str> = schedule.as_str().unwrap_or_default().split(' ').collect();
    match fields.as_slice() {
        [m, h, "*", "*", "*"] => Ok(h.parse::<u64>()? * 60 + m.parse::<u64>()?),
        _ => Err(format!("not a daily schedule: {schedule}").into()),
    }
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
    // A scontrol that answers with the node state the trial sets (none:
    // Slurm cannot say).
    let stubs = tempfile::tempdir()?;
    std::fs::write(
        stubs.path().join("scontrol"),
        "#!/bin/sh\n[ -n \"$NODE_STATE\" ] || exit 1\n\
         echo \"NodeName=$4 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State=$NODE_STATE ThreadsPerCore=1\"\n",
    )?;
    std::fs::set_permissions(
        stubs.path().join("scontrol"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let path = format!(
        "{}:{}",
        stubs.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |root: &Path, state: &str, args: &str| -> Result<String, Failed> {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "die() {{ echo \"die $1 $2\"; }}; log() {{ echo \"log $*\"; }}; dbg() {{ echo \"dbg $*\"; }}; \
                 source \"$1\"; check_rocgate --sysroot \"$2\" {args}; echo \"rc $?\""
            ))
            .arg("nhc")
            .arg(&script)
            .arg(root)
            .env("ROCGATE", rocgate_bin())
            .env("ROCGATE_CONFIG", "")
            .env("PATH", &path)
            .env("SLURMD_NODENAME", "gpu07")
            .env("NODE_STATE", state)
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
        let out = run(root, "IDLE", "")?;
        let died = out.contains("die ");
        check(
            out.contains(said) && out.ends_with(&format!("rc {rc}\n")) && died == (rc == 1),
            &out,
        )?;
    }
    // The tier follows the node's Slurm state, as `health --slurm` picks
    // it, unless the caller gives one: passive while jobs run or Slurm
    // cannot say, quick on an idle node.
    for (state, args, tier) in [
        ("ALLOCATED", "", "passive"),
        ("MIXED+DRAIN", "", "passive"),
        ("IDLE+COMPLETING", "", "passive"),
        ("", "", "passive"),
        ("IDLE", "", "quick"),
        ("IDLE+DRAIN", "", "quick"),
        ("ALLOCATED", "--tier quick", "quick"),
    ] {
        let json = tempfile::NamedTempFile::new()?;
        let out = run(
            &ok.root,
            state,
            &format!("{args} --json {}", json.path().display()),
        )?;
        let report: Value = serde_json::from_slice(&std::fs::read(json.path())?)?;
        check(
            report["tier"] == tier && out.ends_with("rc 0\n"),
            format!("state {state:?}, {args:?}: tier {}\n{out}", report["tier"]),
        )?;
    }
    Ok(Completion::Completed)
}

/// The one directory node_exporter's textfile collector reads, in the
/// Slurm health check, the Kubernetes DaemonSet and the README.
const TEXTFILE_DIR: &str = "/var/lib/node_exporter/textfile";

/// Every node_exporter textfile path the deploy files and the README name
/// is [`TEXTFILE_DIR`] (or its `rocgate.prom`), and the Slurm wrapper
/// writes there unless told otherwise.
fn one_textfile_directory() -> Result<(), Failed> {
    let wrapper = std::fs::read_to_string(repo().join("deploy/slurm/rocgate-healthcheck"))?;
    check(
        wrapper.contains(&format!("${{ROCGATE_TEXTFILE_DIR:-{TEXTFILE_DIR}}}")),
        "the Slurm health check writes elsewhere by default",
    )?;
    let mut files = vec![repo().join("README.md")];
    for sub in ["deploy/slurm", "deploy/kubernetes", "deploy/systemd"] {
        for entry in std::fs::read_dir(repo().join(sub))? {
            files.push(entry?.path());
        }
    }
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        for (at, _) in text.match_indices("/var/lib/") {
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/_-.".contains(*c))
                .collect();
            let path = path.trim_end_matches('.');
            if path.contains("exporter") || path.contains("prometheus") || path.contains("textfile")
            {
                seen += 1;
                check(
                    path == TEXTFILE_DIR || path == format!("{TEXTFILE_DIR}/rocgate.prom"),
                    format!("{} names {path}, not {TEXTFILE_DIR}", file.display()),
                )?;
            }
        }
    }
    check(
        seen >= 4,
        format!("only {seen} mentions of the textfile directory"),
    )?;
    Ok(())
}

/// The npm packages the GitHub Actions trial matches with: the minimatch
/// that @actions/glob 0.3 to 0.5 (actions/upload-artifact v4, the JUnit
/// reporters) bundle, and a YAML parser for the README's workflows.
const NPM_PACKAGES: [&str; 2] = ["minimatch@3.1.5", "yaml@2.9.1"];

/// Runs tests/actions_glob.js in `mode` on `input`.
fn actions_glob(modules: &Path, mode: &str, input: &Value) -> Result<Value, Failed> {
    let mut child = Command::new("node")
        .arg(repo().join("tests/actions_glob.js"))
        .arg(mode)
        .env("NODE_PATH", modules.join("node_modules"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(input.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    check(
        out.status.success(),
        format!("node {mode}: {}", String::from_utf8_lossy(&out.stderr)),
    )?;
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The files under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Result<Vec<String>, Failed> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let rel = path.strip_prefix(dir)?.to_string_lossy().into_owned();
                found.push(rel);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Every `actions/upload-artifact` step of the README's workflows uploads
/// every file the job's rocgate command writes, and its JUnit reporter
/// finds the JUnit file: each workflow's `run:` is run (on a fixture node)
/// in an empty workspace, and the step's `path:` (the reporter's
/// `report_paths:`) is matched against what it left there as
/// @actions/glob matches, braces being no pattern.
fn github_actions_artifacts() -> Result<Completion, Failed> {
    if !have("node") || !have("npm") {
        return missing("node and npm are not installed");
    }
    let modules = tempfile::tempdir()?;
    let install = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--silent",
            "--prefix",
        ])
        .arg(modules.path())
        .args(NPM_PACKAGES)
        .output()?;
    if !install.status.success() {
        return missing(&format!(
            "npm could not install {NPM_PACKAGES:?}: {}",
            String::from_utf8_lossy(&install.stderr)
        ));
    }
    let readme = std::fs::read_to_string(repo().join("README.md"))?;
    let blocks: Vec<&str> = readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split_once("```").map(|(yaml, _)| yaml))
        .collect();
    let jobs = actions_glob(modules.path(), "steps", &Value::from(blocks.clone()))?;
    let healthy = node("mi300x-8");
    let mut uploads = 0;
    for steps in list(&jobs).iter().flat_map(list) {
        let steps = list(steps);
        let uses =
            |s: &Value, action: &str| s["uses"].as_str().is_some_and(|u| u.starts_with(action));
        if !steps.iter().any(|s| uses(s, "actions/upload-artifact")) {
            continue;
        }
        // The job's rocgate command, run where the workflow runs it.
        let workspace = tempfile::tempdir()?;
        let mut junit = Vec::new();
        for run in steps.iter().filter_map(|s| s["run"].as_str()) {
            let run = run.trim();
            let args = run
                .strip_prefix("cargo run --release -- ")
                .or_else(|| run.strip_prefix("rocgate "))
                .ok_or_else(|| format!("not a rocgate command: {run}"))?;
            check(
                !args.contains(|c| "'\"$`|&;<>\\\n".contains(c)),
                format!("a shell would change {run:?}"),
            )?;
            let args: Vec<&str> = args.split_whitespace().collect();
            junit.extend(
                args.windows(2)
                    .filter(|w| w[0] == "--junit")
                    .map(|w| w[1].to_string()),
            );
            let out = util::rocgate()
                .args(&args)
                .arg("--sysroot")
                .arg(&healthy.root)
                .current_dir(workspace.path())
                .output()?;
            check(
                matches!(out.status.code(), Some(0 | 1)),
                format!("{run}: {}", String::from_utf8_lossy(&out.stderr)),
            )?;
        }
        let written = files_under(workspace.path())?;
        check(
            written.len() >= 3 && !junit.is_empty(),
            format!("the workflow wrote {written:?}"),
        )?;
        let picked = |patterns: &str| {
            actions_glob(
                modules.path(),
                "match",
                &serde_json::json!({
                    "workspace": workspace.path(),
                    "patterns": patterns,
                    "files": written,
                }),
            )
        };
        for step in steps {
            if uses(step, "actions/upload-artifact") {
                uploads += 1;
                let path = step["with"]["path"]
                    .as_str()
                    .ok_or("an upload without a path")?;
                let uploaded = picked(path)?;
                check(
                    uploaded == Value::from(written.clone()),
                    format!("path: {path:?} uploads {uploaded} of {written:?}"),
                )?;
            }
            if let Some(reports) = step["with"]["report_paths"].as_str() {
                let read = picked(reports)?;
                check(
                    read == Value::from(junit.clone()),
                    format!("report_paths: {reports:?} reads {read}, not {junit:?}"),
                )?;
            }
        }
        // The matcher is @actions/glob's: braces are literal text (with
        // them expanded, `{a,b,c}` would pick all three), a later `!` line
        // excludes what an earlier one picked.
        let first = &written[0];
        check(
            picked(&format!("{{{}}}", written.join(",")))? == Value::from(Vec::<String>::new())
                && picked(&format!("{first}\n!{first}"))? == Value::from(Vec::<String>::new())
                && picked(first)? == Value::from(vec![first.clone()]),
            "the matcher is not @actions/glob's",
        )?;
    }
    check(
        uploads >= 2,
        format!("only {uploads} upload steps in README.md"),
    )?;
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
        "rocgate_check_failures{code=\"kfd-missing\",source=\"health\"} 1",
        "rocgate_layer_up{layer=\"kfd\",pci_address=\"\",scope=\"node\",source=\"health\"} 0",
        "rocgate_run_passed{source=\"health\"} 0",
    ] {
        check(
            body.lines().any(|l| l == line),
            format!("no {line:?} in\n{body}"),
        )?;
    }
    Ok(Completion::Completed)
}

/// A one-node Slurm cluster in a temporary directory: slurmctld and slurmd
/// on free ports, with 8 GPUs (gres, on stand-in device files) and the
/// shipped health check as the HealthCheckProgram, checking the node named
/// in `current` with the site settings in `defaults`.
struct Cluster {
    dir: tempfile::TempDir,
    _daemons: Vec<Daemon>,
}

impl Cluster {
    fn start() -> Result<Cluster, Failed> {
        let dir = tempfile::tempdir()?;
        let d = dir.path();
        for sub in ["state", "spool", "textfile", "dev"] {
            std::fs::create_dir_all(d.join(sub))?;
        }
        // The GPUs' render nodes as gres.conf names them; Slurm wants
        // character devices (these are /dev/null's numbers, never opened).
        for minor in 128..136 {
            nix::sys::stat::mknod(
                &d.join(format!("dev/renderD{minor}")),
                nix::sys::stat::SFlag::S_IFCHR,
                nix::sys::stat::Mode::from_bits_truncate(0o600),
                nix::sys::stat::makedev(1, 3),
            )?;
        }
        let conf = d.join("slurm.conf");
        let health = d.join("healthcheck");
        // The shipped HealthCheckProgram, told where this test's rocgate,
        // node, site settings and cluster are. slurmd runs it with
        // SLURMD_NODENAME set. Each run leaves its JSON report.
        std::fs::write(
            &health,
            format!(
                "#!/bin/sh\nexport SLURM_CONF={conf}\nexport PATH=/usr/bin:/bin:/usr/sbin:/sbin\n\
                 export ROCGATE={bin} ROCGATE_DEFAULTS={d}/defaults ROCGATE_CONFIG=\n\
                 export ROCGATE_ARGS=\"--sysroot $(cat {d}/current) --json {d}/health.json\"\n\
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
                 SelectType=select/cons_tres\nMpiDefault=none\nReturnToService=2\nGresTypes=gpu\n\
                 HealthCheckProgram={health}\nHealthCheckInterval=3\nHealthCheckNodeState=ANY\n\
                 NodeName=rg1 NodeAddr=127.0.0.1 CPUs=1 Gres=gpu:8 State=UNKNOWN\n\
                 PartitionName=debug Nodes=rg1 Default=YES State=UP\n",
                d = d.display(),
                health = health.display()
            ),
        )?;
        std::fs::write(
            d.join("gres.conf"),
            format!(
                "NodeName=rg1 Name=gpu File={}/dev/renderD[128-135]\n",
                d.display()
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
        let mut cluster = Cluster {
            dir,
            _daemons: Vec::new(),
        };
        cluster.defaults("")?;
        // In the foreground (-D), so dropping the handle ends each daemon.
        cluster._daemons.push(daemon("slurmctld", &["-D", "-i"])?);
        cluster.wait_for("slurmctld to answer", |c| {
            c.scontrol(&["ping"]).contains("UP")
        })?;
        cluster
            ._daemons
            .push(daemon("slurmd", &["-D", "-N", "rg1"])?);
        Ok(cluster)
    }

    fn checks(&self, root: &Path) -> Result<(), Failed> {
        std::fs::write(self.dir.path().join("current"), root.display().to_string())?;
        Ok(())
    }

    /// The site's /etc/default/rocgate: the test's budget and textfile
    /// directory, then `more`.
    fn defaults(&self, more: &str) -> Result<(), Failed> {
        std::fs::write(
            self.dir.path().join("defaults"),
            format!(
                "ROCGATE_BUDGET=20\nROCGATE_TEXTFILE_DIR={}/textfile\n{more}",
                self.dir.path().display()
            ),
        )?;
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

    /// The `KEY=value` of `scontrol show job ID`.
    fn job(&self, id: &str, key: &str) -> String {
        let text = self.scontrol(&["-o", "show", "job", id]);
        text.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{key}=")))
            .unwrap_or_default()
            .to_string()
    }

    /// `sbatch` with the test's environment plus `env`, from the cluster's
    /// directory; the job's id.
    fn sbatch(&self, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<String, Failed> {
        let mut c = Command::new("sbatch");
        c.arg("--parsable")
            .args(args)
            .current_dir(self.dir.path())
            .env("SLURM_CONF", self.dir.path().join("slurm.conf"))
            .env("ROCGATE_CONFIG", "");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output()?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        check(
            out.status.success() && !id.is_empty(),
            format!("sbatch {args:?}: {}", String::from_utf8_lossy(&out.stderr)),
        )?;
        Ok(id)
    }

    /// Waits until the health checks' log, from byte `from` on, says
    /// `what` `count` times.
    fn wait_for_log(&self, from: usize, what: &str, count: usize) -> Result<(), Failed> {
        let log = self.dir.path().join("health.log");
        self.wait_for(&format!("{count} health checks saying {what:?}"), |_| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.get(from..)
                .is_some_and(|t| t.matches(what).count() >= count)
        })
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(self.dir.path().join("health.log")).map_or(0, |m| m.len() as usize)
    }

    /// The tier of the last health check's JSON report.
    fn health_tier(&self) -> String {
        std::fs::read(self.dir.path().join("health.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|j| j["tier"].as_str().map(String::from))
            .unwrap_or_default()
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
    for tool in [
        "slurmctld",
        "slurmd",
        "scontrol",
        "sinfo",
        "sbatch",
        "scancel",
    ] {
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
    let lost = node("gpu-count-mismatch");
    let unreadable = tempfile::tempdir()?;
    let cluster = Cluster::start()?;
    // A broken layer drains the node with rocgate's reason.
    cluster.checks(&broken.root)?;
    cluster.wait_for("the drain", |c| {
        c.reasons()
            .starts_with("rocgate: kfd-missing /dev/kfd does not exist|")
    })?;
    // The shipped wrapper also feeds the textfile collector, in the
    // directory of the site's settings, naming the node as Slurm does.
    let prom = std::fs::read_to_string(cluster.dir.path().join("textfile/rocgate.prom"))?;
    check(
        prom.contains("rocgate_check_failures{source=\"health\",code=\"kfd-missing\"} 1")
            && prom
                .lines()
                .any(|l| l.starts_with("rocgate_info{") && l.contains("hostname=\"rg1\"")),
        &prom,
    )?;
    // Healthy again: rocgate resumes the node it drained.
    cluster.checks(&healthy.root)?;
    cluster.wait_for("the resume", |c| {
        c.reasons().trim().is_empty() && c.state().trim() == "idle"
    })?;
    // rocgate's own trouble (a sysroot it cannot read: unknown) leaves the
    // node as it is.
    let from = cluster.log_len();
    cluster.checks(unreadable.path())?;
    cluster.wait_for_log(from, "rocgate: unknown", 2)?;
    check(
        cluster.reasons().trim().is_empty() && cluster.state().trim() == "idle",
        format!(
            "unknown changed the node: {:?} {:?}",
            cluster.reasons(),
            cluster.state()
        ),
    )?;
    // While a job holds the node, the health check reads files only; on
    // the idle node it runs the quick tier again.
    cluster.checks(&healthy.root)?;
    let sleeper = cluster.sbatch(&["--output=/dev/null", "--wrap", "sleep 300"], &[])?;
    cluster.wait_for("the job to hold the node", |c| {
        c.state().trim() == "allocated"
    })?;
    cluster.wait_for("a passive health check", |c| c.health_tier() == "passive")?;
    let _ = Command::new("scancel")
        .arg(&sleeper)
        .env("SLURM_CONF", cluster.dir.path().join("slurm.conf"))
        .status();
    cluster.wait_for("the node to be idle", |c| c.state().trim() == "idle")?;
    cluster.wait_for("a quick health check", |c| c.health_tier() == "quick")?;
    fleet_sbatch(&cluster, &lost.root)?;
    // A GPU lost from the bus, with the site expecting 8: drained, the
    // full reason naming the missing GPU's address.
    cluster.defaults("ROCGATE_EXPECT_GPUS=8\n")?;
    cluster.checks(&lost.root)?;
    cluster.wait_for("the lost GPU's drain", |c| {
        c.reasons()
            .starts_with("rocgate: gpu-count-mismatch missing 0000:a6:00.0")
    })?;
    let shown = cluster.scontrol(&["show", "node", "rg1"]);
    check(
        shown.contains("Reason=rocgate: gpu-count-mismatch missing 0000:a6:00.0: 7 of 8 expected"),
        &shown,
    )?;
    let listed = cluster.slurm("sinfo", &["-R"]);
    check(listed.contains("rocgate: gpu-count-m"), &listed)?;
    cluster.checks(&healthy.root)?;
    cluster.wait_for("the resume", |c| {
        c.reasons().trim().is_empty() && c.state().trim() == "idle"
    })?;
    // A node drained by hand stays drained with its reason, broken or not.
    cluster.scontrol(&["update", "NodeName=rg1", "State=DRAIN", "Reason=bad DIMM"]);
    cluster.wait_for("the manual drain", |c| c.reasons().starts_with("bad DIMM|"))?;
    for root in [&broken.root, &healthy.root] {
        let from = cluster.log_len();
        cluster.checks(root)?;
        cluster.wait_for_log(from, "not rocgate's", 2)?;
        check(
            cluster.reasons().starts_with("bad DIMM|"),
            cluster.reasons(),
        )?;
    }
    Ok(Completion::Completed)
}

/// The shipped fleet sbatch on the cluster, its node missing a GPU: the
/// job gets the node's 8 GPUs, the node's run expects them (its report,
/// named by the node, fails on the lost GPU), and the fleet report that
/// ends the job says so and fails it.
fn fleet_sbatch(cluster: &Cluster, root: &Path) -> Result<(), Failed> {
    let out = cluster.dir.path().join("fleet");
    let args = format!("--sysroot {}", root.display());
    let id = cluster.sbatch(
        &[repo()
            .join("deploy/slurm/rocgate-fleet.sbatch")
            .to_str()
            .unwrap()],
        &[
            ("ROCGATE", rocgate_bin().as_os_str()),
            ("ROCGATE_OUT", out.as_os_str()),
            ("ROCGATE_ARGS", args.as_ref()),
        ],
    )?;
    cluster.wait_for("the fleet job to end", |c| {
        matches!(c.job(&id, "JobState").as_str(), "COMPLETED" | "FAILED")
    })?;
    let log = std::fs::read_to_string(cluster.dir.path().join(format!("rocgate-fleet-{id}.out")))
        .unwrap_or_default();
    check(
        cluster.job(&id, "JobState") == "FAILED" && cluster.job(&id, "ExitCode") == "1:0",
        format!(
            "the fleet job: {}\n{log}",
            cluster.scontrol(&["show", "job", &id])
        ),
    )?;
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("rg1.json"))?)?;
    let lost = list(&report["results"])
        .iter()
        .find(|r| r["finding"]["code"] == "gpu-count-mismatch");
    check(
        report["node"]["hostname"] == "rg1"
            && report["tier"] == "standard"
            && lost.is_some_and(|r| {
                r["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("7 of 8 expected")
            }),
        format!("rg1.json: {} {}\n{log}", report["node"], report["tier"]),
    )?;
    let fleet = std::fs::read_to_string(out.join("fleet.md"))?;
    check(
        fleet.contains("rg1")
            && fleet.contains("gpu-count-mismatch")
            && log.contains("gpu-count-mismatch"),
        format!("fleet.md:\n{fleet}\njob output:\n{log}"),
    )?;
    for file in ["rg1.xml", "rg1.html", "fleet.html"] {
        check(out.join(file).is_file(), format!("no {file}"))?;
    }
    Ok(())
}

/// Serves the textfile collector's `dir` with node_exporter until dropped:
/// the daemon and the first `/metrics` body.
fn scrape(dir: &Path) -> Result<(Daemon, String), Failed> {
    let port = free_port()?;
    let exporter = Daemon(
        Command::new("prometheus-node-exporter")
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .arg(format!("--collector.textfile.directory={}", dir.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(body) = http_get(port, "/metrics") {
            return Ok((exporter, body));
        }
        check(
            Instant::now() < deadline,
            "node_exporter did not answer in 30 s",
        )?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// health's textfile and two runs' (quick and extended) in one collector
/// directory, as the deploy files put them: node_exporter serves all three
/// (a series in two files would fail the scrape with "collected before with
/// the same name and label values").
fn textfiles_side_by_side() -> Result<Completion, Failed> {
    if !have("prometheus-node-exporter") {
        return missing("prometheus-node-exporter is not installed");
    }
    let dir = tempfile::tempdir()?;
    let broken = node("kfd-missing");
    for (args, file) in [
        (&["health"][..], "rocgate.prom"),
        (&["run", "--quiet"][..], "rocgate-quick.prom"),
        (
            &["run", "--quiet", "--tier", "extended"][..],
            "rocgate-extended.prom",
        ),
    ] {
        let prom = dir.path().join(file);
        Command::new(rocgate_bin())
            .args(args)
            .arg("--sysroot")
            .arg(&broken.root)
            .arg("--prom")
            .arg(&prom)
            .env("ROCGATE_CONFIG", "")
            .output()?;
        check(prom.is_file(), format!("no {file} written"))?;
    }
    let (_exporter, body) = scrape(dir.path())?;
    for line in [
        "node_textfile_scrape_error 0",
        "rocgate_run_passed{source=\"health\"} 0",
        "rocgate_run_passed{source=\"run\",tier=\"quick\"} 0",
        "rocgate_run_passed{source=\"run\",tier=\"extended\"} 0",
        "rocgate_check_failures{code=\"kfd-missing\",source=\"run\",tier=\"extended\"} 1",
    ] {
        check(
            body.lines().any(|l| l == line),
            format!("no {line:?} in\n{body}"),
        )?;
    }
    Ok(Completion::Completed)
}
