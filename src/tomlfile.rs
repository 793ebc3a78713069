//! Reading the project's TOML files (workloads, fault schedules): errors that name the file,
//! the line and the field.

use std::path::Path;

use serde::de::DeserializeOwned;

/// A TOML file that cannot be used, with its place (`path:line: message`, or `path: message`
/// for the file as a whole).
#[derive(Debug, thiserror::Error)]
#[error("{path}{}: {message}", place(*line))]
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

/// `:line`, or nothing for the whole file (line 0).
fn place(line: usize) -> String {
    match line {
        0 => String::new(),
        n => format!(":{n}"),
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
        let message = suggest_name(&message).unwrap_or(message);
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

/// serde's "unknown field `clinets`, expected one of `algorithm`, `clients`, ..." (or
/// "unknown variant" for a value) as `unknown field `clinets` (did you mean "clients"?)`;
/// the list stays when no name is near. None for any other message.
fn suggest_name(message: &str) -> Option<String> {
    let (what, rest) = ["field", "variant"]
        .into_iter()
        .find_map(|what| Some((what, message.strip_prefix(&format!("unknown {what} `"))?)))?;
    let (name, expected) = rest.split_once("`, ")?;
    // serde names each expected one between backticks: every other piece of the split.
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let near = crate::suggest::did_you_mean(name, known.iter().copied());
    let what = if what == "variant" { "value" } else { what };
    (!near.is_empty()).then(|| format!("unknown {what} `{name}`{near}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Spec {
        clients: Option<u32>,
        workers: Option<u32>,
        topology: Option<Shape>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    enum Shape {
        Single,
        Replicated,
    }

    #[test]
    fn a_misspelt_field_or_value_gets_the_nearest_name_and_its_line() {
        let err = parse::<Spec>("workers = 2\nclinets = 4\n", "w.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "w.toml:2: unknown field `clinets` (did you mean \"clients\"?)"
        );
        let err = parse::<Spec>("topology = \"singel\"\n", "w.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "w.toml:1: field `topology`: unknown value `singel` (did you mean \"single\"?)"
        );
        // Nothing near: serde's own list of what the file may say stays.
        let err = parse::<Spec>("zzzzzzzz = 1\n", "w.toml").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("w.toml:1: unknown field `zzzzzzzz`, expected one of `clients`"),
            "{err}"
        );
    }

    #[test]
    fn an_error_about_the_whole_file_names_no_line() {
        assert_eq!(
            FileError::whole("w.toml", "cannot read: gone").to_string(),
            "w.toml: cannot read: gone"
        );
    }
}
