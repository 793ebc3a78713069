//! Records written straight as JSON lines, byte for byte what serde writes for `Event`.

use std::io::{self, BufWriter, Write};

use super::record::{Rec, Val, HELD_REASON};

/// Formats records as the same JSON lines serde writes for `Event` (its field order; payload
/// objects with their keys sorted, as serde_json's map keeps them).
pub(super) struct LineWriter<W: Write> {
    out: BufWriter<W>,
    line: Vec<u8>,
    index: u64,
    keys: Vec<String>,
}

fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

fn push_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs());
}

fn push_opt(buf: &mut Vec<u8>, v: Option<i64>) {
    match v {
        Some(v) => push_i64(buf, v),
        None => buf.extend_from_slice(b"null"),
    }
}

impl<W: Write> LineWriter<W> {
    /// A writer to `out`, for records whose keys are named `keys`.
    pub(super) fn new(out: W, keys: Vec<String>) -> Self {
        LineWriter {
            out: BufWriter::with_capacity(1 << 20, out),
            line: Vec::with_capacity(256),
            index: 0,
            keys,
        }
    }

    /// Flushes what is buffered; returns the number of lines written.
    pub(super) fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        Ok(self.index)
    }

    pub(super) fn write(&mut self, rec: &Rec) -> io::Result<()> {
        let b = &mut self.line;
        b.clear();
        b.extend_from_slice(b"{\"index\":");
        push_u64(b, self.index);
        b.extend_from_slice(b",\"time\":");
        push_i64(b, rec.time);
        b.extend_from_slice(b",\"process\":");
        if let Val::Kill { slot, pid } = rec.val {
            b.extend_from_slice(b"\"nemesis\",\"type\":\"info\",\"f\":\"kill\"");
            b.extend_from_slice(b",\"value\":{\"processes\":[");
            push_u64(b, pid);
            b.extend_from_slice(b"],\"targets\":[\"worker-");
            push_u64(b, u64::from(slot));
            b.extend_from_slice(b"\"]}}\n");
        } else {
            push_u64(b, rec.pid);
            b.extend_from_slice(b",\"type\":\"");
            b.extend_from_slice(rec.ty.name().as_bytes());
            b.extend_from_slice(b"\",\"f\":\"");
            b.extend_from_slice(rec.op.name().as_bytes());
            b.extend_from_slice(b"\",\"key\":\"");
            b.extend_from_slice(self.keys[rec.key as usize].as_bytes());
            b.push(b'"');
            match rec.val {
                Val::None | Val::Kill { .. } => {}
                Val::Acquire { token, lease } => {
                    b.extend_from_slice(b",\"value\":{\"lease_ms\":");
                    push_opt(b, lease);
                    b.extend_from_slice(b",\"token\":");
                    push_opt(b, token);
                    b.push(b'}');
                }
                Val::Held => {
                    b.extend_from_slice(b",\"value\":{\"reason\":\"");
                    b.extend_from_slice(HELD_REASON.as_bytes());
                    b.extend_from_slice(b"\"}");
                }
                Val::Renew { lease } => {
                    b.extend_from_slice(b",\"value\":{\"lease_ms\":");
                    push_i64(b, lease);
                    b.push(b'}');
                }
                Val::Write { token, value } => {
                    b.extend_from_slice(b",\"value\":{\"token\":");
                    push_opt(b, token);
                    b.extend_from_slice(b",\"value\":");
                    push_i64(b, value);
                    b.push(b'}');
                }
                Val::Read { value } => {
                    b.extend_from_slice(b",\"value\":{\"value\":");
                    push_opt(b, value);
                    b.push(b'}');
                }
            }
            if let Some(message) = rec.why.message() {
                b.extend_from_slice(b",\"error\":\"");
                b.extend_from_slice(message.as_bytes());
                b.push(b'"');
            }
            b.extend_from_slice(b"}\n");
        }
        self.index += 1;
        self.out.write_all(&self.line)
    }
}
