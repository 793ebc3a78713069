//! `index.html`: one self-contained page per run (inline CSS, no scripts, no external
//! assets) with the verdict, the checks, every listed anomaly with its explanation and its
//! zoomed timeline, the timelines and charts, the fault schedule, the workload and the
//! servers. Every piece of text from the run is escaped; every picture is linked by a
//! relative path, so the folder can be moved or served as it is.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::report::{Report, ANOMALY_KINDS};

use super::bands::FaultBand;
use super::charts::ChartFiles;
use super::error::PlotError;

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
}

/// At most this many faults are listed in the schedule table.
const SCHEDULE_ROWS: usize = 500;

/// Writes `index.html` into `out_dir`.
pub fn write_index(page: &Page, out_dir: &Path) -> Result<PathBuf, PlotError> {
    let path = out_dir.join("index.html");
    std::fs::write(&path, render(page, out_dir)).map_err(|e| PlotError::io(&path, e))?;
    Ok(path)
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

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
        for byte in part.as_os_str().to_string_lossy().bytes() {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                url.push(byte as char);
            } else {
                let _ = write!(url, "%{byte:02X}");
            }
        }
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

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", Verdana, sans-serif; margin: 0 auto; max-width: 1260px;
       padding: 1em 1.5em 3em; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.3em; margin: 0.2em 0; font-weight: normal; }
h2 { font-size: 1.15em; border-bottom: 1px solid #ddd; margin-top: 2em; }
h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.verdict { font-size: 2.6em; font-weight: bold; padding: 0.35em 0.6em; border-radius: 6px;
           margin: 0.4em 0; color: #fff; }
.verdict.valid { background: #1e8e3e; }
.verdict.unknown { background: #b06000; }
.verdict.invalid { background: #c5221f; }
.verdict small { font-size: 0.45em; font-weight: normal; display: block; }
.stats { color: #444; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.ok { color: #1e8e3e; font-weight: bold; }
td.fail { color: #c5221f; font-weight: bold; }
.anomaly { border-left: 6px solid #c5221f; padding: 0.2em 0 0.6em 1em; margin: 1.2em 0;
           background: #fff7f7; }
.anomaly .meta { color: #444; font-size: 0.92em; }
.explanation { font-size: 1.05em; }
.warn { background: #fff4d6; border: 1px solid #e0c36c; padding: 0.5em 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; }
figure { margin: 1em 0; }
figcaption { color: #444; font-size: 0.92em; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 0.6em; overflow-x: auto; }
a { color: #1558b0; }
ul.cycle { list-style: none; padding-left: 1em; }
ul.notes { color: #444; font-size: 0.9em; margin-top: -0.6em; }
"#;

/// The page's HTML.
pub fn render(page: &Page, out_dir: &Path) -> String {
    let report = page.report;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>lockaudit: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(&page.title)
    );
    let _ = writeln!(h, "<h1>lockaudit: {}</h1>", escape(&page.title));
    verdict(&mut h, page);
    let stats = &report.stats;
    let _ = writeln!(
        h,
        "<p class=\"stats\">{}, {}, {}, {} over {:.3}s, read from <code>{}</code></p>",
        plural(stats.events, "event"),
        plural(stats.processes, "process"),
        plural(stats.keys, "key"),
        plural(stats.faults, "fault event"),
        stats.time_span_ns[1].saturating_sub(stats.time_span_ns[0]) as f64 / 1e9,
        escape(&page.source)
    );
    for note in page.notes.iter().chain(report.warnings.iter()) {
        let _ = writeln!(h, "<p class=\"warn\">{}</p>", escape(note));
    }

    h.push_str("<h2 id=\"checks\">Checks</h2>\n");
    checks_table(&mut h, report);

    if !report.anomalies.is_empty() || !report.omitted.is_empty() {
        h.push_str("<h2 id=\"anomalies\">Anomalies</h2>\n");
        anomalies(&mut h, page, out_dir);
    }

    let whole: Vec<&TimelineLink> = page
        .timelines
        .iter()
        .filter(|t| t.anomaly.is_none())
        .collect();
    h.push_str("<h2 id=\"timelines\">Timelines</h2>\n");
    if whole.is_empty() {
        h.push_str("<p>No timeline was drawn.</p>\n");
    }
    let keys = report.stats.keys as usize;
    if !whole.is_empty() && whole.len() < keys {
        let _ = writeln!(
            h,
            "<p>Timelines of {} of the {} keys: those with anomalies first, then the busiest.</p>",
            whole.len(),
            keys
        );
    }
    for t in &whole {
        figure(
            &mut h,
            out_dir,
            &t.png,
            &t.svg,
            &format!("Timeline of {}, the whole run", t.key),
        );
        picture_notes(&mut h, &t.notes);
    }

    h.push_str("<h2 id=\"charts\">Latency, rate and fairness</h2>\n");
    for chart in page.charts {
        figure(&mut h, out_dir, &chart.png, &chart.svg, &chart.title);
    }

    h.push_str("<h2 id=\"schedule\">Fault schedule</h2>\n");
    schedule(&mut h, page.bands);

    h.push_str("<h2 id=\"workload\">Workload</h2>\n");
    match &page.workload {
        Some(text) => {
            let _ = writeln!(h, "<pre>{}</pre>", escape(text));
        }
        None => h.push_str("<p>No workload.toml: this history was not recorded by <code>lockaudit run</code> (or its folder lost the file).</p>\n"),
    }
    if let Some(text) = &page.endpoints {
        h.push_str("<h2 id=\"endpoints\">Servers</h2>\n");
        match redact_endpoints(text) {
            Some(json) => {
                let _ = writeln!(h, "<pre>{}</pre>", escape(&json));
            }
            None => h.push_str("<p>endpoints.json is not valid JSON; not shown.</p>\n"),
        }
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// "1 key", "2 keys", "1 process", "3 processes".
fn plural(n: u64, noun: &str) -> String {
    match (n, noun.ends_with('s')) {
        (1, _) => format!("{n} {noun}"),
        (_, true) => format!("{n} {noun}es"),
        (_, false) => format!("{n} {noun}s"),
    }
}

fn verdict(h: &mut String, page: &Page) {
    let report = page.report;
    let total: u64 = ANOMALY_KINDS.iter().map(|k| report.count(k)).sum();
    if report.is_valid() {
        let _ = writeln!(
            h,
            "<div class=\"verdict valid\">VALID<small>no anomaly in {} events</small></div>",
            report.stats.events
        );
    } else if report.valid.is_none() {
        let why = report.unknown.as_deref().unwrap_or("nothing was tested");
        let _ = writeln!(
            h,
            "<div class=\"verdict unknown\">UNKNOWN<small>{}</small></div>",
            escape(why)
        );
    } else {
        let kinds: Vec<String> = ANOMALY_KINDS
            .iter()
            .filter(|k| report.count(k) > 0)
            .map(|k| format!("{} {}", report.count(k), k))
            .collect();
        let _ = writeln!(
            h,
            "<div class=\"verdict invalid\">INVALID<small>{} {}: {}</small></div>",
            total,
            if total == 1 { "anomaly" } else { "anomalies" },
            escape(&kinds.join(", "))
        );
    }
}

fn checks_table(h: &mut String, report: &Report) {
    h.push_str("<table>\n<tr><th>check</th><th>verdict</th><th>anomalies found</th><th>figures</th></tr>\n");
    for (name, check) in &report.checks {
        let counts: Vec<String> = check
            .counts
            .iter()
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect();
        let figures: Vec<String> = check
            .figures
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(name),
            if check.valid { "ok" } else { "fail" },
            if check.valid { "ok" } else { "FAIL" },
            escape(&counts.join(", ")),
            escape(&figures.join(", "))
        );
    }
    h.push_str("</table>\n");
}

fn anomalies(h: &mut String, page: &Page, out_dir: &Path) {
    let report = page.report;
    for (i, a) in report.anomalies.iter().enumerate() {
        let _ = writeln!(
            h,
            "<div class=\"anomaly\" id=\"anomaly-{}\">\n<h3>{}. {} on {}</h3>",
            i + 1,
            i + 1,
            escape(&a.kind),
            escape(&a.key)
        );
        let mut meta = vec![
            format!(
                "processes {}",
                a.processes
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "events {}",
                a.indices
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "from {:.3}s to {:.3}s",
                a.start as f64 / 1e9,
                a.end as f64 / 1e9
            ),
        ];
        if let Some(expired) = a.lease_expired {
            meta.push(if expired {
                "the earlier holder's lease had run out".to_string()
            } else {
                "inside the earlier holder's lease".to_string()
            });
        }
        if !a.tokens.is_empty() {
            meta.push(format!(
                "tokens {}",
                a.tokens
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let _ = writeln!(h, "<p class=\"meta\">{}</p>", escape(&meta.join(" · ")));
        let _ = writeln!(h, "<p class=\"explanation\">{}</p>", escape(&a.explanation));
        if !a.cycle.is_empty() {
            // The steps carry their own numbers.
            h.push_str("<ul class=\"cycle\">\n");
            for step in &a.cycle {
                let _ = writeln!(h, "<li>{}</li>", escape(step));
            }
            h.push_str("</ul>\n");
        }
        match page.timelines.iter().find(|t| t.anomaly == Some(i)) {
            Some(t) => {
                figure(
                    h,
                    out_dir,
                    &t.png,
                    &t.svg,
                    &format!("Anomaly {}: {} on {}, zoomed", i + 1, a.kind, a.key),
                );
                picture_notes(h, &t.notes);
            }
            None => {
                let whole = page
                    .timelines
                    .iter()
                    .find(|t| t.anomaly.is_none() && t.key == a.key);
                match whole {
                    Some(t) => {
                        let _ = writeln!(
                            h,
                            "<p class=\"meta\">No zoomed picture of this one (only the first anomalies get one); it is drawn on <a href=\"{}\">the timeline of {}</a>.</p>",
                            escape(&relative_url(out_dir, &t.png)),
                            escape(&a.key)
                        );
                    }
                    None => h.push_str("<p class=\"meta\">No picture of this one.</p>\n"),
                }
            }
        }
        h.push_str("</div>\n");
    }
    for (kind, n) in &report.omitted {
        let _ = writeln!(
            h,
            "<p class=\"warn\">{} more {} anomalies were found but not listed (<code>lockaudit check --limit</code> lists more).</p>",
            n,
            escape(kind)
        );
    }
}

fn figure(h: &mut String, out_dir: &Path, png: &Path, svg: &Path, caption: &str) {
    let png_url = escape(&relative_url(out_dir, png));
    let svg_url = escape(&relative_url(out_dir, svg));
    let caption = escape(caption);
    let _ = writeln!(
        h,
        "<figure>\n<a href=\"{png_url}\"><img src=\"{png_url}\" alt=\"{caption}\"></a>\n\
         <figcaption>{caption} (<a href=\"{png_url}\">PNG</a>, <a href=\"{svg_url}\">SVG</a>)</figcaption>\n</figure>"
    );
}

fn picture_notes(h: &mut String, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    h.push_str("<ul class=\"notes\">\n");
    for note in notes {
        let _ = writeln!(h, "<li>{}</li>", escape(note));
    }
    h.push_str("</ul>\n");
}

fn schedule(h: &mut String, bands: &[FaultBand]) {
    if bands.is_empty() {
        h.push_str("<p>No faults were injected.</p>\n");
        return;
    }
    h.push_str(
        "<table>\n<tr><th>fault</th><th>targets</th><th>from</th><th>to</th><th>events</th></tr>\n",
    );
    for band in bands.iter().take(SCHEDULE_ROWS) {
        let to = if band.is_instant() {
            "(instant)".to_string()
        } else if band.unhealed {
            format!("{:.3}s (never healed)", band.end as f64 / 1e9)
        } else {
            format!("{:.3}s", band.end as f64 / 1e9)
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.3}s</td><td>{}</td><td>{}</td></tr>",
            escape(&band.name),
            escape(&band.targets.join(", ")),
            band.start as f64 / 1e9,
            escape(&to),
            band.indices
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    h.push_str("</table>\n");
    if bands.len() > SCHEDULE_ROWS {
        let _ = writeln!(
            h,
            "<p>… and {} more faults (history.jsonl has them all).</p>",
            bands.len() - SCHEDULE_ROWS
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<b a="x">'&'</b>"#),
            "&lt;b a=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;"
        );
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
