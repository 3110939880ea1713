//! The HTML reports laid out by a real browser at the sizes people open
//! them: an 8-GPU node at the extended tier, 64 CPX partitions, and a
//! 500-node fleet, each in Chromium driven by chromedriver (WebDriver),
//! at a desktop and a laptop width. The page is measured as the browser
//! laid it out: no element may reach past the window unless it sits in a
//! box that scrolls (a wide table's own), the page itself never scrolls
//! sideways, and a scrolled table keeps its first column in view. Each
//! page's screenshot is taken at the window's width, and kept in
//! `$ROCGATE_SCREENSHOTS` when that is set, for a person to look at.
//!
//! A witness page with a table outside any scroll box shows the
//! measurement catches an overflow. Without chromedriver the trials are
//! ignored with the reason; under CI=true they fail (ci/test installs it).

use crate::util;
use crate::util::{FakeRun, check, have, missing, node, on_sysroot};
use base64::Engine as _;
use libtest_mimic::{Completion, Failed, Trial};
use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![
        in_browser(
            "an_8_gpu_extended_page_fits_the_window",
            eight_gpu_page_fits,
        ),
        in_browser(
            "a_64_partition_page_fits_the_window_and_keeps_its_first_column",
            cpx_page_fits,
        ),
        in_browser("a_500_node_fleet_page_fits_the_window", fleet_page_fits),
        in_browser(
            "the_measurement_catches_a_table_outside_a_scroll_box",
            witness_overflows,
        ),
    ]
}

/// The widths pages are measured at: a desktop browser and a laptop's.
const WIDTHS: [u32; 2] = [1400, 1024];

fn in_browser(name: &str, test: fn() -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        for tool in ["chromium", "chromedriver"] {
            if !have(tool) {
                return missing(&format!("{tool} is not installed"));
            }
        }
        test().map(|()| Completion::Completed)
    })
}

/// chromedriver and one headless Chromium session it drives.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

/// How long chromedriver and Chromium may take to answer at all: a guard
/// against a hang, not a speed test.
const START_GUARD: Duration = Duration::from_secs(120);

impl Browser {
    /// A session whose window is `width` pixels wide.
    fn start(width: u32) -> Result<Browser, Failed> {
        // A free port, asked of the kernel; chromedriver binds it next.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let profile = tempfile::tempdir()?;
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            _profile: profile,
        };
        let started = Instant::now();
        while get(&format!("{}/status", browser.base))
            .ok()
            .is_none_or(|s| s["value"]["ready"] != true)
        {
            check(
                started.elapsed() < START_GUARD,
                "chromedriver did not answer on its port",
            )?;
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = json!([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            format!("--window-size={width},900"),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ]);
        let session = post(
            &format!("{}/session", browser.base),
            &json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": which("chromium")?, "args": args}
            }}}),
        )?;
        browser.session = session["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| format!("chromedriver started no session: {session}"))?
            .to_string();
        Ok(browser)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/session/{}/{path}", self.base, self.session)
    }

    fn open(&self, page: &Path) -> Result<(), Failed> {
        post(
            &self.url("url"),
            &json!({"url": format!("file://{}", page.display())}),
        )?;
        Ok(())
    }

    /// Runs `script` in the page (WebDriver runs it outside the page's
    /// Content-Security-Policy, which forbids the page any script).
    fn run(&self, script: &str) -> Result<Value, Failed> {
        let answer = post(
            &self.url("execute/sync"),
            &json!({"script": script, "args": []}),
        )?;
        Ok(answer["value"].clone())
    }

    /// The window as a PNG: its width in pixels, and the file it was kept
    /// in when `$ROCGATE_SCREENSHOTS` is set.
    fn screenshot(&self, name: &str) -> Result<u32, Failed> {
        let answer = get(&self.url("screenshot"))?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(answer["value"].as_str().unwrap_or_default())?;
        if let Some(dir) = std::env::var_os("ROCGATE_SCREENSHOTS") {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(PathBuf::from(dir).join(format!("{name}.png")), &png)?;
        }
        let info = png::Decoder::new(std::io::Cursor::new(png)).read_info()?;
        Ok(info.info().width)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = ureq::delete(&format!("{}/session/{}", self.base, self.session)).call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn which(tool: &str) -> Result<String, Failed> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(START_GUARD))
        .http_status_as_error(false)
        .build()
        .into()
}

fn get(url: &str) -> Result<Value, Failed> {
    Ok(agent().get(url).call()?.body_mut().read_json()?)
}

fn post(url: &str, body: &Value) -> Result<Value, Failed> {
    let answer: Value = agent().post(url).send_json(body)?.body_mut().read_json()?;
    if let Some(error) = answer["value"]["error"].as_str() {
        return Err(format!("WebDriver {url}: {error}: {}", answer["value"]["message"]).into());
    }
    Ok(answer)
}

/// What reaches past the window: the page's own width against the
/// window's, and every element whose right edge passes the window with no
/// scrolling box around it.
const OVERFLOW: &str = r#"
const vw = document.documentElement.clientWidth;
const scrolls = (e) => {
  for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if (o === 'auto' || o === 'scroll' || o === 'hidden') return true;
  }
  return false;
};
const out = [];
for (const e of document.body.querySelectorAll('*')) {
  const r = e.getBoundingClientRect();
  if (r.width === 0 || r.right <= vw + 1 || scrolls(e)) continue;
  out.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className ? '.' + e.className.split(' ').join('.') : '') +
    ' reaches ' + Math.round(r.right) + ' px: ' + JSON.stringify(e.textContent.slice(0, 80)));
}
return {window: vw, page: document.documentElement.scrollWidth, outside: out.slice(0, 10), count: out.length};
"#;

/// `page` measured at every width of [`WIDTHS`]: nothing outside a scroll
/// box reaches past the window; `more` runs its own checks in the session.
fn fits(
    page: &Path,
    name: &str,
    more: &dyn Fn(&Browser) -> Result<(), Failed>,
) -> Result<(), Failed> {
    for width in WIDTHS {
        let browser = Browser::start(width)?;
        browser.open(page)?;
        let seen = browser.run(OVERFLOW)?;
        check(
            seen["count"] == 0 && seen["page"].as_u64() <= seen["window"].as_u64(),
            format!("{name} at {width} px overflows its window: {seen}"),
        )?;
        let shot = browser.screenshot(&format!("{name}-{width}"))?;
        check(
            shot == width,
            format!("{name}: the screenshot is {shot} px wide in a {width} px window"),
        )?;
        more(&browser)?;
    }
    Ok(())
}

/// How many of `selector` the page has.
fn count(browser: &Browser, selector: &str) -> Result<u64, Failed> {
    let n = browser.run(&format!(
        "return document.querySelectorAll({}).length;",
        json!(selector)
    ))?;
    n.as_u64()
        .ok_or_else(|| format!("counting {selector}: {n}").into())
}

fn eight_gpu_page_fits() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let page = dir.path().join("mi300x-8.html");
    FakeRun::scenario("mi300x-8")
        .args(&["--tier", "extended", "--html", page.to_str().unwrap()])
        .run();
    fits(&page, "mi300x-8-extended", &|b| {
        // The measurements table is wider than either window: it is there,
        // in its own box, with a column per GPU.
        let cols = count(b, ".scroll > table.metrics thead th")?;
        check(cols >= 12, format!("{cols} measurement columns"))
    })
}

fn cpx_page_fits() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let page = dir.path().join("cpx.html");
    FakeRun::scenario("mi300x-8-cpx")
        .args(&["--html", page.to_str().unwrap()])
        .run();
    fits(&page, "mi300x-8-cpx", &|b| {
        // 64 partitions fold to a row per device (and the node's).
        let rows = count(b, "#grid tbody tr")?;
        check(rows == 9, format!("{rows} grid rows for 8 devices in CPX"))?;
        // Scrolled to its far end, the measurements table still shows its
        // first column where the box begins.
        let kept = b.run(
            r#"
const box = document.querySelector('.scroll:has(> table.metrics)');
const first = box.querySelector('tbody tr > :first-child');
box.scrollLeft = box.scrollWidth;
return {scrolled: box.scrollLeft, box: box.getBoundingClientRect().left,
        first: first.getBoundingClientRect().left};
"#,
        )?;
        let (scrolled, left, first) = (
            kept["scrolled"].as_f64().unwrap_or(0.0),
            kept["box"].as_f64().unwrap_or(f64::NAN),
            kept["first"].as_f64().unwrap_or(f64::NAN),
        );
        check(
            scrolled > 0.0 && (first - left).abs() < 2.0,
            format!("the scrolled table lost its first column: {kept}"),
        )
    })
}

fn fleet_page_fits() -> Result<(), Failed> {
    const NODES: usize = 500;
    let dir = tempfile::tempdir()?;
    let reports = dir.path().join("reports");
    std::fs::create_dir(&reports)?;
    // Two real reports, each copied as many nodes under their own names.
    let mut made = Vec::new();
    for name in ["mi300x-8", "firmware-load-failed"] {
        let node = node(name);
        let report = dir.path().join(format!("{name}.json"));
        on_sysroot(&["run", "--json", report.to_str().unwrap()], &node.root).output()?;
        made.push(serde_json::from_str::<Value>(&std::fs::read_to_string(
            report,
        )?)?);
    }
    for i in 0..NODES {
        // One node in 25 failed.
        let mut doc = made[usize::from(i % 25 == 7)].clone();
        doc["node"]["hostname"] = json!(format!("gpu-node-{i:03}.rack{}.example", i / 32));
        std::fs::write(
            reports.join(format!("n{i:03}.json")),
            serde_json::to_string(&doc)?,
        )?;
    }
    let page = dir.path().join("fleet.html");
    let out = util::rocgate()
        .args(["fleet", "report", "--format", "html", "--out"])
        .arg(&page)
        .arg(&reports)
        .output()?;
    check(out.status.code() == Some(1), format!("{out:?}"))?;
    fits(&page, "fleet-500", &|b| {
        let rows = count(b, "#grid tbody tr")?;
        check(rows == NODES as u64, format!("{rows} fleet rows"))?;
        // The filter for failed nodes leaves only theirs, no script needed.
        let shown = b.run(
            r#"
document.getElementById('show-failed').click();
return [...document.querySelectorAll('#grid tbody tr')]
  .filter((tr) => tr.getBoundingClientRect().height > 0).length;
"#,
        )?;
        check(
            shown == NODES / 25,
            format!("{shown} rows shown for the failed filter"),
        )
    })
}

fn witness_overflows() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let page = dir.path().join("wide.html");
    let cells: String = (0..80).map(|i| format!("<td>gpu{i}-column</td>")).collect();
    std::fs::write(
        &page,
        format!("<!DOCTYPE html><html><body><table><tr>{cells}</tr></table></body></html>"),
    )?;
    let browser = Browser::start(WIDTHS[1])?;
    browser.open(&page)?;
    let seen = browser.run(OVERFLOW)?;
    check(
        seen["count"].as_u64().is_some_and(|n| n > 0)
            && seen["page"].as_u64() > seen["window"].as_u64(),
        format!("a table wider than the window went unseen: {seen}"),
    )
}
