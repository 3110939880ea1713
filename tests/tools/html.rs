//! The HTML reports as people open them: each page rendered in headless
//! Chromium (Debian's `chromium`), its DOM read back as the browser built it,
//! a screenshot checked for the grid's colours, and every request the page
//! makes caught by a proxy the test runs (a witness that a page calling out
//! is shown to trip).
//!
//! Without Chromium the browser trials are ignored with the reason; under
//! CI=true they fail instead (ci/test installs it).

use crate::util;
use crate::util::{FakeRun, check, have, missing, node, on_sysroot};
use libtest_mimic::{Completion, Failed, Trial};
use scraper::{Html, Selector};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![
        in_chromium(
            "a_run_page_shows_its_grid_in_chromium_and_requests_nothing",
            run_page_in_chromium,
        ),
        in_chromium(
            "the_request_witness_catches_a_page_that_calls_out",
            witness_catches_requests,
        ),
        in_chromium(
            "a_fleet_page_shows_nodes_by_layer_in_chromium",
            fleet_page_in_chromium,
        ),
        in_chromium(
            "markup_in_node_text_stays_text_in_chromium",
            hostile_text_in_chromium,
        ),
        Trial::test(
            "measurements_are_drawn_against_their_floors",
            measurements_against_floors,
        ),
    ]
}

/// A trial that needs Chromium: without it, `missing` (a failure on CI,
/// ignored elsewhere), never a pass.
fn in_chromium(name: &str, test: fn() -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        if !have("chromium") {
            return missing("chromium is not installed");
        }
        test().map(|()| Completion::Completed)
    })
}

/// A proxy that answers every request with 502 and remembers its first
/// line (`GET http://...` or `CONNECT host:443`). Chromium is pointed at it
/// for every address, loopback included, so nothing the page asks for can
/// get past it unseen.
struct Witness {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Witness {
    fn start() -> Witness {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut line = String::new();
                let _ = BufReader::new(&stream).read_line(&mut line);
                // A connection that carries no request line (Chromium opens
                // spare sockets to its proxy ahead of need and closes them
                // unused) asked for nothing.
                if !line.trim().is_empty() {
                    log.lock().unwrap().push(line.trim_end().to_string());
                }
                let _ = (&stream).write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Witness { port, seen }
    }

    /// What the page asked for: every request but Chromium's own calls
    /// to Google's services (sign-in, component updates), which Chromium
    /// 156 makes headless whatever its switches say. A page asking those
    /// hosts would go unseen here; the DOM check that no attribute holds an
    /// address (`no_address_in`) covers it.
    fn requests(&self) -> Vec<String> {
        let browsers_own = |line: &str| {
            let target = line.split_whitespace().nth(1).unwrap_or_default();
            let host = target
                .trim_start_matches("http://")
                .trim_start_matches("https://")
                .split(['/', ':'])
                .next()
                .unwrap_or_default();
            host.ends_with(".google.com") || host.ends_with(".googleapis.com")
        };
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|l| !browsers_own(l))
            .cloned()
            .collect()
    }
}

/// Debian's Chromium, headless, with the switches that keep it from calling
/// home, every request sent through `witness`.
fn chromium(witness: &Witness, profile: &Path) -> Command {
    // coreutils' timeout: a hung browser fails the trial, not CI.
    let mut c = Command::new("timeout");
    c.args(["120", "chromium"])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1000",
            "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter",
            "--disable-extensions",
            "--disable-default-apps",
            "--no-pings",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--proxy-server=http://127.0.0.1:{}", witness.port))
        // Chromium bypasses a proxy for loopback unless told not to.
        .arg("--proxy-bypass-list=<-loopback>")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// A page as Chromium built it, and a screenshot of it.
struct Rendered {
    dom: Html,
    pixels: Vec<[u8; 3]>,
}

fn render(page: &Path, witness: &Witness) -> Result<Rendered, Failed> {
    let dir = tempfile::tempdir()?;
    let url = format!("file://{}", page.display());
    let out = chromium(witness, &dir.path().join("profile"))
        .arg("--dump-dom")
        .arg(&url)
        .output()?;
    check(
        out.status.success(),
        format!("chromium --dump-dom {url}: {}", out.status),
    )?;
    let dom = Html::parse_document(&String::from_utf8_lossy(&out.stdout));
    let shot = dir.path().join("shot.png");
    let status = chromium(witness, &dir.path().join("profile"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .stdout(Stdio::null())
        .status()?;
    check(
        status.success(),
        format!("chromium --screenshot {url}: {status}"),
    )?;
    Ok(Rendered {
        dom,
        pixels: pixels(&shot)?,
    })
}

/// The screenshot's pixels as RGB.
fn pixels(png_file: &Path) -> Result<Vec<[u8; 3]>, Failed> {
    let decoder = png::Decoder::new(BufReader::new(std::fs::File::open(png_file)?));
    let mut reader = decoder.read_info()?;
    let mut buf = vec![0; reader.output_buffer_size().ok_or("PNG too large")?];
    let info = reader.next_frame(&mut buf)?;
    let step = info.color_type.samples();
    check(
        step >= 3,
        format!("screenshot is {:?}, not RGB", info.color_type),
    )?;
    Ok(buf[..info.buffer_size()]
        .chunks_exact(step)
        .map(|p| [p[0], p[1], p[2]])
        .collect())
}

impl Rendered {
    fn count(&self, rgb: u32) -> usize {
        let want = [(rgb >> 16) as u8, (rgb >> 8) as u8, rgb as u8];
        self.pixels.iter().filter(|p| **p == want).count()
    }

    fn all(&self, selector: &str) -> Vec<scraper::ElementRef<'_>> {
        self.dom
            .select(&Selector::parse(selector).unwrap())
            .collect()
    }

    fn text(&self, selector: &str) -> Vec<String> {
        self.all(selector)
            .iter()
            .map(|e| e.text().collect::<String>().trim().to_string())
            .collect()
    }
}

/// `page` rendered, held to asking for nothing: no request reached the
/// witness and no attribute names an address.
fn render_self_contained(page: &Path) -> Result<Rendered, Failed> {
    let witness = Witness::start();
    let shown = render(page, &witness)?;
    check(
        witness.requests().is_empty(),
        format!("the page made requests: {:?}", witness.requests()),
    )?;
    no_address_in(&shown)?;
    Ok(shown)
}

/// Fails when any attribute of the page, or its style sheet, names an
/// address other than a fragment of the page itself or inline data.
fn no_address_in(shown: &Rendered) -> Result<(), Failed> {
    for e in shown.all("*") {
        for (name, value) in e.value().attrs() {
            let url_bearing = matches!(
                name,
                "src" | "href" | "action" | "srcset" | "poster" | "data"
            );
            let local = value.starts_with('#') || value.starts_with("data:");
            check(
                !url_bearing || local,
                format!("<{}> {name}={value:?} names an address", e.value().name()),
            )?;
        }
    }
    let css = shown.text("style").concat();
    check(
        !css.contains("url(") && !css.contains("@import"),
        "the style sheet loads something",
    )
}

/// The grid's pass and blocked backgrounds (style.css): a grid shown in
/// colour covers far more of the screen with them than the legend's chips.
const PASS_BG: u32 = 0xdafbe1;
const BLOCKED_BG: u32 = 0xeadfd0;
const GRID_PIXELS: usize = 20_000;

fn run_page_in_chromium() -> Result<(), Failed> {
    let node = node("kfd-missing");
    let dir = tempfile::tempdir()?;
    let page = dir.path().join("run.html");
    let out = on_sysroot(&["run", "--html", page.to_str().unwrap()], &node.root).output()?;
    check(out.status.code() == Some(1), format!("{out:?}"))?;
    let shown = render_self_contained(&page)?;
    // One row per scope, a column per layer, the code where KFD broke.
    let rows = shown.text("#grid tbody tr th");
    check(
        rows.len() == 9 && rows[0] == "node" && rows[8] == "gpu7",
        format!("grid rows {rows:?}"),
    )?;
    let layers = shown.text("#grid thead th");
    check(
        layers[2..]
            == [
                "system", "pci", "firmware", "amdgpu", "kfd", "compat", "hsa", "hip", "rccl",
            ],
        format!("grid columns {layers:?}"),
    )?;
    let kfd = shown.all("#grid tbody tr:first-child td.cell")[4];
    check(
        kfd.value().classes().any(|c| c == "fail")
            && kfd.text().collect::<String>().trim() == "kfd-missing",
        format!("node's kfd cell: {}", kfd.html()),
    )?;
    let blocked = shown.all("#grid td.cell.blocked").len();
    check(blocked >= 8, format!("{blocked} blocked cells"))?;
    // The likely cause and next step on top, before the grid.
    let cause = shown.text("section.cause");
    check(
        cause.first().is_some_and(|c| {
            c.contains("First failing layer: kfd")
                && c.contains("kfd-missing")
                && c.contains("Next step:")
        }),
        format!("cause box {cause:?}"),
    )?;
    // Each check in its own <details>, the failed one open, the cell's
    // link leading to it.
    let failed = shown.all(r#"details[id="node.kfd.dev_kfd"]"#);
    check(
        failed.len() == 1 && failed[0].value().attr("open").is_some(),
        "node.kfd.dev_kfd's details are missing or closed",
    )?;
    check(
        kfd.select(&Selector::parse("a").unwrap())
            .any(|a| a.value().attr("href") == Some("#node.kfd.dev_kfd")),
        "the kfd cell does not link to its check",
    )?;
    check(
        shown.count(PASS_BG) > GRID_PIXELS && shown.count(BLOCKED_BG) > GRID_PIXELS,
        format!(
            "the screenshot shows no coloured grid: {} pass and {} blocked pixels",
            shown.count(PASS_BG),
            shown.count(BLOCKED_BG)
        ),
    )?;
    Ok(())
}

fn witness_catches_requests() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let page = dir.path().join("calls-out.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><link rel=stylesheet href=\"http://cdn.rocgate.invalid/x.css\"></head>\
         <body><img src=\"http://cdn.rocgate.invalid/logo.png\"></body></html>",
    )?;
    let witness = Witness::start();
    render(&page, &witness)?;
    let seen = witness.requests();
    check(
        seen.iter().any(|l| l.contains("cdn.rocgate.invalid")),
        format!("the proxy saw {seen:?}, not the page's requests"),
    )?;
    Ok(())
}

fn fleet_page_in_chromium() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let reports = dir.path().join("reports");
    std::fs::create_dir(&reports)?;
    for name in ["mi300x-8", "kfd-missing", "firmware-load-failed"] {
        let node = node(name);
        let report = reports.join(format!("{name}.json"));
        on_sysroot(&["run", "--json", report.to_str().unwrap()], &node.root).output()?;
    }
    let out = util::rocgate()
        .args(["fleet", "report", "--format", "html"])
        .arg(&reports)
        .output()?;
    check(out.status.code() == Some(1), format!("{out:?}"))?;
    let page = dir.path().join("fleet.html");
    std::fs::write(&page, &out.stdout)?;
    let shown = render_self_contained(&page)?;
    let nodes = shown.text("#grid tbody th");
    check(
        nodes == ["firmware-load-failed", "kfd-missing", "mi300x-8"],
        format!("fleet rows {nodes:?}"),
    )?;
    let stopped: Vec<String> = shown.text("#grid td.cell.fail");
    check(
        stopped == ["firmware-load-failed", "kfd-missing"],
        format!("failing cells {stopped:?}"),
    )?;
    // Failures by code, then the warning of the node that passed, apart.
    let codes = shown.text("table.codes tbody tr td:first-child");
    check(
        codes == ["firmware-load-failed", "kfd-missing", "pcie-acs-enabled"],
        format!("codes {codes:?}"),
    )?;
    let headings = shown.text("h2");
    check(
        headings.iter().position(|h| h == "Failures by code")
            < headings
                .iter()
                .position(|h| h == "Warnings by code (these nodes passed)"),
        format!("headings {headings:?}"),
    )?;
    check(
        shown.count(PASS_BG) > GRID_PIXELS,
        format!("no coloured grid: {} pass pixels", shown.count(PASS_BG)),
    )?;
    Ok(())
}

fn hostile_text_in_chromium() -> Result<(), Failed> {
    let node = node("mi300x-8");
    let evil = "<img src=http://evil.rocgate.invalid/x><script>document.title='owned'</script>";
    std::fs::write(node.root.join("proc/sys/kernel/hostname"), evil)?;
    let dir = tempfile::tempdir()?;
    let page = dir.path().join("run.html");
    on_sysroot(&["run", "--html", page.to_str().unwrap()], &node.root).output()?;
    let shown = render_self_contained(&page)?;
    check(
        shown.all("img").is_empty() && shown.all("script").is_empty(),
        "the host name became markup",
    )?;
    let title = shown.text("h1");
    check(
        title.first().is_some_and(|t| t.contains(evil)),
        format!("the host name is not shown as text: {title:?}"),
    )?;
    Ok(())
}

fn measurements_against_floors() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let page: PathBuf = dir.path().join("run.html");
    let (_, _, json, _) = FakeRun::scenario("mi300x-8")
        .args(&[
            "--tier",
            "extended",
            "--gpus",
            "0,1",
            "--html",
            page.to_str().unwrap(),
        ])
        .env("ROCGATE_FAKE_P2P_GBPS", "xgmi=4000;gpu0>gpu1=10")
        .env("ROCGATE_FAKE_COPY_GBPS", "20")
        .run();
    // Host copies at 20 GB/s, far under an MI300X's PCIe floor, and GEMM
    // rates far over its GEMM floors: one metric of each kind, judged.
    let bandwidth = util::result(&json, "gpu0.hip.bandwidth");
    let floor = bandwidth["metrics"][0]["floor"].as_f64();
    check(
        floor.is_some_and(|f| f > bandwidth["metrics"][0]["value"].as_f64().unwrap()),
        format!("bandwidth metric {}", bandwidth["metrics"]),
    )?;
    let html = Html::parse_document(&std::fs::read_to_string(&page)?);
    let row = |metric: &str| {
        html.select(&Selector::parse("table.metrics tbody tr").unwrap())
            .find(|tr| tr.text().any(|t| t.contains(metric)))
            .map(|tr| tr.html())
            .unwrap_or_default()
    };
    let h2d = row("h2d_gbps");
    check(
        h2d.contains("value low") && h2d.contains("class=\"floor\""),
        format!("h2d bandwidth row: {h2d}"),
    )?;
    let gemm = row("gemm_tflops.fp64");
    check(
        gemm.contains("class=\"value\"") && gemm.contains("class=\"floor\""),
        format!("fp64 GEMM row: {gemm}"),
    )?;
    // Copies between GPUs are a matrix, not rows: gpu0's row holds the
    // diagonal, then its slow copy to gpu1 marked below the floor.
    check(row("p2p_gbps").is_empty(), "p2p_gbps has a measurement row")?;
    let cells: Vec<(String, String)> = html
        .select(&Selector::parse("table.matrix tbody tr td").unwrap())
        .map(|td| {
            let class = td.value().attr("class").unwrap_or_default().to_string();
            (class, td.text().collect())
        })
        .collect();
    check(
        cells.len() == 4
            && cells[0].1 == "-"
            && cells[1].0.contains("fail")
            && cells[2].0.contains("pass"),
        format!("matrix cells: {cells:?}"),
    )
}
