//! `lockaudit audit`: the matrix from the flags, its cells as they end, its files.

use std::path::PathBuf;

use crate::audit::rounds::{reach_markdown, Audit};
use crate::audit::runner::{audit, AuditOptions};
use crate::units::Millis;

use super::{print_out, AuditArgs};
use crate::note;

/// Runs the matrix, prints it, writes audit.md / audit.json / audit.xml.
pub fn command(args: AuditArgs) -> anyhow::Result<u8> {
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "");
        PathBuf::from("results").join(format!("audit-{stamp}"))
    });
    let json = args.json;
    if !args.merge.is_empty() {
        return merge(&args.merge, out, json);
    }
    let mut options = AuditOptions::new(out.clone());
    if !args.algorithms.is_empty() {
        options.algorithms = crate::audit::runner::expand_folders(args.algorithms)?;
    }
    if !args.nemeses.is_empty() {
        options.nemeses = args.nemeses;
        options.nemeses_asked = true;
    }
    if !args.cells.is_empty() {
        let mut cells = Vec::new();
        for cell in &args.cells {
            let (a, n) = cell
                .rsplit_once(':')
                .ok_or_else(|| anyhow::anyhow!("--cells: \"{cell}\" is not algorithm:nemesis"))?;
            cells.push((a.to_string(), crate::presets::Column::named(n)));
        }
        options.cells = Some(cells);
    }
    options.time_limit = args.time_limit;
    options.early_stop = !args.no_early_stop;
    options.check = args.bounds.check_options();
    options.valid_time_limit = args.valid_time_limit.unwrap_or(Millis(
        args.time_limit
            .0
            .min(crate::audit::runner::DEFAULT_VALID_CELL_MS),
    ));
    options.seed = args.seed;
    options.fenced = args.fenced;
    options.rounds = args.rounds;
    options.quick = args.quick;
    options.jobs = args.jobs.map(usize::from).unwrap_or_else(default_jobs);
    options.shard = args.shard;
    options.workloads = args.workloads;
    options.redis_server = args.redis_server;
    options.redis_sentinel = args.redis_sentinel;
    let hosts = args.hosts.hosts().resolve()?;
    (options.nodes, options.ssh_key, options.remote_dir) =
        (hosts.nodes, hosts.ssh_key, hosts.remote_dir);
    options.accept_new_host_keys = hosts.accept_new_host_keys;
    options.validate()?;
    // The folder now, to look into while the cells run; with the verdict again at the end.
    note!("audit: {}", out.display());
    crate::cluster::leftovers::clean_and_keep_note_beside(&out);
    crate::cluster::install_cleanup_handlers();
    let runtime = tokio::runtime::Runtime::new()?;
    let for_signal = options.clone();
    let on_signal =
        move |audit: Audit, signal: &'static str| interrupted(audit, signal, &for_signal, json);
    let result = runtime.block_on(audit(
        &options,
        |done, total, cell| {
            let found = if cell.status == crate::audit::Status::NotApplicable {
                "not run".to_string()
            } else if cell.found.is_empty() && cell.status == crate::audit::Status::Error {
                "no verdict".to_string()
            } else if cell.found.is_empty() {
                "valid".to_string()
            } else {
                cell.found
                    .iter()
                    .map(|(k, n)| format!("{k} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let verdict = match cell.status {
                crate::audit::Status::Pass => "as expected".to_string(),
                crate::audit::Status::NotApplicable => {
                    format!("n/a: {}", cell.why.as_deref().unwrap_or("not applicable"))
                }
                crate::audit::Status::Error => {
                    format!("ERROR: {}", cell.why.as_deref().unwrap_or("the run failed"))
                }
                crate::audit::Status::Differs => {
                    format!("DIFFERS: {}", cell.why.as_deref().unwrap_or(""))
                }
                crate::audit::Status::Untested => {
                    format!(
                        "UNTESTED: {}",
                        cell.why.as_deref().unwrap_or("no fault acted")
                    )
                }
            };
            // Progress: a line per cell as it ends, in the order they end.
            note!(
                "[{done:>3}/{total}] {} × {}: {found} ({verdict}) {:.1}s",
                cell.algorithm,
                cell.nemesis,
                cell.seconds
            );
        },
        on_signal,
    ));
    crate::cluster::leftovers::forget();
    let audit = match result {
        Ok(audit) => audit,
        Err(e) => anyhow::bail!(e),
    };
    if let Some(shard) = &audit.matrix.shard {
        let (share, whole) = (audit.matrix.cells.len(), shard.matrix.cells.len());
        note!(
            "audit: shard {} of {}: {share} of the audit's {whole} cells{}",
            shard.index,
            shard.of,
            if share == 0 {
                " (an empty shard, written for --merge)"
            } else {
                ""
            }
        );
    }
    let passed = finish(&audit, &options, json)?;
    if let Some(results) = out.parent() {
        crate::index::update_after(results);
    }
    Ok(if passed { 0 } else { 1 })
}

/// `audit --merge`: the shards in `dirs` joined, written to `out` as a whole audit is, with
/// its exit code. Shards that make no whole audit are refused before anything is written.
fn merge(dirs: &[PathBuf], out: PathBuf, json: bool) -> anyhow::Result<u8> {
    let (audit, plan) = crate::audit::merge::merge(dirs)?;
    // Its files would overwrite a shard's.
    let same = |dir: &PathBuf| std::path::absolute(dir).ok() == std::path::absolute(&out).ok();
    if let Some(dir) = dirs.iter().find(|d| same(d)) {
        anyhow::bail!(
            "--out: {} is one of the shards; the merged audit needs a folder of its own",
            dir.display()
        );
    }
    note!("audit: {} shards merged into {}", dirs.len(), out.display());
    let mut options = AuditOptions::new(out.clone());
    options.rounds = plan.rounds;
    options.time_limit = Millis(plan.time_limit_ms);
    let passed = finish(&audit, &options, json)?;
    if let Some(results) = out.parent() {
        crate::index::update_after(results);
    }
    Ok(if passed { 0 } else { 1 })
}

/// An audit cut short by `signal`: its matrix of the cells that finished and of those cut
/// short (marked interrupted), printed and written as at a normal end, after a line saying
/// so. The process exits with the signal's code next.
fn interrupted(audit: Audit, signal: &str, options: &AuditOptions, json: bool) {
    // Every round's cells: over rounds, the matrix has one per cell.
    let cells: Vec<_> = audit.rounds.iter().flat_map(|r| &r.cells).collect();
    let cut = cells.iter().filter(|c| c.interrupted.is_some()).count();
    let line = format!(
        "interrupted by {signal}: {} cell(s) finished, {cut} cut short (marked interrupted)\n",
        cells.len() - cut
    );
    match json {
        true => crate::streams::err(&line),
        false => {
            let _ = print_out(&line);
        }
    }
    if let Err(e) = finish(&audit, options, json) {
        note!("lockaudit: interrupted by {signal}: {e}");
    }
}

/// Prints the verdict (the folder, the matrix, with --rounds each cell over the rounds,
/// the rounds and the detection table) and writes audit.md / audit.json / audit.xml (and
/// each round's matrix and reach.md); whether the audit passed.
fn finish(audit: &Audit, options: &AuditOptions, json: bool) -> anyhow::Result<bool> {
    let out = &options.out;
    let mut text = format!("audit: {}\n", out.display());
    let rounds = audit.rounds.len();
    if rounds > 1 {
        text += &format!(
            "\neach cell over {rounds} rounds (each round's matrix: round-0/, round-1/, ...):\n"
        );
    }
    text += &format!("\n{}\n", audit.matrix.to_table());
    if rounds > 1 {
        text += &audit.rounds_text();
    }
    let mut files = audit
        .matrix
        .write_all(out)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    // With rounds, each cell passes when enough rounds met its expectation.
    let passed = audit.matrix.passed();
    if rounds > 1 {
        let reach = reach_markdown(&audit.reach, options.time_limit);
        text += &format!("\n{reach}\n");
        let path = out.join("reach.md");
        crate::outfile::write(&path, reach)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        files.push(path);
        for (i, round) in audit.rounds.iter().enumerate() {
            let dir = out.join(format!("round-{i}"));
            files.extend(
                round
                    .write_all(&dir)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.display()))?,
            );
        }
    }
    let files: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
    if json {
        // audit.json's own text (with rounds, each cell over them, as the file holds it).
        crate::streams::err(&format!("audit: {}\n{files}", out.display()));
        print_out(&(audit.matrix.to_json() + "\n"))?;
    } else {
        print_out(&(text + &files))?;
    }
    Ok(passed)
}

/// Two cells per core: a cell's run mostly waits on its preset's timers (the full audit,
/// four cells at a time on 2 cores, used 181 s of CPU in 269 s), and the detection table of
/// docs/src/performance.md, measured four at a time on 2 cores, found every must-find kind in 10 of 10 runs.
fn default_jobs() -> usize {
    2 * std::thread::available_parallelism().map_or(1, |n| n.get())
}
