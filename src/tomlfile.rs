//! Reading the project's TOML files (workloads, fault schedules): errors that name the file,
//! the line and the field.

use std::path::Path;

use serde::de::DeserializeOwned;

/// A TOML file that cannot be used, with its place.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct FileError {
    pub path: String,
    /// 1-based; 0 when the error is about the file as a whole.
    pub line: usize,
    pub message: String,
}

impl FileError {
    /// An error about the whole file (`line` 0), e.g. from a check after parsing.
    pub fn whole(path: &str, message: impl Into<String>) -> FileError {
        FileError {
            path: path.to_string(),
            line: 0,
            message: message.into(),
        }
    }
}

/// Reads and parses `path`.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<T, FileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| FileError::whole(&name, format!("cannot read: {e}")))?;
    parse(&text, &name)
}

/// Parses `text` (from the file called `name`).
pub fn parse<T: DeserializeOwned>(text: &str, name: &str) -> Result<T, FileError> {
    toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        let (line, field) = locate(text, e.span(), &message);
        FileError {
            path: name.to_string(),
            line,
            message: match field {
                Some(field) if !message.contains(&format!("`{field}`")) => {
                    format!("field `{field}`: {message}")
                }
                _ => message,
            },
        }
    })
}

/// The line (1-based) and key an error is about. An unknown key's error spans the whole
/// table, so that key is looked up by name instead.
fn locate(
    text: &str,
    span: Option<std::ops::Range<usize>>,
    message: &str,
) -> (usize, Option<String>) {
    // The key before a line's first `=`, also inside an inline table (`{ url = ...`).
    let key_of = |line: &str| {
        line.split_once('=')
            .map(|(key, _)| {
                key.rsplit(['{', ',', '['])
                    .next()
                    .unwrap_or(key)
                    .trim()
                    .to_string()
            })
            .filter(|key| {
                !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_-.\"'".contains(&b))
            })
    };
    if let Some(unknown) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        // Any key of the line: an inline table has several.
        let has = |line: &str| {
            line.split([',', '{'])
                .any(|part| key_of(part).as_deref() == Some(unknown))
        };
        if let Some((n, _)) = text.lines().enumerate().find(|(_, line)| has(line)) {
            return (n + 1, Some(unknown.to_string()));
        }
    }
    match span {
        Some(span) => {
            let start = span.start.min(text.len());
            let line = text[..start].matches('\n').count();
            (line + 1, text.lines().nth(line).and_then(key_of))
        }
        None => (0, None),
    }
}
