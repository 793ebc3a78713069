//! `index.html`: one self-contained page per run (inline CSS, no scripts, every picture
//! embedded as a `data:` URL, so the one file can be attached to a bug report) with the
//! verdict, what ran and the commands that run it again, links to the run's raw files, the worst episodes of anomalies (`report::episodes`) each with
//! its first anomaly's explanation and its zoomed timeline, the checks, a table of every
//! listed anomaly, the timelines and charts, the fault schedule, the workload and the
//! servers. Every piece of text from the run is escaped; every link is a relative path, so
//! the folder can be moved or served as it is.
//!
//! The markup is the askama template `templates/plot/index.html` (checked when this crate
//! compiles, every value HTML-escaped); this file gathers what it shows.

use std::path::{Path, PathBuf};

use askama::Template;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::history::FaultBand;
use crate::report::episodes::kind_rank;
use crate::report::{episodes, Anomaly, AnomalyKind, Report};
use crate::run_record::{RunRecord, SCHEDULE_COPY};
use crate::units::fmt_time;

use super::charts::ChartFiles;
use super::error::PlotError;
use super::model::shorten;

/// A timeline picture as the page links it.
#[derive(Debug, Clone)]
pub struct TimelineLink {
    pub key: String,
    /// The anomaly (position in `Report::anomalies`) it zooms in on; None: the whole run.
    pub anomaly: Option<usize>,
    pub png: PathBuf,
    pub svg: PathBuf,
    /// What the picture merged or left out, shown under it.
    pub notes: Vec<String>,
    /// Holds it draws in `shared` mode (readers), hatched.
    pub shared_holds: usize,
    /// Queue jumps (`unfair`) it draws as arrows.
    pub arrows: usize,
}

/// Everything the page shows.
pub struct Page<'a> {
    /// The run's name (its folder, or the history's file name).
    pub title: String,
    /// Where the history was read from, as the user named it.
    pub source: String,
    pub report: &'a Report,
    pub timelines: &'a [TimelineLink],
    pub charts: &'a [ChartFiles],
    pub bands: &'a [FaultBand],
    /// The run's workload.toml, if there is one.
    pub workload: Option<String>,
    /// The run's endpoints.json, if there is one (passwords are redacted here).
    pub endpoints: Option<String>,
    /// Things worth knowing about how the page was made (no report.json, ...).
    pub notes: Vec<String>,
    /// The run folder, when the page is a run's (for the commands that run it again).
    pub run_dir: Option<PathBuf>,
    /// Its run.json.
    pub record: Option<RunRecord>,
    /// The run's files the page links (never one that holds a password).
    pub raw_files: Vec<PathBuf>,
}

/// At most this many faults are listed in the schedule table.
const SCHEDULE_ROWS: usize = 500;

/// At most this many episodes get a card at the top of the page (the rest are in the table).
const EPISODE_CARDS: usize = 10;

/// At most this many anomalies are listed in the table (report.json has them all).
const TABLE_ROWS: usize = 1000;

/// Explanations in the table are cut to this many characters (the row's tooltip has it whole).
const SHORT: usize = 160;

/// Writes `index.html` into `out_dir`.
pub fn write_index(page: &Page, out_dir: &Path) -> Result<PathBuf, PlotError> {
    let path = out_dir.join("index.html");
    crate::outfile::write(&path, render(page, out_dir)).map_err(|e| PlotError::io(&path, e))?;
    Ok(path)
}

/// Escapes text for HTML element content and attribute values, as the page does.
pub fn escape(text: &str) -> String {
    askama::filters::escape(text, askama::filters::Html)
        .map(|safe| safe.to_string())
        .unwrap_or_default()
}

/// Every byte of a URL path segment but the unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `path` as a relative URL from `out_dir`: `./` first (a name like `timeline-lock:a.png`
/// would otherwise read as a URL scheme), everything but unreserved characters
/// percent-encoded. Escape it again for an attribute.
pub fn relative_url(out_dir: &Path, path: &Path) -> String {
    let relative = path
        .strip_prefix(out_dir)
        .ok()
        .map(Path::to_path_buf)
        .or_else(|| path.file_name().map(PathBuf::from))
        .unwrap_or_else(|| path.to_path_buf());
    let mut url = String::from(".");
    for part in relative.components() {
        url.push('/');
        url.extend(utf8_percent_encode(
            &part.as_os_str().to_string_lossy(),
            SEGMENT,
        ));
    }
    url
}

/// endpoints.json with every `password` replaced; None if it is not JSON (then it is not
/// shown at all: it may hold a password in a shape we do not know).
pub fn redact_endpoints(text: &str) -> Option<String> {
    fn redact(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if key.to_ascii_lowercase().contains("password") && !v.is_null() {
                        *v = serde_json::Value::String("(redacted)".into());
                    } else {
                        redact(v);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
            _ => {}
        }
    }
    let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
    redact(&mut value);
    serde_json::to_string_pretty(&value).ok()
}

/// The page's HTML.
pub fn render(page: &Page, out_dir: &Path) -> String {
    let mut html = IndexHtml::new(page, out_dir)
        .render()
        .expect("rendering the page into a String cannot fail");
    // askama drops the template file's final line break.
    html.push('\n');
    html
}

/// What the template shows, as text (the template escapes it).
#[derive(Template)]
#[template(path = "plot/index.html")]
struct IndexHtml<'a> {
    title: &'a str,
    verdict: Verdict,
    /// "6901 events, 17 processes, 2 keys, 3 fault events over 3.020s".
    stats: String,
    source: &'a str,
    /// The page's notes, then the report's warnings.
    warnings: Vec<&'a str>,
    checks: Vec<CheckRow<'a>>,
    /// The worst episodes, each with its first anomaly and zoom (see `report::episodes`).
    episodes: Vec<EpisodeBlock<'a>>,
    /// Episodes beyond `EPISODE_CARDS`, only in the table.
    more_episodes: usize,
    /// Every listed anomaly, worst episode first, one row each.
    rows: Vec<AnomalyRow<'a>>,
    /// Listed anomalies beyond `TABLE_ROWS`.
    more_rows: usize,
    /// Anomalies found but not listed: (kind, how many).
    omitted: Vec<(&'a str, u64)>,
    /// Which keys got a timeline, when not all did.
    timelines_note: Option<String>,
    /// The whole-run timelines.
    timelines: Vec<Figure>,
    /// Some picture draws readers' (shared) holds: the page says how they look.
    shared_holds: bool,
    /// Some picture draws queue jumps as arrows: the page says how to read them.
    arrows: bool,
    charts: Vec<Figure>,
    /// The first `SCHEDULE_ROWS` faults, and how many more there are.
    schedule: Vec<ScheduleRow<'a>>,
    more_faults: usize,
    workload: Option<&'a str>,
    /// None: no endpoints.json; Some(None): it is not JSON.
    endpoints: Option<Option<String>>,
    /// A run's page: how to run it again.
    reproduce: Option<Reproduce>,
    raw_files: Vec<RawFile>,
}

struct Verdict {
    /// `valid`, `unknown` or `invalid`.
    class: &'static str,
    word: &'static str,
    detail: String,
}

struct CheckRow<'a> {
    name: &'a str,
    ok: bool,
    counts: String,
    figures: String,
}

struct EpisodeBlock<'a> {
    /// 1, 2, 3, ... (worst first).
    number: usize,
    /// "38 overlaps inside a live lease on lock:0..3 between 2.100s and 4.300s".
    headline: String,
    /// The first anomaly's number (its position in the report + 1), kind and key.
    first: usize,
    kind: &'a str,
    key: &'a str,
    /// The first anomaly's processes, events, time span, lease and tokens.
    meta: String,
    explanation: &'a str,
    cycle: &'a [String],
    /// How many more anomalies the episode has (they are in the table).
    more: usize,
    zoom: Option<Figure>,
    /// Without a zoom: the whole-run timeline it is drawn on (its URL and key), if any.
    on_timeline: Option<(String, &'a str)>,
    /// How to see it in its picture, where that needs saying (readers' holds, arrows).
    hint: Option<&'static str>,
}

struct AnomalyRow<'a> {
    /// Its position in the report + 1, as the pictures label it (`#5 overlap`).
    number: usize,
    /// The episode it belongs to (1-based), and whether that episode has a card.
    episode: usize,
    carded: bool,
    /// The kind with its lease class: "overlap, inside a live lease".
    kind: String,
    key: &'a str,
    time: String,
    processes: String,
    events: String,
    /// The explanation, cut short; `explanation` whole (the row's tooltip).
    short: String,
    explanation: &'a str,
    /// Its zoomed picture, if it has one.
    zoom: Option<String>,
}

/// A picture, embedded and linked by relative URLs, with what it merged or left out.
struct Figure {
    png: String,
    svg: String,
    /// The PNG as a `data:` URL (None: it could not be read; the page links it).
    data: Option<String>,
    caption: String,
    notes: Vec<String>,
}

impl Figure {
    fn new(out_dir: &Path, png: &Path, svg: &Path, caption: String, notes: &[String]) -> Self {
        use base64::Engine as _;
        Figure {
            png: relative_url(out_dir, png),
            svg: relative_url(out_dir, svg),
            data: std::fs::read(png).ok().map(|bytes| {
                let text = base64::engine::general_purpose::STANDARD.encode(bytes);
                format!("data:image/png;base64,{text}")
            }),
            caption,
            notes: notes.to_vec(),
        }
    }
}

/// What ran and how to run it again, from run.json and the folder.
struct Reproduce {
    /// `lockaudit rerun <dir>`, `lockaudit run <dir>/workload.toml`.
    rerun: String,
    run: String,
    seed: Option<u64>,
    /// The command as given, lockaudit's version and commit, each server's version.
    command: Option<String>,
    built: Option<String>,
    servers: Vec<String>,
}

/// A raw file the page links: its URL and its name.
struct RawFile {
    url: String,
    name: String,
}

struct ScheduleRow<'a> {
    name: &'a str,
    targets: String,
    from: String,
    to: String,
    events: String,
}

impl<'a> IndexHtml<'a> {
    fn new(page: &'a Page, out_dir: &Path) -> Self {
        let report = page.report;
        let stats = &report.stats;
        let whole: Vec<&TimelineLink> = page
            .timelines
            .iter()
            .filter(|t| t.anomaly.is_none())
            .collect();
        let keys = stats.keys as usize;
        let (cards, rows) = anomalies(page, out_dir);
        let n_episodes = cards.len();
        IndexHtml {
            title: &page.title,
            verdict: verdict(report),
            stats: format!(
                "{}, {}, {}, {} over {:.3}s",
                plural(stats.events, "event"),
                plural(stats.processes, "process"),
                plural(stats.keys, "key"),
                plural(stats.faults, "fault event"),
                stats.time_span_ns[1].saturating_sub(stats.time_span_ns[0]) as f64 / 1e9,
            ),
            source: &page.source,
            warnings: page
                .notes
                .iter()
                .chain(&report.warnings)
                .map(String::as_str)
                .collect(),
            checks: report
                .checks
                .iter()
                .map(|(name, check)| CheckRow {
                    name,
                    ok: check.valid,
                    counts: joined(check.counts.iter().map(|(kind, n)| format!("{kind}: {n}"))),
                    figures: joined(check.figures.iter().map(|(k, v)| format!("{k}: {v}"))),
                })
                .collect(),
            episodes: cards.into_iter().take(EPISODE_CARDS).collect(),
            more_episodes: n_episodes.saturating_sub(EPISODE_CARDS),
            more_rows: rows.len().saturating_sub(TABLE_ROWS),
            rows: rows.into_iter().take(TABLE_ROWS).collect(),
            omitted: report
                .omitted
                .iter()
                .map(|(kind, n)| (kind.as_str(), *n))
                .collect(),
            timelines_note: (!whole.is_empty() && whole.len() < keys).then(|| {
                format!(
                    "Timelines of {} of the {} keys: those with anomalies first, then the busiest.",
                    whole.len(),
                    keys
                )
            }),
            timelines: whole
                .iter()
                .map(|t| {
                    let caption = format!("Timeline of {}, the whole run", t.key);
                    Figure::new(out_dir, &t.png, &t.svg, caption, &t.notes)
                })
                .collect(),
            shared_holds: page.timelines.iter().any(|t| t.shared_holds > 0),
            arrows: page.timelines.iter().any(|t| t.arrows > 0),
            charts: page
                .charts
                .iter()
                .map(|c| Figure::new(out_dir, &c.png, &c.svg, c.title.clone(), &[]))
                .collect(),
            schedule: page
                .bands
                .iter()
                .take(SCHEDULE_ROWS)
                .map(schedule_row)
                .collect(),
            more_faults: page.bands.len().saturating_sub(SCHEDULE_ROWS),
            workload: page.workload.as_deref(),
            endpoints: page.endpoints.as_deref().map(redact_endpoints),
            reproduce: page.run_dir.as_deref().map(|dir| reproduce(page, dir)),
            raw_files: page
                .raw_files
                .iter()
                .map(|path| RawFile {
                    url: relative_url(out_dir, path),
                    name: path
                        .strip_prefix(out_dir)
                        .unwrap_or(path)
                        .display()
                        .to_string(),
                })
                .collect(),
        }
    }
}

/// The commands that run `dir` again, and what its run.json says ran.
fn reproduce(page: &Page, dir: &Path) -> Reproduce {
    let record = page.record.as_ref();
    // The seed: run.json's, else the one workload.toml names.
    let seed = record.map(|r| r.seed).or_else(|| {
        page.workload
            .as_deref()
            .and_then(|t| t.parse::<toml::Table>().ok())
            .and_then(|t| t.get("seed").and_then(|v| v.as_integer()))
            .and_then(|s| u64::try_from(s).ok())
    });
    let shown = dir.display().to_string();
    let quoted = crate::shell::quote(&shown);
    let workload = crate::shell::quote(&dir.join("workload.toml").display().to_string());
    let mut run = format!("lockaudit run {workload}");
    // A schedule file is replayed from the folder's copy, not from where it was named.
    if record.is_some_and(|r| r.schedule_file) {
        let copy = dir.join(SCHEDULE_COPY);
        run.push_str(&format!(
            " --nemesis {}",
            crate::shell::quote(&copy.display().to_string())
        ));
    }
    if let Some(seed) = seed {
        run.push_str(&format!(" --seed {seed}"));
    }
    Reproduce {
        rerun: format!("lockaudit rerun {quoted}"),
        run,
        seed,
        command: record.map(|r| crate::shell::join(&r.command)),
        built: record.map(|r| format!("lockaudit {} (commit {})", r.version, r.commit)),
        servers: record
            .map(|r| {
                r.servers
                    .iter()
                    .map(|s| match (&s.version, &s.error) {
                        (Some(v), _) => format!("{}: {v}", s.name),
                        (None, Some(e)) => format!("{}: version unknown ({e})", s.name),
                        (None, None) => format!("{}: version unknown", s.name),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// "1 key", "2 keys", "1 process", "3 processes".
fn plural(n: u64, noun: &str) -> String {
    match (n, noun.ends_with('s')) {
        (1, _) => format!("{n} {noun}"),
        (_, true) => format!("{n} {noun}es"),
        (_, false) => format!("{n} {noun}s"),
    }
}

/// Items joined by ", ".
fn joined(items: impl Iterator<Item = impl ToString>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

fn verdict(report: &Report) -> Verdict {
    if report.is_valid() {
        Verdict {
            class: "valid",
            word: "VALID",
            detail: format!("no anomaly in {} events", report.stats.events),
        }
    } else if report.valid.is_none() {
        let why = report.unknown.as_deref().unwrap_or("nothing was tested");
        Verdict {
            class: "unknown",
            word: "UNKNOWN",
            detail: why.to_string(),
        }
    } else {
        let total: u64 = AnomalyKind::ALL.into_iter().map(|k| report.count(k)).sum();
        let mut found: Vec<AnomalyKind> = AnomalyKind::ALL
            .into_iter()
            .filter(|&k| report.count(k) > 0)
            .collect();
        found.sort_by_key(|&k| kind_rank(k));
        let kinds = joined(found.iter().map(|&k| format!("{} {}", report.count(k), k)));
        let noun = if total == 1 { "anomaly" } else { "anomalies" };
        Verdict {
            class: "invalid",
            word: "INVALID",
            detail: format!("{total} {noun}: {kinds}"),
        }
    }
}

/// What an anomaly's `lease_expired` says, in words true of its kind.
fn lease_note(a: &Anomaly) -> Option<&'static str> {
    Some(match (a.kind, a.lease_expired?) {
        (AnomalyKind::Overlap, true) => "after the earlier holder's lease ran out",
        (AnomalyKind::Overlap, false) => "inside the earlier holder's live lease",
        (AnomalyKind::LostLock, _) => "lost before its lease ran out (or it had none)",
        (AnomalyKind::BadLease, true) => "the lease was over when the grant returned",
        (AnomalyKind::BadLease, false) => "a lease longer than the ttl asked for",
        _ => return None,
    })
}

/// "2.100s", or "2.100s – 3.000s".
fn time_span(a: &Anomaly) -> String {
    let (s, e) = (a.start.min(a.end), a.start.max(a.end));
    if s == e {
        fmt_time(s)
    } else {
        format!("{} – {}", fmt_time(s), fmt_time(e))
    }
}

/// What to look for in the picture of anomaly `a`, where its look needs saying.
fn picture_hint(a: &Anomaly, picture: &TimelineLink) -> Option<&'static str> {
    match a.kind {
        AnomalyKind::Unfair if picture.arrows > 0 => Some(
            "In the picture, the dark red arrow starts at the pending acquire of the process that was overtaken, at the moment the other got the lock, and points at the lane of the one that jumped ahead.",
        ),
        AnomalyKind::Overlap if picture.shared_holds > 0 => Some(
            "In the picture, hatched light bars are readers' (shared) holds, which may run side by side; a solid bar is a writer's (exclusive) hold, which may overlap no other.",
        ),
        _ => None,
    }
}

/// The episodes worst first, each with its first anomaly and its zoom, and every listed
/// anomaly as a row of the table, in the same order.
fn anomalies<'a>(page: &'a Page, out_dir: &Path) -> (Vec<EpisodeBlock<'a>>, Vec<AnomalyRow<'a>>) {
    let report = page.report;
    let zoom_of = |i: usize| page.timelines.iter().find(|t| t.anomaly == Some(i));
    let mut cards = Vec::new();
    let mut rows = Vec::new();
    for (e, episode) in episodes(&report.anomalies).iter().enumerate() {
        let first = episode.first();
        let a = &report.anomalies[first];
        let mut meta = vec![
            format!("processes {}", joined(a.processes.iter())),
            format!("events {}", joined(a.indices.iter())),
            time_span(a),
        ];
        if let Some(note) = lease_note(a) {
            meta.push(note.to_string());
        }
        if !a.tokens.is_empty() {
            meta.push(format!("tokens {}", joined(a.tokens.iter())));
        }
        let zoom = zoom_of(first).map(|t| {
            let caption = format!("Anomaly #{}: {} on {}, zoomed", first + 1, a.kind, a.key);
            Figure::new(out_dir, &t.png, &t.svg, caption, &t.notes)
        });
        let drawn_on = zoom_of(first).or_else(|| {
            page.timelines
                .iter()
                .find(|t| t.anomaly.is_none() && t.key == a.key)
        });
        let on_timeline = drawn_on
            .filter(|_| zoom.is_none())
            .map(|t| (relative_url(out_dir, &t.png), a.key.as_str()));
        let hint = drawn_on.and_then(|t| picture_hint(a, t));
        cards.push(EpisodeBlock {
            number: e + 1,
            headline: episode.headline(),
            first: first + 1,
            kind: a.kind.as_str(),
            key: &a.key,
            meta: meta.join(" · "),
            explanation: &a.explanation,
            cycle: &a.cycle,
            more: episode.anomalies.len() - 1,
            zoom,
            on_timeline,
            hint,
        });
        for &i in &episode.anomalies {
            let a = &report.anomalies[i];
            rows.push(AnomalyRow {
                number: i + 1,
                episode: e + 1,
                carded: e < EPISODE_CARDS,
                kind: match lease_note(a) {
                    Some(note) => format!("{}, {note}", a.kind),
                    None => a.kind.to_string(),
                },
                key: &a.key,
                time: time_span(a),
                processes: joined(a.processes.iter()),
                events: joined(a.indices.iter()),
                short: shorten(&a.explanation, SHORT),
                explanation: &a.explanation,
                zoom: zoom_of(i).map(|t| relative_url(out_dir, &t.png)),
            });
        }
    }
    (cards, rows)
}

fn schedule_row(band: &FaultBand) -> ScheduleRow<'_> {
    let to = if band.is_instant() {
        "(instant)".to_string()
    } else if band.unhealed {
        format!("{:.3}s (never healed)", band.end as f64 / 1e9)
    } else {
        format!("{:.3}s", band.end as f64 / 1e9)
    };
    ScheduleRow {
        name: &band.name,
        targets: band.targets.join(", "),
        from: format!("{:.3}s", band.start as f64 / 1e9),
        to,
        events: joined(band.indices.iter()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Anomaly, CheckResult};

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<b a="x">'&'</b>"#),
            "&#60;b a=&#34;x&#34;&#62;&#39;&#38;&#39;&#60;/b&#62;"
        );
    }

    /// Markup in every piece of text from the run (names, paths, notes, files) reaches the
    /// page as text, never as markup.
    #[test]
    fn markup_in_names_and_paths_is_escaped() {
        let evil = r#"<script>alert("x")</script> & 'q'"#;
        let report = Report {
            valid: Some(false),
            anomalies: vec![Anomaly {
                kind: AnomalyKind::Overlap,
                key: evil.into(),
                processes: vec![1, 2],
                indices: vec![3, 4],
                explanation: evil.into(),
                start: 0,
                end: 1,
                lease_expired: None,
                tokens: vec![],
                cycle: vec![evil.into()],
            }],
            checks: [(
                evil.to_string(),
                CheckResult {
                    valid: false,
                    counts: [(AnomalyKind::Overlap, 1)].into(),
                    ..CheckResult::default()
                },
            )]
            .into(),
            warnings: vec![evil.into()],
            ..Report::default()
        };
        let out_dir = Path::new("/r/run");
        let timelines = [TimelineLink {
            key: evil.into(),
            anomaly: None,
            png: out_dir.join(format!("{evil}.png")),
            svg: out_dir.join(format!("{evil}.svg")),
            notes: vec![evil.into()],
            shared_holds: 0,
            arrows: 0,
        }];
        let bands = [FaultBand {
            start: 0,
            end: 1,
            name: evil.into(),
            targets: vec![evil.into()],
            indices: vec![0],
            unhealed: false,
        }];
        let page = Page {
            title: evil.into(),
            source: evil.into(),
            report: &report,
            timelines: &timelines,
            charts: &[],
            bands: &bands,
            workload: Some(evil.into()),
            endpoints: Some(format!("{{\"name\": {}}}", serde_json::json!(evil))),
            notes: vec![evil.into()],
            run_dir: Some(out_dir.join(evil)),
            record: None,
            raw_files: vec![out_dir.join(format!("{evil}.log"))],
        };
        let html = render(&page, out_dir);
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("alert(\"x\")"), "{html}");
        let shown = escape(evil);
        // The title twice, the source, note, warning, check, anomaly heading, explanation,
        // cycle step, the timeline it is drawn on, that timeline's caption twice and its
        // note, the fault and its target, the workload (the endpoints show it JSON-quoted).
        assert!(html.matches(shown.as_str()).count() >= 16, "{html}");
        // Paths are percent-encoded in links (the `/` of `</script>` is a folder).
        assert!(
            html.contains(
                r#"href="./%3Cscript%3Ealert%28%22x%22%29%3C/script%3E%20%26%20%27q%27.png""#
            ),
            "{html}"
        );
        // The markup is the page's own: every tag it opens is one of its own.
        let tags: std::collections::BTreeSet<&str> = html
            .split('<')
            .skip(1)
            .map(|t| t.split([' ', '>']).next().unwrap_or(""))
            .collect();
        for tag in &tags {
            assert!(
                [
                    "!DOCTYPE",
                    "html",
                    "/html",
                    "head",
                    "/head",
                    "meta",
                    "title",
                    "/title",
                    "style",
                    "/style",
                    "body",
                    "/body",
                    "h1",
                    "/h1",
                    "h2",
                    "/h2",
                    "h3",
                    "/h3",
                    "div",
                    "/div",
                    "small",
                    "/small",
                    "p",
                    "/p",
                    "code",
                    "/code",
                    "table",
                    "/table",
                    "tr",
                    "/tr",
                    "th",
                    "/th",
                    "td",
                    "/td",
                    "ul",
                    "/ul",
                    "ol",
                    "/ol",
                    "li",
                    "/li",
                    "figure",
                    "/figure",
                    "figcaption",
                    "/figcaption",
                    "a",
                    "/a",
                    "b",
                    "/b",
                    "img",
                    "pre",
                    "/pre"
                ]
                .contains(tag),
                "<{tag} in {html}"
            );
        }
    }

    #[test]
    fn relative_urls_cannot_read_as_a_scheme() {
        let dir = Path::new("/r/run");
        assert_eq!(
            relative_url(dir, Path::new("/r/run/timeline-lock:a.png")),
            "./timeline-lock%3Aa.png"
        );
        assert_eq!(
            relative_url(dir, Path::new("/r/run/t/a b.svg")),
            "./t/a%20b.svg"
        );
    }

    #[test]
    fn redacts_passwords() {
        let text = r#"{"nodes":[{"host":"127.0.0.1","password":"s3cret"}],"password":"s3cret","master_name":null}"#;
        let shown = redact_endpoints(text).unwrap_or_default();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("(redacted)"));
        assert_eq!(redact_endpoints("not json"), None);
    }
}
