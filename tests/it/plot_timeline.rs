//! Timelines drawn from the reference histories and from synthetic ones: the files decode,
//! the red anomaly region sits where the anomaly happened, labels are real glyphs, and big
//! histories stay small on disk.

use crate::common::reference;
use std::path::Path;
use std::time::Instant;

use ab_glyph::{Font, FontRef};
use lockaudit::checker::{check, CheckOptions};
use lockaudit::history::compact::KeyId;
use lockaudit::history::History;
use lockaudit::plot::model::{self, bar, mark, Model, Source, View, XScale};
use lockaudit::plot::timeline::{draw_timelines, Picture, ProcessGroups, TimelineOptions};
use lockaudit::report::{AnomalyKind, Report};

fn load(name: &str) -> (History, Report) {
    let history = lockaudit::history::read_file(&reference(name)).expect("reference history reads");
    let report = check(&history, &CheckOptions::default());
    (history, report)
}

fn draw(history: &History, report: &Report, groups: &ProcessGroups, dir: &Path) -> Vec<Picture> {
    draw_timelines(history, report, groups, dir, &TimelineOptions::default())
        .expect("timelines draw")
}

struct Png {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Png {
    fn read(path: &Path) -> Png {
        let file = std::fs::File::open(path).expect("png exists");
        let decoder = png::Decoder::new(file);
        let mut reader = decoder.read_info().expect("png header decodes");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).expect("png decodes");
        let step = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("unexpected colour type {other:?}"),
        };
        let rgb = buf[..info.buffer_size()]
            .chunks(step)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        Png {
            width: info.width,
            height: info.height,
            rgb,
        }
    }

    fn at(&self, x: i32, y: i32) -> [u8; 3] {
        self.rgb[(y as u32 * self.width + x as u32) as usize]
    }

    /// Pixels in `[x0, x1) × [y0, y1)` for which `pred` holds.
    fn count(&self, x: (i32, i32), y: (i32, i32), pred: impl Fn([u8; 3]) -> bool) -> usize {
        let mut n = 0;
        for yy in y.0.max(0)..y.1.min(self.height as i32) {
            for xx in x.0.max(0)..x.1.min(self.width as i32) {
                if pred(self.at(xx, yy)) {
                    n += 1;
                }
            }
        }
        n
    }
}

fn is_red([r, g, b]: [u8; 3]) -> bool {
    r >= 180 && g <= 70 && b <= 70
}

fn is_ink([r, g, b]: [u8; 3]) -> bool {
    (r as u32 + g as u32 + b as u32) < 3 * 150 || is_red([r, g, b])
}

/// The files exist, the PNG decodes at the picture's size, the SVG parses as an `<svg>`.
fn check_files(p: &Picture) -> (Png, String) {
    let png = Png::read(&p.path_png);
    assert_eq!(
        (png.width, png.height),
        (p.width, p.height),
        "{}",
        p.path_png.display()
    );
    let svg = std::fs::read_to_string(&p.path_svg).expect("svg exists");
    let doc = roxmltree::Document::parse(&svg).expect("svg parses");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(
        doc.root_element().attribute("width"),
        Some(p.width.to_string().as_str())
    );
    (png, svg)
}

/// Every `<text>` of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("svg parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

/// Red pixels in the lanes at the anomaly's columns, none far from them (other than at the
/// other anomalies drawn in the picture).
fn check_red_region(p: &Picture, png: &Png, start: i64, end: i64) {
    let (c0, c1) = (p.column(start), p.column(end));
    let near = png.count((c0 - 3, c1 + 4), p.lanes_y, is_red);
    assert!(
        near > 20,
        "{}: only {near} red pixels in columns {c0}..{c1}",
        p.path_png.display()
    );
    let others: Vec<(i32, i32)> = p
        .anomalies
        .iter()
        .filter(|m| m.x != (c0, c1) && (m.x.0 - c0).abs() + (m.x.1 - c1).abs() > 8)
        .map(|m| m.x)
        .collect();
    let mut far = 0;
    for x in (0..c0 - 12).chain(c1 + 13..p.width as i32) {
        if others.iter().any(|&(a, b)| x >= a && x < b) {
            continue;
        }
        far += png.count((x, x + 1), p.lanes_y, is_red);
    }
    assert_eq!(
        far,
        0,
        "{}: red pixels in the lanes away from columns {c0}..{c1}",
        p.path_png.display()
    );
}

#[test]
fn overlap_in_lease_draws_files_that_decode_and_parse() {
    let (history, report) = load("overlap-in-lease.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    let pictures = draw(&history, &report, &ProcessGroups::none(), dir.path());
    // One whole-run timeline of lock:a and one zoom around the overlap.
    assert_eq!(pictures.len(), 2);
    let timeline = &pictures[0];
    assert_eq!(timeline.key, "lock:a");
    assert_eq!(timeline.anomaly, None);
    assert!(timeline.path_svg.ends_with("timeline-lock_a.svg"));
    assert!(timeline.path_png.ends_with("timeline-lock_a.png"));
    let zoom = &pictures[1];
    assert_eq!(zoom.anomaly, Some(0));
    assert!(zoom.path_png.ends_with("zoom-1.png"));
    for p in &pictures {
        check_files(p);
        assert_eq!(p.lanes, 2, "one lane per process");
        let (t0, t1) = p.x_range_ns;
        assert!(t0 <= 1_002_000_000 && t1 >= 1_800_000_000);
    }
}

#[test]
fn the_red_region_sits_at_the_overlap() {
    let (history, report) = load("overlap-in-lease.jsonl");
    let overlap = &report.anomalies[0];
    assert_eq!(overlap.kind, AnomalyKind::Overlap);
    let dir = tempfile::tempdir().expect("temp dir");
    for p in draw(&history, &report, &ProcessGroups::none(), dir.path()) {
        let (png, _) = check_files(&p);
        check_red_region(&p, &png, overlap.start, overlap.end);
        let mark = &p.anomalies[0];
        assert_eq!(mark.anomaly, 0);
        assert_eq!(mark.x.0, p.column(overlap.start));
        // Both processes' lanes, so the region spans the lanes area.
        assert_eq!(mark.y, p.lanes_y);
    }
}

#[test]
fn labels_render_as_glyphs() {
    let font_bytes =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/fonts/DejaVuSans.ttf"))
            .expect("bundled font");
    let font = FontRef::try_from_slice(&font_bytes).expect("font parses");
    let (history, report) = load("overlap-in-lease.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    for p in draw(&history, &report, &ProcessGroups::none(), dir.path()) {
        let (png, svg) = check_files(&p);
        // The font has a glyph for every character drawn (no empty boxes).
        for text in &p.texts {
            for c in text.chars().filter(|c| !c.is_whitespace()) {
                assert_ne!(font.glyph_id(c).0, 0, "no glyph for {c:?} in {text:?}");
            }
        }
        let mark = &p.anomalies[0];
        // Kind, whether the lease had run out, and the events (both acquires among them).
        assert!(
            mark.label.starts_with("#1 overlap within lease [1, 4"),
            "{}",
            mark.label
        );
        // The SVG has it as text.
        let texts = svg_texts(&svg);
        assert!(texts.iter().any(|t| t == &mark.label), "{texts:?}");
        assert!(texts.iter().any(|t| t == "p0") && texts.iter().any(|t| t == "p1"));
        // The PNG has ink in its box: strokes, neither empty nor a filled box.
        let b = mark.label_box.expect("the label fits");
        let area = ((b[2] - b[0]) * (b[3] - b[1])) as f64;
        let ink = png.count((b[0], b[2]), (b[1], b[3]), is_red) as f64;
        assert!(
            ink / area > 0.05 && ink / area < 0.6,
            "label ink covers {:.2} of its box",
            ink / area
        );
        // The title is dark text at the top left.
        assert!(png.count((10, 400), (8, 32), is_ink) > 200);
    }
}

#[test]
fn stale_write_shows_the_pause_the_writes_and_the_anomaly() {
    let (history, report) = load("stale-write-unfenced.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    let pictures = draw(&history, &report, &ProcessGroups::none(), dir.path());
    let kinds: Vec<&str> = report.anomalies.iter().map(|a| a.kind.as_str()).collect();
    assert!(kinds.contains(&"stale-write"), "{kinds:?}");
    assert_eq!(pictures.len(), 1 + report.anomalies.len());
    for p in &pictures {
        let (png, svg) = check_files(p);
        let texts = svg_texts(&svg);
        assert!(
            texts.iter().any(|t| t.starts_with("pause worker-0")),
            "the pause band is labelled: {texts:?}"
        );
        for mark in &p.anomalies {
            let a = &report.anomalies[mark.anomaly];
            // Clipped to the plot where it reaches beyond the picture's window.
            let (first, last) = (
                p.column(a.start).max(p.scale.left),
                p.column(a.end).min(p.scale.right - 1),
            );
            assert!(
                mark.x.0 <= first && mark.x.1 > last,
                "{:?} {first} {last}",
                mark.x
            );
            assert!(png.count(mark.x, mark.y, is_red) > 0);
        }
    }
    let zoom = pictures
        .iter()
        .find(|p| {
            p.anomaly
                .is_some_and(|a| report.anomalies[a].kind == AnomalyKind::StaleWrite)
        })
        .expect("a zoom of the stale write");
    let a = &report.anomalies[zoom.anomaly.unwrap_or(0)];
    let (png, _) = check_files(zoom);
    check_red_region(zoom, &png, a.start, a.end);
    // Writes are ticks: black columns in the lanes.
    assert!(
        png.count((zoom.scale.left, zoom.scale.right), zoom.lanes_y, |p| p
            == [0, 0, 0])
            > 10
    );
}

#[test]
fn lanes_are_grouped_by_worker_from_the_run_dir() {
    let run = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        run.path().join("workload.toml"),
        "algorithm = \"set-nx-px\"\nclients = 4\nworkers = 2\n",
    )
    .expect("write workload");
    let groups = ProcessGroups::from_run_dir(run.path());
    assert_eq!(groups.slot(5), Some(1));
    assert_eq!(groups.group(5), Some(1));
    assert_eq!(groups.group(6), Some(0));
    assert!(ProcessGroups::from_run_dir(Path::new("/nonexistent")).is_none());
    std::fs::write(run.path().join("workload.toml"), "clients = \"many\"\n").expect("write");
    assert!(ProcessGroups::try_from_run_dir(run.path()).is_err());
    assert!(ProcessGroups::from_run_dir(run.path()).is_none());

    let (history, report) = load("overlap-in-lease.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    let pictures = draw(&history, &report, &ProcessGroups::new(4, 2), dir.path());
    let svg = std::fs::read_to_string(&pictures[0].path_svg).expect("svg");
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "worker-0") && texts.iter().any(|t| t == "worker-1"));
}

/// The model of the whole run of a reference history's first key, every anomaly drawn, on a
/// 1000-pixel plot.
fn whole_run_model(name: &str) -> (History, Model) {
    let (history, report) = load(name);
    let m = model_of(&history, &report);
    (history, m)
}

fn model_of(history: &History, report: &Report) -> Model {
    let holds = lockaudit::checker::holds::derive(history);
    let groups = ProcessGroups::none();
    let keys: Vec<KeyId> = (0..history.keys.len() as KeyId).collect();
    let src = Source::new(history, &holds, report, &groups, &keys);
    let (first, last) = history.time_span();
    let view = View {
        key: &history.keys[0],
        scale: XScale::new(first - 1_000_000, last + 1_000_000, 100, 1100),
        active_only: false,
        max_lanes: 64,
        anomalies: (0..report.anomalies.len()).collect(),
    };
    model::build(&src, &view)
}

/// The lane of process `n`.
fn lane_of(m: &Model, n: u64) -> usize {
    m.lanes
        .iter()
        .position(|l| l.processes == [n])
        .unwrap_or_else(|| panic!("no lane of its own for p{n}"))
}

fn has_bar(m: &Model, lane: usize, class: u8) -> bool {
    m.cells[lane].bar.contains(&class)
}

#[test]
fn the_model_marks_shared_holds_as_reads_and_exclusive_ones_not() {
    // Two readers together, then a writer alone.
    let (_, m) = whole_run_model("shared-readers-overlap.jsonl");
    assert_eq!((m.holds, m.shared_holds), (3, 2));
    for reader in [0, 1] {
        let lane = lane_of(&m, reader);
        assert!(has_bar(&m, lane, bar::SHARED), "p{reader} is a reader");
        assert!(!has_bar(&m, lane, bar::HOLD), "p{reader} never wrote");
    }
    let writer = lane_of(&m, 2);
    assert!(has_bar(&m, writer, bar::HOLD));
    assert!(!has_bar(&m, writer, bar::SHARED));
    // The readers' bars run side by side, and no anomaly is drawn between them.
    let both = (0..m.scale.width())
        .filter(|&c| m.cells[0].bar[c] == bar::SHARED && m.cells[1].bar[c] == bar::SHARED)
        .count();
    assert!(
        both > 100,
        "the readers held it together for {both} columns"
    );
    assert!(m.anomalies.is_empty() && m.arrows.is_empty());

    // A writer let in among the readers: still drawn exclusive, and the overlaps are there.
    let (_, m) = whole_run_model("shared-reader-writer-overlap.jsonl");
    assert_eq!(m.shared_holds, 2);
    assert!(has_bar(&m, lane_of(&m, 2), bar::HOLD));
    assert!(!has_bar(&m, lane_of(&m, 2), bar::SHARED));
    assert_eq!(m.anomalies.len(), 2, "{:?}", m.anomalies);
    for a in &m.anomalies {
        assert!(a.lanes.contains(&lane_of(&m, 2)), "{a:?}");
    }

    // A reader that outlived its 5 ms lease: hatched orange there, not a writer's orange.
    let text = [
        r#"{"index":0,"time":0,"process":0,"type":"invoke","f":"acquire","key":"rw:a","value":{"mode":"shared","ttl_ms":5}}"#,
        r#"{"index":1,"time":1000000,"process":0,"type":"ok","f":"acquire","key":"rw:a","value":{"lease_ms":5}}"#,
        r#"{"index":2,"time":20000000,"process":0,"type":"invoke","f":"release","key":"rw:a"}"#,
        r#"{"index":3,"time":21000000,"process":0,"type":"ok","f":"release","key":"rw:a"}"#,
    ]
    .join("\n");
    let history = lockaudit::history::reader::read_jsonl(text.as_bytes(), "late reader", None)
        .expect("history reads");
    let m = model_of(&history, &check(&history, &CheckOptions::default()));
    assert!(has_bar(&m, 0, bar::SHARED) && has_bar(&m, 0, bar::SHARED_PAST_LEASE));
    assert!(!has_bar(&m, 0, bar::PAST_LEASE) && !has_bar(&m, 0, bar::HOLD));

    // Exclusive locks only: nothing is drawn shared.
    for name in ["unfair-queue-jump.jsonl", "overlap-in-lease.jsonl"] {
        let (_, m) = whole_run_model(name);
        assert!(m.holds > 0);
        assert_eq!(m.shared_holds, 0, "{name}");
        assert!(
            m.cells.iter().all(|c| !c.bar.contains(&bar::SHARED)),
            "{name}"
        );
    }
}

#[test]
fn a_queue_jump_is_an_arrow_from_the_overtaken_waiter_to_the_overtaker() {
    // p0 asks at 0 ms; p1 asks at 40 ms and gets it at 41 ms; p0 gets it only at 62 ms.
    let (_, m) = whole_run_model("unfair-queue-jump.jsonl");
    assert_eq!(m.arrows.len(), 1, "{:?}", m.arrows);
    let arrow = &m.arrows[0];
    assert_eq!((arrow.from, arrow.to), (lane_of(&m, 0), lane_of(&m, 1)));
    assert_eq!(Some(arrow.cell), m.scale.cell(41_000_000));
    assert_eq!(arrow.label, "p1 jumped ahead of p0");
    // It starts on p0's pending acquire and points at p1's hold, which begins there.
    assert_eq!(m.cells[arrow.from].bar[arrow.cell], bar::LATENCY);
    assert_eq!(m.cells[arrow.to].bar[arrow.cell + 1], bar::HOLD);

    // Nothing of the kind where no one jumped the queue (within the tolerance, or not fair),
    // nor for other anomalies.
    for name in [
        "fair-within-tolerance.jsonl",
        "shared-reader-writer-overlap.jsonl",
        "overlap-in-lease.jsonl",
    ] {
        let (_, m) = whole_run_model(name);
        assert!(m.arrows.is_empty(), "{name}: {:?}", m.arrows);
    }
}

#[test]
fn a_queue_jump_arrow_is_drawn_in_the_whole_run_and_in_its_zoom() {
    let (history, report) = load("unfair-queue-jump.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    let pictures = draw(&history, &report, &ProcessGroups::none(), dir.path());
    assert_eq!(pictures.len(), 2, "the whole run and the zoom");
    for p in &pictures {
        let (png, svg) = check_files(p);
        assert_eq!(p.arrows.len(), 1, "{}", p.path_png.display());
        let arrow = &p.arrows[0];
        // p0's lane is above p1's: the arrow points down, from inside p0's lane into p1's.
        let lane_h = (p.lanes_y.1 - p.lanes_y.0) / p.lanes as i32;
        assert!(arrow.y.0 > p.lanes_y.0 && arrow.y.0 < p.lanes_y.0 + lane_h);
        assert!(arrow.y.1 > p.lanes_y.0 + lane_h && arrow.y.1 < p.lanes_y.1);
        // At the moment p1 got the lock (a few pixels inside the red region).
        let x = p.column(41_000_000);
        assert!((x..=x + 6).contains(&arrow.x), "{} vs {x}", arrow.x);
        let dark_red = |[r, g, b]: [u8; 3]| (140..200).contains(&r) && g <= 40 && b <= 40;
        let shaft = png.count(
            (arrow.x - 1, arrow.x + 1),
            (arrow.y.0 + 4, arrow.y.1 - 6),
            dark_red,
        );
        assert!(
            shaft >= (arrow.y.1 - arrow.y.0 - 10) as usize,
            "{}: {shaft} arrow pixels",
            p.path_png.display()
        );
        let texts = svg_texts(&svg);
        assert!(
            texts.iter().any(|t| t == "p1 jumped ahead of p0"),
            "{texts:?}"
        );
        assert!(texts.iter().any(|t| t.starts_with("queue jump (unfair)")));
        assert!(!texts.iter().any(|t| t.starts_with("read (shared)")));
    }

    let (history, report) = load("fair-within-tolerance.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    for p in draw(&history, &report, &ProcessGroups::none(), dir.path()) {
        let (_, svg) = check_files(&p);
        assert!(p.arrows.is_empty());
        assert!(!svg_texts(&svg).iter().any(|t| t.starts_with("queue jump")));
    }
}

#[test]
fn shared_holds_are_drawn_hatched_with_a_legend_and_only_where_there_are_some() {
    let (history, report) = load("shared-readers-overlap.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    let pictures = draw(&history, &report, &ProcessGroups::none(), dir.path());
    assert_eq!(pictures.len(), 1);
    let p = &pictures[0];
    let (png, svg) = check_files(p);
    assert_eq!(p.shared_holds, 2);
    let texts = svg_texts(&svg);
    assert!(
        texts.iter().any(|t| t.starts_with("read (shared) hold")),
        "{texts:?}"
    );
    assert!(texts
        .iter()
        .any(|t| t.starts_with("hold (write, exclusive)")));
    // p0's lane while both readers hold it (5 ms): the hold's blue and its light fill, both.
    let lane_h = (p.lanes_y.1 - p.lanes_y.0) / p.lanes as i32;
    let (x0, x1) = (p.column(4_000_000), p.column(9_000_000));
    let y = (p.lanes_y.0 + lane_h * 4 / 10, p.lanes_y.0 + lane_h * 8 / 10);
    let is_light =
        |[r, g, b]: [u8; 3]| r.abs_diff(214) <= 6 && g.abs_diff(230) <= 6 && b.abs_diff(244) <= 6;
    let hold = png.count((x0, x1), y, |[r, g, b]| {
        r < 60 && (100..140).contains(&g) && b > 160
    });
    let light = png.count((x0, x1), y, is_light);
    let area = ((x1 - x0) * (y.1 - y.0)) as usize;
    assert!(
        hold * 8 > area && light * 4 > area,
        "{hold} + {light} of {area}"
    );
    // p2's write is solid.
    let y2 = (y.0 + 2 * lane_h, y.1 + 2 * lane_h);
    let (w0, w1) = (p.column(22_000_000), p.column(29_000_000));
    let light2 = png.count((w0, w1), y2, is_light);
    assert_eq!(light2, 0);

    // No readers, no such legend entry.
    let (history, report) = load("overlap-in-lease.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    for p in draw(&history, &report, &ProcessGroups::none(), dir.path()) {
        let (_, svg) = check_files(&p);
        assert_eq!(p.shared_holds, 0);
        assert!(!svg_texts(&svg)
            .iter()
            .any(|t| t.starts_with("read (shared)")));
    }
}

/// A synthetic history with one injected overlap. Built and checked on a thread with a big
/// stack: the checker's precedence graph uses petgraph's recursive `tarjan_scc`, which can
/// overflow a test thread's 2 MB stack in a debug build on a million events.
fn synthetic(events: usize, keys: usize, processes: usize) -> (History, Report) {
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || synthetic_here(events, keys, processes))
        .expect("spawn")
        .join()
        .expect("synthetic history")
}

fn synthetic_here(events: usize, keys: usize, processes: usize) -> (History, Report) {
    let config = lockaudit::synth::SynthConfig {
        events,
        keys,
        processes,
        seed: 7,
        fenced: true,
        ..lockaudit::synth::SynthConfig::default()
    };
    let mut events = lockaudit::synth::generate(&config);
    lockaudit::synth::inject_overlap(&mut events, 7).expect("an overlap can be injected");
    let mut bytes = Vec::new();
    lockaudit::synth::write_jsonl(&events, &mut bytes).expect("write jsonl");
    let history = lockaudit::history::reader::read_jsonl(&bytes[..], "synthetic", None)
        .expect("synthetic reads");
    let report = check(&history, &CheckOptions::default());
    (history, report)
}

fn check_big(
    history: &History,
    report: &Report,
    options: &TimelineOptions,
    what: &str,
) -> (f64, u64, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let pictures = draw_timelines(history, report, &ProcessGroups::none(), dir.path(), options)
        .expect("timelines draw");
    let seconds = started.elapsed().as_secs_f64();
    assert!(!pictures.is_empty());
    let (mut png_total, mut svg_total) = (0, 0);
    for p in &pictures {
        let png = std::fs::metadata(&p.path_png).expect("png").len();
        let svg = std::fs::metadata(&p.path_svg).expect("svg").len();
        assert!(
            png < 2_000_000,
            "{what}: {} is {png} bytes",
            p.path_png.display()
        );
        assert!(
            svg < 5_000_000,
            "{what}: {} is {svg} bytes",
            p.path_svg.display()
        );
        png_total += png;
        svg_total += svg;
        let (png_img, svg) = check_files(p);
        if p.anomaly.is_none() && history.keys.len() > options.max_keys {
            let stated = format!(
                "Note: Timelines drawn for {} of {} keys",
                options.max_keys,
                history.keys.len()
            );
            assert!(
                svg_texts(&svg).iter().any(|t| t.starts_with(&stated)),
                "{what}: the picture does not say that keys were left out"
            );
        }
        // The injected overlap is never merged away.
        for mark in &p.anomalies {
            assert!(
                png_img.count(mark.x, mark.y, is_red) > 0,
                "{what}: anomaly not drawn"
            );
        }
    }
    let overlap = report
        .anomalies
        .iter()
        .position(|a| a.kind == AnomalyKind::Overlap)
        .expect("the injected overlap is found");
    let timeline = pictures
        .iter()
        .find(|p| p.anomaly.is_none() && p.key == report.anomalies[overlap].key)
        .expect("the overlap's key has a timeline");
    assert!(timeline.anomalies.iter().any(|m| m.anomaly == overlap));
    let png = Png::read(&timeline.path_png);
    let a = &report.anomalies[overlap];
    check_red_region(timeline, &png, a.start, a.end);
    eprintln!(
        "{what}: {} events, {} pictures in {seconds:.2} s; PNG {png_total} bytes, SVG {svg_total} bytes in all",
        history.ops.len(),
        pictures.len()
    );
    (seconds, png_total, svg_total)
}

#[test]
fn a_200k_event_history_draws_within_size_bounds() {
    // Few keys and processes: every lane is dense, so merging to the pixel does the work.
    let (history, report) = synthetic(200_000, 2, 6);
    check_big(
        &history,
        &report,
        &TimelineOptions::default(),
        "200k events, 2 keys",
    );
    // Many keys and processes: keys are capped (to 4 here: a debug build encodes PNGs
    // slowly) and the picture says so.
    let (history, report) = synthetic(200_000, 200, 400);
    let options = TimelineOptions {
        max_keys: 4,
        ..TimelineOptions::default()
    };
    let (_, _, _) = check_big(&history, &report, &options, "200k events, 200 keys");
}

/// `cargo test --release --test it plot_timeline::a_million -- --ignored --nocapture`
#[test]
#[ignore = "a benchmark: a million events"]
fn a_million_event_history_draws_in_seconds() {
    for (keys, processes) in [(1000, 2000), (2, 8)] {
        let (history, report) = synthetic(1_000_000, keys, processes);
        let (seconds, _, _) = check_big(
            &history,
            &report,
            &TimelineOptions::default(),
            &format!("1M events, {keys} keys"),
        );
        assert!(seconds < 20.0, "{seconds:.1} s");
    }
}

/// Draws the reference histories into `$TIMELINE_OUT` (default /tmp/timelines) to look at.
#[test]
#[ignore = "writes pictures to look at"]
fn render_reference_histories() {
    let out = std::env::var("TIMELINE_OUT").unwrap_or_else(|_| "/tmp/timelines".into());
    for name in [
        "overlap-in-lease.jsonl",
        "stale-write-unfenced.jsonl",
        "overlap-after-lease-expiry.jsonl",
        "killed-holder-lease.jsonl",
        "lost-lock-renew.jsonl",
        "unavailable-deadlock.jsonl",
        "info-acquire-blocks-liveness.jsonl",
        "fenced-stale-write-rejected.jsonl",
    ] {
        let (history, report) = load(name);
        let dir = Path::new(&out).join(name.trim_end_matches(".jsonl"));
        for p in draw(&history, &report, &ProcessGroups::new(2, 2), &dir) {
            eprintln!("{}", p.path_png.display());
        }
    }
    // A real run folder, grouped by its workload.toml.
    if let Ok(run) = std::env::var("TIMELINE_RUN") {
        let run = Path::new(&run);
        let history =
            lockaudit::history::read_file(&run.join("history.jsonl")).expect("run history");
        let report = check(&history, &CheckOptions::default());
        let groups = ProcessGroups::from_run_dir(run);
        for p in draw(&history, &report, &groups, &Path::new(&out).join("run")) {
            eprintln!("{}", p.path_png.display());
        }
    }
    for (events, keys, processes) in [(1_000_000, 2, 8), (1_000_000, 1000, 2000)] {
        let (history, report) = synthetic(events, keys, processes);
        let dir = Path::new(&out).join(format!("synth-{events}-{keys}"));
        for p in draw(&history, &report, &ProcessGroups::none(), &dir) {
            let size = |f: &Path| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            eprintln!(
                "{} {} / {} bytes",
                p.path_png.display(),
                size(&p.path_png),
                size(&p.path_svg)
            );
        }
    }
}

#[test]
fn the_model_draws_the_lease_the_checker_counts() {
    let cell = |m: &Model, ms: i64| m.scale.cell(ms * 1_000_000).expect("on the plot");
    // A renew gives a lease-less hold one of 100 ms at 0.3 s: held with no expiry before it
    // (not past a lease), the lease to 0.4 s, past it afterwards.
    let (_, m) = whole_run_model("renew-gives-lease.jsonl");
    let c = &m.cells[lane_of(&m, 0)];
    assert_eq!(c.bar[cell(&m, 150)], bar::HOLD);
    assert_eq!(c.marks[cell(&m, 150)] & mark::LEASE, 0);
    assert_ne!(c.marks[cell(&m, 350)] & mark::LEASE, 0);
    assert_ne!(c.marks[cell(&m, 400)] & mark::LEASE_END, 0);
    assert_eq!(c.bar[cell(&m, 700)], bar::PAST_LEASE);

    // A nested acquire with no lease at 0.05 s: the 200 ms lease no longer ends, so nothing
    // of the hold is drawn past its lease and no lease end is drawn.
    let (_, m) = whole_run_model("nested-acquire-null-lease.jsonl");
    let c = &m.cells[lane_of(&m, 0)];
    assert_eq!(c.bar[cell(&m, 700)], bar::HOLD);
    assert!(c.marks.iter().all(|&f| f & mark::LEASE_END == 0));
    assert!(!c.bar.contains(&bar::PAST_LEASE));

    // A nested acquire shortening the 5 s lease to 0.3 s: past the lease from then on.
    let (_, m) = whole_run_model("nested-acquire-shortens-lease.jsonl");
    let c = &m.cells[lane_of(&m, 0)];
    assert_ne!(c.marks[cell(&m, 300)] & mark::LEASE_END, 0);
    assert_eq!(c.bar[cell(&m, 600)], bar::PAST_LEASE);
}
