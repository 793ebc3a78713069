//! Reading a JSONL history with several threads (`lockaudit check --threads`).
//!
//! The input is read in chunks of whole lines, numbered as they are read. Worker threads
//! each read a chunk and parse it; the calling thread adds the parsed chunks to the history
//! in their order, and whenever the next one is not ready yet, reads and parses one itself
//! rather than wait. The builder's work (interning, checking each process's sequence) stays
//! on the calling thread, as it depends on every event before; the parsing, most of a read,
//! is what is spread.
//!
//! A line the fast scanner cannot read is handed on as text and goes through
//! `reader::handle_line` on the calling thread, so the history, the warnings and every error
//! (with its line number) are those of `reader::read_jsonl`.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::build::{EventRef, HistoryBuilder, Payload};
use super::compact::History;
use super::compact::OpF;
use super::error::HistoryError;
use super::event::{EventType, Process};
use super::fast_line;
use super::reader::{
    handle_line, line_too_long, reads_ahead, trim_line_end, Flow, AHEAD, MAX_LINE_BYTES,
};

/// About how many bytes of lines are read at a time: large enough that passing them on costs
/// little, small enough that the chunks in flight stay in the caches' reach.
const CHUNK_BYTES: usize = 1 << 19;

/// Reads and validates a JSONL history as `reader::read_jsonl` does, with `workers` threads
/// reading and parsing beside the calling one, which builds the history.
pub fn read_jsonl_threaded<R: Read + Send>(
    input: R,
    source: &str,
    size_hint: Option<u64>,
    workers: usize,
) -> Result<History, HistoryError> {
    read_in_chunks(input, source, size_hint, workers, CHUNK_BYTES)
}

/// `read_jsonl_threaded` with chunks of about `chunk_bytes` (tests use tiny ones, so that
/// lines fall across every boundary).
fn read_in_chunks<R: Read + Send>(
    input: R,
    source: &str,
    size_hint: Option<u64>,
    workers: usize,
    chunk_bytes: usize,
) -> Result<History, HistoryError> {
    let workers = workers.max(1);
    let mut builder = HistoryBuilder::new(source);
    if let Some(size) = size_hint {
        builder.reserve((size / super::reader::MIN_LINE_BYTES) as usize);
    }
    let shared = Shared {
        input: Mutex::new(Input {
            reader: input,
            chunk_bytes,
            carry: Vec::new(),
            at_end: false,
            next: 0,
            count: None,
            stopped: false,
            spare: Vec::new(),
            // What bounds the memory in flight: each worker parsing one chunk and having
            // handed on another, the builder parsing one and pushing one.
            buffers_left: 2 * workers + 2,
        }),
        buffer_freed: Condvar::new(),
    };
    std::thread::scope(|scope| {
        let (parsed, results) = sync_channel(workers);
        for _ in 0..workers {
            let (parsed, shared) = (parsed.clone(), &shared);
            scope.spawn(move || work(shared, parsed));
        }
        drop(parsed);
        let built = build(&mut builder, source, &shared, &results);
        // Whether done or failed: workers waiting for a buffer, or to hand one on, end.
        shared.stop();
        drop(results);
        built
    })?;
    Ok(builder.finish())
}

/// The input and the buffers, shared by every thread.
struct Shared<R> {
    input: Mutex<Input<R>>,
    buffer_freed: Condvar,
}

struct Input<R> {
    reader: R,
    chunk_bytes: usize,
    /// The start of a line whose end is not read yet.
    carry: Vec<u8>,
    /// The reader has nothing more.
    at_end: bool,
    /// The number the next chunk read gets.
    next: u64,
    /// How many chunks there are, once no more will be read (the input used up or failed,
    /// or a line too long).
    count: Option<u64>,
    /// The builder is done or failed.
    stopped: bool,
    /// Buffers given back, and how many more may be made.
    spare: Vec<Buffers>,
    buffers_left: usize,
}

/// A chunk's bytes and the list its lines are parsed into, reused from chunk to chunk.
type Buffers = (Vec<u8>, Vec<Line>);

impl<R: Read> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, Input<R>> {
        self.input.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the next chunk and gives its number, waiting for a buffer if `wait`; `None`
    /// once no more are to be read (or, not waiting, if no buffer is free).
    fn read_chunk(&self, wait: bool) -> Option<(u64, Chunk)> {
        let mut input = self.lock();
        let (bytes, lines) = loop {
            if input.stopped || input.count.is_some() {
                return None;
            }
            if let Some(buffers) = input.spare.pop() {
                break buffers;
            }
            if input.buffers_left > 0 {
                input.buffers_left -= 1;
                break Default::default();
            }
            if !wait {
                return None;
            }
            input = self
                .buffer_freed
                .wait(input)
                .unwrap_or_else(|e| e.into_inner());
        };
        let number = input.next;
        let Some(chunk) = next_chunk(&mut input, bytes, lines) else {
            input.count = Some(number);
            return None;
        };
        input.next += 1;
        if !matches!(chunk, Chunk::Lines { .. }) {
            // After an error, or a line too long, nothing more is read.
            input.count = Some(input.next);
        }
        Some((number, chunk))
    }

    /// How many chunks there are, once known.
    fn count(&self) -> Option<u64> {
        self.lock().count
    }

    fn give_back(&self, buffers: Buffers) {
        self.lock().spare.push(buffers);
        self.buffer_freed.notify_one();
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.buffer_freed.notify_all();
    }
}

/// A worker: reads a chunk, parses it and hands it on, until there are no more.
fn work<R: Read>(shared: &Shared<R>, parsed: SyncSender<(u64, Chunk)>) {
    while let Some((number, chunk)) = shared.read_chunk(true) {
        if parsed.send((number, parse(chunk))).is_err() {
            return;
        }
    }
}

/// The next chunk of whole lines, in `bytes`; `None` once the input is used up.
fn next_chunk<R: Read>(
    input: &mut Input<R>,
    mut bytes: Vec<u8>,
    lines: Vec<Line>,
) -> Option<Chunk> {
    if input.at_end && input.carry.is_empty() {
        return None;
    }
    bytes.clear();
    bytes.append(&mut input.carry);
    loop {
        if !input.at_end {
            match fill(&mut input.reader, &mut bytes, input.chunk_bytes) {
                Ok(ended) => input.at_end = ended,
                Err(err) => return Some(Chunk::Failed(err)),
            }
        }
        let Some(last) = memchr::memrchr(b'\n', &bytes) else {
            // No line ends here: one line, read on unless it is too long or all there is.
            if bytes.len() > MAX_LINE_BYTES {
                return Some(Chunk::TooLong);
            }
            if input.at_end {
                return Some(Chunk::Lines { bytes, lines });
            }
            continue;
        };
        // Only the first line can have started in an earlier read.
        if memchr::memchr(b'\n', &bytes).unwrap_or(last) > MAX_LINE_BYTES {
            return Some(Chunk::TooLong);
        }
        input.carry.extend_from_slice(&bytes[last + 1..]);
        bytes.truncate(last + 1);
        return Some(Chunk::Lines { bytes, lines });
    }
}

/// A chunk with its lines parsed.
fn parse(chunk: Chunk) -> Chunk {
    match chunk {
        Chunk::Lines { bytes, mut lines } => {
            lines.clear();
            parse_lines(&bytes, &mut lines);
            Chunk::Lines { bytes, lines }
        }
        other => other,
    }
}

/// A chunk as read, and then parsed.
enum Chunk {
    /// Whole lines (the last one unterminated only at the end of the input), and an empty
    /// list to parse them into.
    Lines {
        bytes: Vec<u8>,
        lines: Vec<Line>,
    },
    /// The next line is longer than `MAX_LINE_BYTES`.
    TooLong,
    Failed(std::io::Error),
}

/// One line of a chunk, as a parser left it.
enum Line {
    Event(Spans),
    /// Left to `handle_line`: the bytes (with the `\n`, if any) at these offsets.
    Text(u32, u32),
}

/// An event whose strings are offsets into its chunk, so that it can cross to another
/// thread without the chunk being borrowed.
struct Spans {
    index: u64,
    time: i64,
    process: Process,
    ty: EventType,
    f: Name,
    key: Option<(u32, u32)>,
    payload: Payload,
}

/// An event's `f`: the scanner gives a client operation's name as a constant, not from the
/// line, and any other (a fault's) from the line.
#[derive(Clone, Copy)]
enum Name {
    Word(&'static str),
    At(u32, u32),
}

impl Spans {
    /// `event`'s strings as offsets into `bytes`; `None` if one of them lies elsewhere (or
    /// it has wrong members, which the builder must see with their text).
    fn of(event: EventRef, bytes: &[u8]) -> Option<Spans> {
        if !event.wrong.is_empty() {
            return None;
        }
        let span = |text: &str| {
            let start = (text.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
            let end = start.checked_add(text.len())?;
            (end <= bytes.len()).then_some(())?;
            Some((u32::try_from(start).ok()?, u32::try_from(end).ok()?))
        };
        let f = match OpF::from_client_name(event.f) {
            Some(op) => Name::Word(op.name()),
            None => {
                let (start, end) = span(event.f)?;
                Name::At(start, end)
            }
        };
        let key = match event.key {
            Some(key) => Some(span(key)?),
            None => None,
        };
        Some(Spans {
            index: event.index,
            time: event.time,
            process: event.process,
            ty: event.ty,
            f,
            key,
            payload: event.payload,
        })
    }

    /// The event, its payload moved out (each is pushed once).
    fn take<'a>(&mut self, bytes: &'a [u8]) -> EventRef<'a> {
        EventRef {
            payload: std::mem::take(&mut self.payload),
            ..self.peek(bytes)
        }
    }

    /// The event without its payload: enough to prefetch what pushing it will need.
    fn peek<'a>(&self, bytes: &'a [u8]) -> EventRef<'a> {
        let text = |(start, end): (u32, u32)| {
            let range = &bytes[start as usize..end as usize];
            // SAFETY: the offsets were taken from a `&str` over these very bytes (`of`),
            // and the chunk is not changed between parsing and pushing.
            unsafe { std::str::from_utf8_unchecked(range) }
        };
        EventRef {
            index: self.index,
            time: self.time,
            process: self.process,
            ty: self.ty,
            f: match self.f {
                Name::Word(word) => word,
                Name::At(start, end) => text((start, end)),
            },
            key: self.key.map(text),
            payload: Payload::default(),
            wrong: &[],
        }
    }
}

/// Appends up to `more` bytes of `input` to `bytes`; true if the input ended.
fn fill(input: &mut impl Read, bytes: &mut Vec<u8>, more: usize) -> std::io::Result<bool> {
    bytes.reserve(more);
    let read = input.by_ref().take(more as u64).read_to_end(bytes)?;
    Ok(read < more)
}

/// Every line of `bytes`, in order: as an event where the fast scanner reads it (as
/// `reader::read_jsonl` would: the canonical layout in place, any other through
/// `fast_line::parse`), as text otherwise.
fn parse_lines(bytes: &[u8], lines: &mut Vec<Line>) {
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if let Some((event, end)) = fast_line::parse_canonical_prefix(rest) {
            if rest.get(end) == Some(&b'\n') {
                if let Some(spans) = Spans::of(event, bytes) {
                    lines.push(Line::Event(spans));
                    at += end + 1;
                    continue;
                }
            }
        }
        let length = memchr::memchr(b'\n', rest).map_or(rest.len(), |end| end + 1);
        let text = trim_line_end(&rest[..length]);
        let line = match fast_line::parse(text).and_then(|event| Spans::of(event, bytes)) {
            Some(spans) => Line::Event(spans),
            // Offsets fit: a chunk is at most a few times `MAX_LINE_BYTES`.
            None => Line::Text(at as u32, (at + length) as u32),
        };
        lines.push(line);
        at += length;
    }
}

/// The calling thread: adds the parsed chunks to the history in their order, numbering the
/// lines, and gives their buffers back. While the next chunk is not ready, it reads and
/// parses one itself rather than wait.
fn build<R: Read>(
    builder: &mut HistoryBuilder,
    source: &str,
    shared: &Shared<R>,
    results: &Receiver<(u64, Chunk)>,
) -> Result<(), HistoryError> {
    let mut ready: BTreeMap<u64, Chunk> = BTreeMap::new();
    let mut next: u64 = 0;
    let mut line_no: u64 = 0;
    loop {
        if let Some(chunk) = ready.remove(&next) {
            let (bytes, lines) = match chunk {
                Chunk::Lines { bytes, lines } => (bytes, lines),
                Chunk::TooLong => return Err(line_too_long(source, line_no + 1)),
                Chunk::Failed(err) => return Err(HistoryError::io(source, err)),
            };
            let (flow, buffers) = push_lines(builder, source, &mut line_no, bytes, lines)?;
            if let Flow::Stop = flow {
                return Ok(());
            }
            shared.give_back(buffers);
            next += 1;
            continue;
        }
        if shared.count() == Some(next) {
            return Ok(());
        }
        match results.try_recv() {
            Ok((number, chunk)) => {
                ready.insert(number, chunk);
                continue;
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        }
        if let Some((number, chunk)) = shared.read_chunk(false) {
            ready.insert(number, parse(chunk));
            continue;
        }
        // Chunk `next` is being parsed by a worker (a buffer would be free otherwise).
        match results.recv() {
            Ok((number, chunk)) => {
                ready.insert(number, chunk);
            }
            Err(_) if shared.count() == Some(next) => return Ok(()),
            Err(_) => {
                return Err(HistoryError::io(
                    source,
                    std::io::Error::other("a reading thread ended before the input did"),
                ))
            }
        }
    }
}

/// Pushes a chunk's lines, numbering them on from `line_no`; gives the buffers back for
/// reuse, and whether a last line ended the history.
fn push_lines(
    builder: &mut HistoryBuilder,
    source: &str,
    line_no: &mut u64,
    bytes: Vec<u8>,
    mut lines: Vec<Line>,
) -> Result<(Flow, Buffers), HistoryError> {
    for i in 0..lines.len() {
        // As `read_jsonl` does: with many processes or keys, fetch a line's ids `AHEAD` lines
        // before it is pushed and its process state a line later.
        if reads_ahead(builder) {
            if let Some(Line::Event(later)) = lines.get(i + AHEAD - 1) {
                builder.prefetch_state(&later.peek(&bytes));
            }
            if let Some(Line::Event(later)) = lines.get(i + AHEAD) {
                builder.prefetch_ids(&later.peek(&bytes));
            }
        }
        *line_no += 1;
        match &mut lines[i] {
            Line::Event(spans) => builder.push(*line_no, &spans.take(&bytes))?,
            Line::Text(start, end) => {
                let line = &bytes[*start as usize..*end as usize];
                if let Flow::Stop = handle_line(builder, source, *line_no, line)? {
                    return Ok((Flow::Stop, (bytes, lines)));
                }
            }
        }
    }
    Ok((Flow::Go, (bytes, lines)))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::path::Path;

    use super::read_in_chunks;
    use crate::history::reader::read_jsonl;

    /// What a reader made of a text: the history (its debug rendering, which shows every
    /// field) or the error message.
    fn outcome(result: Result<crate::history::History, crate::history::HistoryError>) -> String {
        match result {
            Ok(history) => format!("{history:?}"),
            Err(err) => format!("error: {err}"),
        }
    }

    /// Reads `text` with one thread and with 1 to 3 workers at many chunk sizes (a chunk of
    /// 1 byte cuts every line), and asserts that all agree.
    fn assert_reads_alike(name: &str, text: &[u8]) {
        let alone = outcome(read_jsonl(text, name, None));
        for workers in 1..=3 {
            for chunk in [1, 2, 7, 64, 300, 4096, 1 << 19] {
                let threaded = outcome(read_in_chunks(text, name, None, workers, chunk));
                assert!(
                    threaded == alone,
                    "{name}, {workers} workers, chunks of {chunk} bytes:\n{threaded}\n\
                     where one thread reads:\n{alone}"
                );
            }
        }
    }

    const OK: &str = r#"{"index":0,"time":1000,"process":1,"type":"invoke","f":"acquire","key":"k","value":{"ttl_ms":1000}}
{"index":1,"time":2000,"process":1,"type":"ok","f":"acquire","key":"k","value":{"lease_ms":1000,"token":7}}
{"index":2,"time":2500,"process":"nemesis","type":"info","f":"kill","value":{"processes":[1],"targets":["n1"]}}
"#;

    #[test]
    fn every_reference_history_reads_alike() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("history");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).expect("the history folder") {
            let path = entry.expect("a folder entry").path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read(&path).expect("a reference history");
                assert_reads_alike(&path.display().to_string(), &text);
                read += 1;
            }
        }
        assert!(read >= 20, "only {read} histories in {}", dir.display());
    }

    #[test]
    fn a_synthetic_history_reads_alike() {
        let config = crate::synth::SynthConfig {
            events: 3000,
            keys: 5,
            processes: 20,
            fenced: true,
            ..crate::synth::SynthConfig::default()
        };
        let mut text = Vec::new();
        crate::synth::generate_to(&config, &mut text).expect("a synthetic history");
        assert!(text.len() > 100_000);
        assert_reads_alike("synth.jsonl", &text);
    }

    #[test]
    fn layouts_the_fast_scanner_leaves_aside_read_alike() {
        let cases = [
            // Another member order, `wall`, an escaped key, CRLF line ends.
            r#"{"wall":17,"value":{"ttl_ms":50},"key":"k","f":"acquire","type":"invoke","process":1,"time":7,"index":0}"#.to_string() + "\n",
            OK.replace("\"key\":\"k\"", "\"key\":\"\\u006b\""),
            OK.replace('\n', "\r\n"),
            // No line end at the end; a truncated last line; a blank last line.
            OK.trim_end().to_string(),
            OK.to_string() + r#"{"index":3,"time":3000,"pro"#,
            OK.to_string() + "   ",
            String::new(),
        ];
        for (i, text) in cases.iter().enumerate() {
            assert_reads_alike(&format!("layout-{i}.jsonl"), text.as_bytes());
        }
    }

    #[test]
    fn errors_name_the_same_line_and_field() {
        let cases = [
            OK.to_string() + "\n" + OK,
            OK.to_string() + "not json\n" + OK,
            OK.replace("\"index\":2", "\"index\":5"),
            OK.replace("\"token\":7", "\"token\":\"seven\""),
            OK.repeat(3),
        ];
        for (i, text) in cases.iter().enumerate() {
            let name = format!("bad-{i}.jsonl");
            let error = outcome(read_jsonl(text.as_bytes(), &name, None));
            assert!(error.starts_with("error: "), "{name} read: {error}");
            assert_reads_alike(&name, text.as_bytes());
        }
    }

    #[test]
    fn a_line_too_long_is_named_by_its_number() {
        let long = format!(
            "{OK}{{\"index\":3,\"time\":3000,\"process\":1,\"type\":\"invoke\",\"f\":\"{}\"}}\n{OK}",
            "x".repeat(super::MAX_LINE_BYTES)
        );
        let alone = outcome(read_jsonl(long.as_bytes(), "long.jsonl", None));
        assert!(alone.contains("long.jsonl:4"), "{alone}");
        for workers in 1..=2 {
            let threaded = read_in_chunks(long.as_bytes(), "long.jsonl", None, workers, 1 << 20);
            assert_eq!(outcome(threaded), alone);
        }
        // Without any line end at all.
        let endless = "x".repeat(super::MAX_LINE_BYTES + 10);
        let alone = outcome(read_jsonl(endless.as_bytes(), "endless.jsonl", None));
        let threaded = read_in_chunks(endless.as_bytes(), "endless.jsonl", None, 2, 1 << 20);
        assert_eq!(outcome(threaded), alone);
        assert!(alone.contains("endless.jsonl:1"), "{alone}");
    }

    /// Gives a text, then fails.
    struct FailsAfter<'a>(&'a [u8]);

    impl Read for FailsAfter<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::other("the disk went away"));
            }
            let n = out.len().min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_failed_read_is_the_same_error() {
        // Two lines and a half, then the failure.
        let text = &OK[..OK.len() - 40];
        let alone = outcome(read_jsonl(FailsAfter(text.as_bytes()), "gone.jsonl", None));
        assert!(alone.contains("the disk went away"), "{alone}");
        for (workers, chunk) in [(1, 7), (2, 64), (3, 1 << 19)] {
            let threaded = read_in_chunks(
                FailsAfter(text.as_bytes()),
                "gone.jsonl",
                None,
                workers,
                chunk,
            );
            assert_eq!(outcome(threaded), alone);
        }
    }
}
