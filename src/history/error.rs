//! Errors in history input, always naming the file, the line and the field at fault.

use std::fmt;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A line that breaks the format or the rules of docs/src/reference/history.md.
    Invalid {
        source_name: String,
        line: u64,
        /// The field at fault (`value.token` for a nested one), or empty for the whole line.
        field: String,
        message: String,
    },
    /// The file could not be read at all.
    Io {
        source_name: String,
        // Not `#[source]`: the message already says it, and anyhow would say it twice.
        error: std::io::Error,
    },
}

impl HistoryError {
    pub fn at(source: &str, line: u64, field: &str, message: String) -> Self {
        HistoryError::Invalid {
            source_name: source.to_string(),
            line,
            field: field.to_string(),
            message,
        }
    }

    pub fn io(source: &str, error: std::io::Error) -> Self {
        HistoryError::Io {
            source_name: source.to_string(),
            error,
        }
    }

    /// The 1-based line at fault, if any.
    pub fn line(&self) -> Option<u64> {
        match self {
            HistoryError::Invalid { line, .. } => Some(*line),
            HistoryError::Io { .. } => None,
        }
    }

    /// The field at fault, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            HistoryError::Invalid { field, .. } if !field.is_empty() => Some(field),
            _ => None,
        }
    }
}

impl fmt::Display for HistoryError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            HistoryError::Invalid {
                source_name,
                line,
                field,
                message,
            } => {
                if field.is_empty() {
                    write!(f, "{source_name}:{line}: {message}")
                } else {
                    write!(f, "{source_name}:{line}: field `{field}`: {message}")
                }
            }
            HistoryError::Io { source_name, error } => {
                write!(f, "{source_name}: cannot read: {error}")
            }
        }
    }
}
