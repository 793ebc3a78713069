//! Paths as seen from another folder, for links that still work when the audit folder moves.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

/// The components of a path without `.`, or None if it has `..`.
fn plain(path: &Path) -> Option<Vec<Component<'_>>> {
    let parts: Vec<Component> = path
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    (!parts.contains(&Component::ParentDir)).then_some(parts)
}

/// `path` as seen from `base` (both taken as they are, or made absolute against the
/// current folder when one is relative and the other not): `results/a/x` from `results/b`
/// is `../a/x`. Paths with `..` in them are left as they are.
pub(super) fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let (path, base): (Cow<Path>, Cow<Path>) = if path.is_absolute() == base.is_absolute() {
        (Cow::Borrowed(path), Cow::Borrowed(base))
    } else {
        match (std::path::absolute(path), std::path::absolute(base)) {
            (Ok(p), Ok(b)) => (Cow::Owned(p), Cow::Owned(b)),
            _ => return path.to_path_buf(),
        }
    };
    let (Some(to), Some(from)) = (plain(&path), plain(&base)) else {
        return path.into_owned();
    };
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to[common..] {
        out.push(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        let rel = |p: &str, b: &str| relative_to(Path::new(p), Path::new(b));
        assert_eq!(rel("results/a/x", "results/b"), PathBuf::from("../a/x"));
        assert_eq!(rel("/r/a/x", "/r/a"), PathBuf::from("x"));
        assert_eq!(rel("./r/a", "r"), PathBuf::from("a"));
        assert_eq!(rel("../r/a", "r"), PathBuf::from("../r/a"));
    }
}
