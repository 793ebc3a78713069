//! What `/proc` says of processes: a process's children, and whether a pid is alive.
//!
//! Needed for postgres, whose every backend makes itself a session leader (`setsid` in
//! `InitPostmasterChild`), so that its process group holds the postmaster alone: a pause
//! or kill must reach its children by pid.

/// State letter and parent pid of `pid`, from `/proc/<pid>/stat` (None once it is gone).
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis (a command may hold spaces): state, ppid, ...
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// Whether `pid` runs or sleeps (or is stopped): not gone, not a zombie.
pub fn is_live(pid: u32) -> bool {
    state_and_parent(pid).is_some_and(|(state, _)| state != 'Z')
}

/// The live children of `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            state_and_parent(pid).is_some_and(|(state, ppid)| ppid == parent && state != 'Z')
        })
        .collect()
}

/// `pid` (if live) and its live children: a postmaster and its backends.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut tree: Vec<u32> = is_live(pid).then_some(pid).into_iter().collect();
    tree.extend(children_of(pid));
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_child_and_sees_it_die() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert!(children_of(me).contains(&child.id()));
        assert!(is_live(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_live(child.id()));
    }
}
