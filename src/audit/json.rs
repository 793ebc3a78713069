//! `audit.json`: the verdict and counts up front, then the matrix; it reads back.

use serde::Serialize;

use super::matrix::{Counts, Matrix};

/// What `audit.json` holds: the verdict and counts up front, then the matrix.
#[derive(Serialize)]
struct JsonOut<'a> {
    passed: bool,
    counts: Counts,
    #[serde(flatten)]
    matrix: &'a Matrix,
}

impl Matrix {
    /// "started_wall", "seconds", "seed"}`, pretty. [`Matrix::from_json`] reads it back.
    pub fn to_json(&self) -> String {
        let out = JsonOut {
            passed: self.passed(),
            counts: self.counts(),
            matrix: self,
        };
        // Only strings, integers, floats and maps: serialising cannot fail.
        serde_json::to_string_pretty(&out).expect("a matrix serialises to JSON")
    }

    /// Reads `audit.json` back (its `passed` and `counts` are derived, and ignored).
    pub fn from_json(text: &str) -> Result<Matrix, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::small;
    use crate::audit::matrix::{Cell, Status};

    #[test]
    fn json_round_trips() {
        let m = small();
        let text = m.to_json();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["passed"], false);
        assert_eq!(value["counts"]["differs"], 1);
        assert_eq!(value["cells"][2]["status"], "differs");
        assert_eq!(value["cells"][2]["found"]["stale-write"], 1);
        assert_eq!(value["cells"][2]["run_dir"], "r/c");
        let back = Matrix::from_json(&text).unwrap();
        assert_eq!(back, m);
        // A hand-trimmed cell still reads, and an older audit's "skipped" is "n/a".
        let cell: Cell =
            serde_json::from_str(r#"{"algorithm": "a", "nemesis": "n", "status": "skipped"}"#)
                .unwrap();
        assert_eq!(cell.status, Status::NotApplicable);
        assert_eq!(
            serde_json::to_value(Status::NotApplicable).unwrap(),
            serde_json::json!("n/a")
        );
    }
}
