//! Embeds the git commit lockaudit is built from (`LOCKAUDIT_COMMIT`), which every run
//! records in its run.json: a red run names the code that found it. A build without git or
//! outside a repository (a tarball, `cargo install` from a registry) says "unknown".
//!
//! Also compiles `src/wallclock.c`, the library external adapters' wall clocks run
//! under, with the C compiler Rust links with (`$CC`, else `cc`); the binary embeds it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// Watches `path`, or, while it does not exist, the nearest folder above it that does (no
/// higher than `stop`), which changes when it is made: cargo takes a watched path that does
/// not exist for a change, and would build the crate again on every `cargo build`.
fn watch(path: &Path, stop: &Path) {
    let watched = path
        .ancestors()
        .take_while(|p| p.starts_with(stop))
        .find(|p| p.exists());
    if let Some(watched) = watched {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
}

/// `$OUT_DIR/wallclock.so`, or the build stops saying what is missing.
fn wall_clock_library() {
    const SOURCE: &str = "src/wallclock.c";
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let result = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(out.join("wallclock.so"))
        .arg(SOURCE)
        .arg("-ldl")
        .status();
    let failure = match result {
        Ok(status) if status.success() => return,
        Ok(status) => format!("`{cc}` failed ({status}); its messages are above"),
        Err(e) => format!("cannot run the C compiler `{cc}`: {e}"),
    };
    eprintln!(
        "lockaudit's build compiles {SOURCE} (the wall clock of external adapters under \
         clock-skew) and {failure}. Install a C compiler and libc's headers \
         (Debian: apt-get install gcc libc6-dev), or name one in $CC."
    );
    std::process::exit(1);
}

fn main() {
    wall_clock_library();
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=LOCKAUDIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Built again when HEAD moves: HEAD itself (a checkout) and the branch it names (a
    // commit), a loose file under refs/ or a line of packed-refs. A worktree keeps HEAD in
    // its own git folder, the branches in the common one.
    if let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let (git_dir, common) = (PathBuf::from(git_dir), PathBuf::from(common));
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        // packed-refs only once it exists (a fresh clone may have none; `git pack-refs`
        // makes it and removes the loose branch file, which is watched below).
        let packed = common.join("packed-refs");
        if packed.exists() {
            println!("cargo:rerun-if-changed={}", packed.display());
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            // A branch with no commit yet, or only in packed-refs, has no file: its folder
            // (refs/heads) changes when its first commit, or its next one, writes it.
            watch(&common.join(branch), &common.join("refs"));
        }
    }
}
