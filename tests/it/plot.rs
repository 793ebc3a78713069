//! `lockaudit plot`: the charts, the HTML page and the command, on the reference histories
//! and on a synthetic history of 200k events. (The timelines have their own tests in
//! tests/it/plot_timeline.rs.)

use crate::common;
use crate::common::reference;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use lockaudit::checker::{self, CheckOptions};
use lockaudit::history;
use lockaudit::plot::charts::{HEIGHT, WIDTH};
use lockaudit::report::Report;

fn lockaudit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockaudit"))
}

/// Copies a reference history into a fresh folder (plotting writes next to its input).
fn copied(name: &str) -> (common::RunDir, PathBuf) {
    let dir = common::RunDir::new();
    let path = dir.path().join(name);
    fs::copy(reference(name), &path).expect("copy the reference history");
    (dir, path)
}

/// A reference history plotted once for the tests that read its pictures (drawing takes
/// a second or two in a debug build).
struct Plotted {
    history: PathBuf,
    out_dir: PathBuf,
    stdout: String,
}

fn plotted(name: &'static str) -> &'static Plotted {
    static OVERLAP: OnceLock<Plotted> = OnceLock::new();
    static STALE_WRITE: OnceLock<Plotted> = OnceLock::new();
    let cell = match name {
        "overlap-in-lease.jsonl" => &OVERLAP,
        "stale-write-unfenced.jsonl" => &STALE_WRITE,
        _ => panic!("no shared plot of {name}"),
    };
    cell.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("plot")
            .join(name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a folder under CARGO_TARGET_TMPDIR");
        let history = dir.join(name);
        fs::copy(reference(name), &history).expect("copy the reference history");
        let output = plot(&history);
        let stem = name.trim_end_matches(".jsonl");
        Plotted {
            out_dir: dir.join(format!("{stem}-plots")),
            history,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        }
    })
}

fn plot(target: &Path) -> Output {
    let output = lockaudit()
        .arg("plot")
        .arg(target)
        .output()
        .expect("run lockaudit plot");
    assert!(
        output.status.success(),
        "lockaudit plot {} failed: {}",
        target.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn report_of(path: &Path) -> Report {
    let history = history::read_file(path).expect("reference history reads");
    checker::check(&history, &CheckOptions::default())
}

/// A decoded RGB(A) PNG.
struct Png {
    width: u32,
    height: u32,
    channels: usize,
    pixels: Vec<u8>,
}

impl Png {
    fn read(path: &Path) -> Png {
        let file = fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let decoder = png::Decoder::new(std::io::BufReader::new(file));
        let mut reader = decoder
            .read_info()
            .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader
            .next_frame(&mut pixels)
            .unwrap_or_else(|e| panic!("{} does not decode: {e}", path.display()));
        pixels.truncate(info.buffer_size());
        Png {
            width: info.width,
            height: info.height,
            channels: info.color_type.samples(),
            pixels,
        }
    }

    fn at(&self, x: u32, y: u32) -> [u8; 3] {
        let i = (y as usize * self.width as usize + x as usize) * self.channels;
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }
}

fn is_dark([r, g, b]: [u8; 3]) -> bool {
    (r as u32 + g as u32 + b as u32) < 200
}

/// The text of every `<text>` element of an SVG, which must parse.
fn svg_texts(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not valid SVG/XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").to_string())
        .collect()
}

/// Every `href` and `src` of a page, as written.
fn links(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html;
        while let Some(at) = rest.find(attr) {
            rest = &rest[at + attr.len()..];
            if let Some(end) = rest.find('"') {
                // An embedded picture is no link (its file is linked beside it).
                if !rest.starts_with("data:image/png;base64,") {
                    found.push(rest[..end].to_string());
                }
                rest = &rest[end..];
            }
        }
    }
    found
}

/// A relative link of the page as a path inside `dir` (undoing the page's escaping).
fn link_target(dir: &Path, link: &str) -> PathBuf {
    let link = link.replace("&amp;", "&");
    assert!(
        link.starts_with("./"),
        "link {link} is not relative to the page"
    );
    let mut decoded = Vec::new();
    let bytes = &link.as_bytes()[2..];
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("hex");
            decoded.push(u8::from_str_radix(hex, 16).expect("percent escape"));
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    dir.join(String::from_utf8(decoded).expect("UTF-8 link"))
}

fn escape(text: &str) -> String {
    lockaudit::plot::html::escape(text)
}

#[test]
fn plot_writes_charts_that_decode_and_parse_and_lists_them() {
    let plotted = plotted("overlap-in-lease.jsonl");
    let out_dir = &plotted.out_dir;
    let listed: Vec<PathBuf> = plotted.stdout.lines().map(PathBuf::from).collect();
    assert!(!listed.is_empty(), "plot printed no files");
    for file in &listed {
        assert!(file.is_file(), "listed {} does not exist", file.display());
        assert!(
            file.starts_with(out_dir),
            "{} is outside {}",
            file.display(),
            out_dir.display()
        );
    }
    assert!(listed.contains(&out_dir.join("index.html")));
    for name in ["latency", "rate", "fairness"] {
        let png_path = out_dir.join(format!("{name}.png"));
        let svg_path = out_dir.join(format!("{name}.svg"));
        assert!(
            listed.contains(&png_path) && listed.contains(&svg_path),
            "{name} not listed"
        );
        let png = Png::read(&png_path);
        assert_eq!((png.width, png.height), (WIDTH, HEIGHT), "{name}.png size");
        assert!(!svg_texts(&svg_path).is_empty(), "{name}.svg has no text");
    }
    // The timelines the timeline module drew are listed too.
    assert!(listed.iter().any(|f| f.to_string_lossy().ends_with(".png")
        && f.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("timeline"))));
}

#[test]
fn the_page_shows_the_verdict_every_explanation_and_links_files_that_exist() {
    for name in ["overlap-in-lease.jsonl", "stale-write-unfenced.jsonl"] {
        let plotted = plotted(name);
        let (history, out_dir) = (&plotted.history, &plotted.out_dir);
        let html = fs::read_to_string(out_dir.join("index.html")).expect("index.html");
        let report = report_of(history);
        assert!(report.is_invalid());
        assert!(
            html.contains("verdict invalid\">INVALID"),
            "{name}: no INVALID verdict"
        );
        assert!(!html.contains(">VALID<"), "{name}: says VALID");
        assert!(!report.anomalies.is_empty());
        for (i, anomaly) in report.anomalies.iter().enumerate() {
            assert!(
                html.contains(&escape(&anomaly.explanation)),
                "{name}: the explanation of anomaly {} is missing",
                i + 1
            );
            for step in &anomaly.cycle {
                assert!(
                    html.contains(&escape(step)),
                    "{name}: cycle step {step} missing"
                );
            }
            // Its row in the table of every anomaly.
            assert!(
                html.contains(&format!("<tr id=\"anomaly-{}\">", i + 1)),
                "{name}: no row for anomaly {}",
                i + 1
            );
        }
        // Each of these anomalies is an episode of its own, and each episode's card links
        // its zoomed picture.
        for e in 1..=report.anomalies.len() {
            let start = html
                .find(&format!("id=\"episode-{e}\""))
                .unwrap_or_else(|| panic!("{name}: no card for episode {e}"));
            let block = &html[start..];
            let block = &block[..block.find("</div>").unwrap_or(block.len())];
            assert!(
                links(block)
                    .iter()
                    .any(|l| l.contains("zoom") && l.ends_with(".png")),
                "{name}: episode {e} has no zoomed picture: {block}"
            );
        }
        for check in report.checks.keys() {
            assert!(
                html.contains(&format!("<td>{}</td>", escape(check))),
                "{name}: check {check}"
            );
        }
        let links = links(&html);
        for chart in ["latency", "rate", "fairness"] {
            assert!(
                links.contains(&format!("./{chart}.png")),
                "{name}: {chart}.png not on the page"
            );
            assert!(
                links.contains(&format!("./{chart}.svg")),
                "{name}: {chart}.svg not linked"
            );
        }
        assert!(
            links.iter().any(|l| l.starts_with("./timeline")),
            "{name}: no timeline on the page"
        );
        for link in &links {
            if let Some(id) = link.strip_prefix('#') {
                assert!(
                    html.contains(&format!("id=\"{id}\"")),
                    "{name}: link {link} names no element of the page"
                );
                continue;
            }
            let target = link_target(out_dir, link);
            assert!(
                target.is_file(),
                "{name}: link {link} -> {} does not exist",
                target.display()
            );
        }
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "external asset"
        );
    }
}

/// The page explains readers' hatched holds and queue-jump arrows where its pictures draw
/// them, and only there; an episode card says what to look for in its picture.
#[test]
fn the_page_explains_shared_holds_and_queue_jump_arrows_where_drawn() {
    for (name, shared, arrows) in [
        ("shared-readers-overlap.jsonl", true, false),
        ("shared-reader-writer-overlap.jsonl", true, false),
        ("unfair-queue-jump.jsonl", false, true),
        ("fair-within-tolerance.jsonl", false, false),
    ] {
        let (dir, history) = copied(name);
        plot(&history);
        let stem = name.trim_end_matches(".jsonl");
        let html = fs::read_to_string(dir.path().join(format!("{stem}-plots/index.html")))
            .expect("index.html");
        assert_eq!(html.contains("Read (shared) holds"), shared, "{name}");
        assert_eq!(
            html.contains("A dark red arrow between two lanes is a queue jump"),
            arrows,
            "{name}"
        );
        let card = html.find("id=\"episode-1\"").map(|start| {
            let block = &html[start..];
            block[..block.find("</div>").unwrap_or(block.len())].to_string()
        });
        match name {
            "unfair-queue-jump.jsonl" => {
                let card = card.expect("a card for the queue jump");
                assert!(card.contains("the dark red arrow starts"), "{card}");
            }
            "shared-reader-writer-overlap.jsonl" => {
                let card = card.expect("a card for the overlap");
                assert!(card.contains("hatched light bars"), "{card}");
            }
            _ => assert!(card.is_none(), "{name} is valid"),
        }
    }
}

/// A history whose times span the whole of i64 draws (a debug build checks every
/// subtraction: the whole run's margin, the time scale and a zoom's window once overflowed).
#[test]
fn a_history_spanning_every_time_draws_without_overflow() {
    let (dir, history) = copied("extreme-times.jsonl");
    plot(&history);
    let out = dir.path().join("extreme-times-plots");
    for file in ["timeline-lock_a.svg", "zoom-1.svg", "index.html"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
}

#[test]
fn a_valid_history_gets_a_green_verdict() {
    let (dir, history) = copied("independent-keys.jsonl");
    let report = report_of(&history);
    assert!(
        report.is_valid(),
        "independent-keys is a valid reference history"
    );
    plot(&history);
    let html = fs::read_to_string(dir.path().join("independent-keys-plots/index.html"))
        .expect("index.html");
    assert!(html.contains("verdict valid\">VALID"));
    assert!(!html.contains("INVALID"));
}

#[test]
fn chart_labels_render_as_glyphs() {
    let out_dir = &plotted("stale-write-unfenced.jsonl").out_dir;
    for (name, title) in [
        ("latency", "Acquire latency"),
        ("rate", "Acquisitions and failed attempts per second"),
        ("fairness", "Acquisitions per client process"),
    ] {
        let texts = svg_texts(&out_dir.join(format!("{name}.svg")));
        assert!(
            texts
                .iter()
                .any(|t| t.trim().starts_with(title) && t.contains("stale-write-unfenced")),
            "{name}.svg has no title text: {texts:?}"
        );
        // The title is drawn centred in the top 36 rows: glyphs leave many dark pixels
        // and, along a row through the letters, many ink/paper transitions (an empty box
        // per letter, or nothing, would not).
        let png = Png::read(&out_dir.join(format!("{name}.png")));
        let mut ink = 0;
        let mut most_transitions = 0;
        for y in 0..36 {
            let mut transitions = 0;
            let mut previous = false;
            for x in 0..png.width {
                let dark = is_dark(png.at(x, y));
                ink += usize::from(dark);
                transitions += usize::from(dark != previous);
                previous = dark;
            }
            most_transitions = most_transitions.max(transitions);
        }
        assert!(
            ink > 300,
            "{name}.png: only {ink} dark pixels in the title area"
        );
        assert!(
            most_transitions > 60,
            "{name}.png: the title does not look like text ({most_transitions} transitions)"
        );
        // The axes are labelled too: dark pixels left of the plot (y labels).
        let left_ink = (0..png.height)
            .flat_map(|y| (0..60).map(move |x| (x, y)))
            .filter(|&(x, y)| is_dark(png.at(x, y)))
            .count();
        assert!(left_ink > 100, "{name}.png: no y-axis labels ({left_ink})");
    }
}

#[test]
fn fault_bands_are_shaded_where_the_pause_was() {
    // stale-write-unfenced pauses worker-0 from 0.3 s to 2.0 s; the latency chart's x axis
    // starts at 0. Somewhere inside the pause, the plot area is grey, not white.
    let png = Png::read(
        &plotted("stale-write-unfenced.jsonl")
            .out_dir
            .join("latency.png"),
    );
    let y = HEIGHT / 2;
    let grey_columns = (0..png.width)
        .filter(|&x| {
            let [r, g, b] = png.at(x, y);
            r == g && g == b && (200..=235).contains(&r)
        })
        .count();
    // The pause covers about 1.7 s of a 2.25 s axis over ~1100 plotting pixels.
    assert!(grey_columns > 600, "only {grey_columns} shaded columns");
}

#[test]
fn a_run_folder_gets_its_page_inside_with_the_workload_and_no_password() {
    let dir = common::RunDir::new();
    let run = dir.path().join("2026-01-01T000000Z-set-nx-px");
    fs::create_dir(&run).expect("run dir");
    fs::copy(
        reference("stale-write-unfenced.jsonl"),
        run.join("history.jsonl"),
    )
    .expect("copy");
    let check = lockaudit()
        .args(["check", "--out"])
        .arg(&run)
        .arg(run.join("history.jsonl"))
        .output()
        .expect("run lockaudit check");
    assert_eq!(
        check.status.code(),
        Some(1),
        "the reference history is invalid"
    );
    fs::write(
        run.join("workload.toml"),
        "algorithm = \"set-nx-px\"\nclients = 2\nworkers = 1\n# <script>alert(1)</script>\n",
    )
    .expect("workload");
    fs::write(
        run.join("endpoints.json"),
        r#"{"topology":"single","nodes":[{"name":"master-0","host":"127.0.0.1","port":7001}],"password":"hunter2-secret"}"#,
    )
    .expect("endpoints");
    let output = plot(&run);
    assert!(String::from_utf8_lossy(&output.stdout).contains("index.html"));
    let html = fs::read_to_string(run.join("index.html")).expect("index.html in the run folder");
    assert!(run.join("latency.png").is_file() && run.join("fairness.svg").is_file());
    assert!(
        html.contains(&escape(r#"algorithm = "set-nx-px""#)),
        "workload not shown"
    );
    assert!(
        html.contains(&escape("<script>")) && !html.contains("<script>"),
        "not escaped"
    );
    assert!(html.contains("master-0"), "endpoints not shown");
    assert!(
        !html.contains("hunter2-secret"),
        "the password is on the page"
    );
    assert!(html.contains("INVALID"));
}

#[test]
fn bad_input_exits_2() {
    let dir = common::RunDir::new();
    let missing = lockaudit()
        .arg("plot")
        .arg(dir.path().join("nope.jsonl"))
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
    // A folder that is not a run folder.
    let empty = lockaudit()
        .arg("plot")
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("history.jsonl"));
    // A history with a broken line: the message names the line.
    let broken = dir.path().join("broken.jsonl");
    fs::write(
        &broken,
        "{\"index\":0,\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"acquire\",\"key\":\"a\"}\n{\"index\":1,\"time\":\"soon\"}\n{}\n",
    )
    .expect("write");
    let bad = lockaudit().arg("plot").arg(&broken).output().expect("run");
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("broken.jsonl:2") && stderr.contains("time"),
        "{stderr}"
    );
    // A report.json that is not one.
    let run = dir.path().join("run");
    fs::create_dir(&run).expect("mkdir");
    fs::copy(
        reference("overlap-in-lease.jsonl"),
        run.join("history.jsonl"),
    )
    .expect("copy");
    fs::write(run.join("report.json"), "{\"valid\": 3}").expect("write");
    let bad_report = lockaudit().arg("plot").arg(&run).output().expect("run");
    assert_eq!(bad_report.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_report.stderr).contains("report.json"));
}

/// The charts and the page of a 200k-event history stay small. (Only the parts this file
/// tests: the timelines of the same history have their own bound in tests/it/plot_timeline.rs,
/// and take most of the time of a full `plot` in a debug build.)
#[test]
fn a_200k_event_history_charts_within_a_size_bound() {
    use lockaudit::history::fault_bands;
    use lockaudit::plot::{charts, html};

    let dir = common::RunDir::new();
    let path = dir.path().join("synth.jsonl");
    let config = lockaudit::synth::SynthConfig::benchmark(7, 200_000);
    let file = fs::File::create(&path).expect("create");
    let written = lockaudit::synth::generate_to(&config, file).expect("generate");
    assert!(written >= 200_000);
    let history = history::read_file(&path).expect("the synthetic history reads");
    let report = checker::check(&history, &CheckOptions::default());
    assert!(
        report.is_valid(),
        "the synthetic history of a correct lock is valid"
    );
    let bands = fault_bands(&history);
    assert!(!bands.is_empty(), "the benchmark history kills clients");

    let out_dir = dir.path().join("plots");
    fs::create_dir(&out_dir).expect("mkdir");
    let drawn = charts::draw_charts(&history, &report, &bands, "synth", &out_dir).expect("draw");
    let page = html::Page {
        title: "synth".into(),
        source: path.display().to_string(),
        report: &report,
        timelines: &[],
        charts: &drawn,
        bands: &bands,
        workload: None,
        endpoints: None,
        notes: Vec::new(),
        run_dir: None,
        record: None,
        raw_files: Vec::new(),
    };
    let index = html::write_index(&page, &out_dir).expect("write index.html");

    let mut files = vec![index];
    for chart in &drawn {
        files.push(chart.png.clone());
        files.push(chart.svg.clone());
        Png::read(&chart.png);
        svg_texts(&chart.svg);
    }
    // The page embeds the PNGs (base64: 4 bytes for 3).
    let pngs: u64 = files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "png"))
        .map(|f| fs::metadata(f).expect("written file").len())
        .sum();
    for file in &files {
        let size = fs::metadata(file).expect("written file").len();
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bound = match name.rsplit('.').next() {
            Some("png") => 1_000_000,
            Some("svg") => 3_000_000,
            _ => 500_000 + pngs.div_ceil(3) * 4,
        };
        assert!(size <= bound, "{name} is {size} bytes (bound {bound})");
    }
}

#[test]
fn lockaudit_run_draws_its_pictures() {
    let dir = common::RunDir::new();
    let out = dir.path().join("run");
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/set-nx-px.toml");
    let output = lockaudit()
        .args(["run", "--seed", "1"])
        .arg(workload)
        .args(["--time-limit", "1s", "--out"])
        .arg(&out)
        .output()
        .expect("run lockaudit run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Valid or not (a worker stalled past its lease on a busy machine is found, rightly;
    // `tests/it/run.rs` holds the run without faults to valid): the page shows the verdict of
    // report.json.
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("plots: "), "{stdout}");
    let html = fs::read_to_string(out.join("index.html")).expect("index.html in the run folder");
    let report: Report =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).expect("report.json"))
            .expect("a report");
    let verdict = match report.valid {
        Some(true) => "verdict valid\">VALID",
        Some(false) => "verdict invalid\">INVALID",
        None => "verdict unknown\">UNKNOWN",
    };
    assert!(html.contains(verdict), "{stdout}");
    assert!(html.contains(&escape(r#"algorithm = "set-nx-px""#)));
    let endpoints: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(out.join("endpoints.json")).expect("endpoints.json"),
    )
    .expect("endpoints.json is JSON");
    if let Some(password) = endpoints["password"].as_str().filter(|p| !p.is_empty()) {
        assert!(
            !html.contains(password),
            "the run's password is on the page"
        );
    }
    for chart in ["latency", "rate", "fairness"] {
        assert!(out.join(format!("{chart}.png")).is_file());
    }
}

/// A recorded run under paused clients (history/runs/pause-clients-rw-lock.jsonl: a stale
/// write, a grant returned after its lease, overlaps after leases ran out): the page lists
/// its worst episodes first, in the order of docs/src/guide/pictures.md, the worst of the
/// report first, as `check` prints them; the episodes' zoomed pictures exist, and every
/// local link and picture of the page points at a file that exists or an element of the
/// page. (A live pause run finds whichever anomalies its pauses happen to cause, or none when
/// no pause catches a holder; the runs that must find them are in tests/it/lua_scripts.rs and
/// tests/it/external.rs. Here the history is fixed, so the classes to order are always there.)
#[test]
fn a_pause_run_page_shows_the_worst_episodes_first_and_every_link_resolves() {
    let dir = common::RunDir::new();
    let history = dir.path().join("pause.jsonl");
    fs::copy(reference("runs/pause-clients-rw-lock.jsonl"), &history)
        .expect("copy the recorded run");
    let output = lockaudit()
        .arg("check")
        .arg(&history)
        .output()
        .expect("run lockaudit check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    plot(&history);
    let out = dir.path().join("pause-plots");
    let html = fs::read_to_string(out.join("index.html")).expect("index.html");

    // The one-line list of episodes, worst first.
    let list = &html[html
        .find("<ol class=\"summary\">")
        .expect("the episode list")..];
    let list = &list[..list.find("</ol>").expect("the list's end")];
    let headlines: Vec<&str> = list
        .lines()
        .filter(|l| l.contains("href=\"#episode-"))
        .filter_map(|l| l.split("\">").nth(1))
        .filter_map(|l| l.split("</a>").next())
        .collect();
    // The episodes come in the order of docs/src/guide/pictures.md, and the first is the
    // worst the report holds.
    let report = report_of(&history);
    assert!(!headlines.is_empty(), "no episode listed: {list}");
    let ranks: Vec<usize> = headlines
        .iter()
        .map(|h| headline_rank(h).unwrap_or_else(|| panic!("an episode of no known class: {h}")))
        .collect();
    let mut classes = ranks.clone();
    classes.dedup();
    assert!(
        classes.len() >= 3,
        "the recorded run has three classes to order: {headlines:?}"
    );
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1]),
        "the episodes are not worst first: {headlines:?}"
    );
    let worst = report
        .anomalies
        .iter()
        .map(|a| anomaly_rank(a.kind.as_str(), a.lease_expired))
        .min()
        .expect("anomalies in report.json");
    assert_eq!(
        ranks[0], worst,
        "the first episode is not the worst class of report.json: {headlines:?}"
    );
    // The summary the run printed has the same order.
    let printed = stdout
        .find("episodes, worst first")
        .expect("the episodes in the summary");
    let printed: Vec<usize> = stdout[printed..]
        .lines()
        .skip(1)
        // "  3 overlaps ...": an episode's line (its anomaly's lines are indented further).
        .filter(|l| l.starts_with("  ") && l.as_bytes().get(2).is_some_and(u8::is_ascii_digit))
        .map(|l| headline_rank(l).unwrap_or_else(|| panic!("an episode of no known class: {l}")))
        .collect();
    assert!(!printed.is_empty(), "{stdout}");
    // The summary spells out six episodes, the page ten.
    let n = printed.len().min(ranks.len());
    assert_eq!(printed[..n], ranks[..n], "{stdout}\n{headlines:?}");

    // The first episode's card shows its zoomed picture, which exists.
    let card = &html[html.find("id=\"episode-1\"").expect("episode 1's card")..];
    let card = &card[..card.find("</div>").unwrap_or(card.len())];
    let zooms: Vec<String> = links(card)
        .into_iter()
        .filter(|l| l.starts_with("./zoom-"))
        .collect();
    assert!(!zooms.is_empty(), "episode 1 has no zoom: {card}");
    // Every link: a file of the run folder, or an element of the page.
    let all = links(&html);
    assert!(all.iter().filter(|l| l.starts_with("./zoom-")).count() >= zooms.len());
    for link in &all {
        if let Some(id) = link.strip_prefix('#') {
            assert!(
                html.contains(&format!("id=\"{id}\"")),
                "link {link} names no element of the page"
            );
            continue;
        }
        let target = link_target(&out, link);
        assert!(
            target.is_file(),
            "link {link} -> {} does not exist",
            target.display()
        );
    }
    // No card per anomaly: the long tail is a table row each.
    assert_eq!(
        html.matches("<tr id=\"anomaly-").count(),
        report.anomalies.len()
    );
    assert!(html.matches("class=\"episode\"").count() <= 10);
}

/// The classes of anomalies worst first, as docs/src/guide/pictures.md ranks them, each by the words its
/// episode's headline has.
const CLASSES_WORST_FIRST: [&[&str]; 10] = [
    &["stale-write"],
    &["bad-lease"],
    &["inside a live lease"],
    &["lost-lock"],
    &["duplicate-token", "token-order"],
    &["unavailable"],
    &["starvation"],
    &["unfair"],
    &["after a lease ran out"],
    &["lost-update"],
];

/// Where an episode's headline ("3 overlaps after a lease ran out on lock:0 ...") stands in
/// `CLASSES_WORST_FIRST`.
fn headline_rank(headline: &str) -> Option<usize> {
    CLASSES_WORST_FIRST
        .iter()
        .position(|words| words.iter().any(|w| headline.contains(w)))
}

/// Where an anomaly of report.json stands in `CLASSES_WORST_FIRST` (an overlap of unknown
/// lease class at its worst).
fn anomaly_rank(kind: &str, lease_expired: Option<bool>) -> usize {
    let words = match (kind, lease_expired) {
        ("overlap", Some(true)) => "after a lease ran out",
        ("overlap", _) => "inside a live lease",
        (kind, _) => kind,
    };
    headline_rank(words)
        .unwrap_or_else(|| panic!("a kind docs/src/guide/pictures.md does not rank: {kind}"))
}

/// Asserts that every file in `dir` is whole: no temporary file of a write under way, each
/// SVG closed, each PNG ending with its IEND chunk, the page closed.
fn assert_only_whole_files(dir: &Path) {
    for entry in fs::read_dir(dir).expect("the plots folder") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !lockaudit::outfile::is_partial(&name),
            "a partly written file was left: {name}"
        );
        let bytes = fs::read(&path).expect("read a picture");
        let whole = match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => String::from_utf8_lossy(&bytes)
                .trim_end()
                .ends_with("</svg>"),
            Some("png") => bytes.ends_with(&[0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]),
            Some("html") => String::from_utf8_lossy(&bytes)
                .trim_end()
                .ends_with("</html>"),
            _ => true,
        };
        assert!(whole, "{name} is cut short ({} bytes)", bytes.len());
    }
}

/// A tmpfs of `size` mounted on `dir`, unmounted when dropped; None (and a line saying the
/// test is skipped) unless root.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: a full disk is a tiny tmpfs, which needs root to mount");
            return None;
        }
        fs::create_dir_all(dir).expect("the mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(
            status.success(),
            "cannot mount a tmpfs on {}",
            dir.display()
        );
        Some(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_plot_on_a_full_disk_fails_naming_the_error_and_leaves_no_file_cut_short() {
    let dir = common::RunDir::new();
    let Some(_tmpfs) = Tmpfs::mount(&dir.path().join("tiny"), "64k") else {
        return;
    };
    let name = "stale-write-unfenced.jsonl";
    let history = dir.path().join("tiny").join(name);
    fs::copy(reference(name), &history).expect("copy the reference history");
    let output = lockaudit()
        .arg("plot")
        .arg(&history)
        .output()
        .expect("run lockaudit plot");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_only_whole_files(&dir.path().join("tiny/stale-write-unfenced-plots"));
}

#[test]
fn an_interrupted_plot_exits_130_and_leaves_no_file_cut_short() {
    let dir = common::RunDir::new();
    let history = dir.path().join("big.jsonl");
    // A history that takes seconds to draw (its first picture comes before the last by
    // seconds, in a debug build).
    let synth = lockaudit()
        .args([
            "synth",
            "--events",
            "1000000",
            "--keys",
            "20",
            "--processes",
            "200",
            "--out",
        ])
        .arg(&history)
        .output()
        .expect("run lockaudit synth");
    assert!(synth.status.success(), "{synth:?}");
    let out_dir = dir.path().join("big-plots");
    let mut child = lockaudit()
        .arg("plot")
        .arg(&history)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start lockaudit plot");
    // Interrupted once it has begun writing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while fs::read_dir(&out_dir).map_or(true, |mut d| d.next().is_none()) {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("plot wrote nothing in 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("signal");
    let output = child.wait_with_output().expect("wait for plot");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted (SIGINT)"), "{stderr}");
    // The page comes last: a page linking pictures never drawn is never left.
    assert!(!out_dir.join("index.html").exists());
    assert_only_whole_files(&out_dir);
}
