//! Lease owners: who holds a run. An owner made by [`local_owner`] names its host and
//! process (`HOST:PID#N`), so a reader on the same host can tell at once that the process
//! holding a run is gone ([`owner_gone`]) instead of waiting for its lease to lapse.
//! Other owner strings are opaque: only their lease counts.

use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(1);

/// This machine's host name (`localhost` when it cannot be read).
fn host() -> String {
    #[cfg(unix)]
    {
        if let Ok(name) = nix::unistd::gethostname()
            && let Some(name) = name.to_str()
            && !name.is_empty()
        {
            return name.to_string();
        }
    }
    "localhost".to_string()
}

/// A new owner name for this process: `HOST:PID#N`, `N` counting the owners this process
/// made (two drivers in one process are two owners).
pub fn local_owner() -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}:{}#{n}", host(), std::process::id())
}

/// A SQL `LIKE` pattern matching the owners [`local_owner`] makes on this host (and
/// maybe a few others: `_` in a host name matches any character; check with
/// [`owner_gone`]).
pub(crate) fn local_owner_pattern() -> String {
    format!("{}:%", host().replace('%', "_"))
}

/// The host and process id an owner made by [`local_owner`] names.
fn parse(owner: &str) -> Option<(&str, u32)> {
    let (host, rest) = owner.rsplit_once(':')?;
    let (pid, n) = rest.split_once('#')?;
    n.parse::<u32>().ok()?;
    Some((host, pid.parse().ok()?))
}

/// True when `owner` names a process on this host that no longer runs (or is a zombie).
/// False for owners of other hosts, owner names of another form and live processes.
pub fn owner_gone(owner: &str) -> bool {
    let Some((owner_host, pid)) = parse(owner) else {
        return false;
    };
    if pid == std::process::id() || owner_host != host() {
        return false;
    }
    process_gone(pid)
}

#[cfg(target_os = "linux")]
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the command, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
fn process_gone(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

#[cfg(not(unix))]
fn process_gone(_pid: u32) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_dead_pid_is_gone() {
        let me = local_owner();
        assert!(parse(&me).is_some());
        assert!(!owner_gone(&me));
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawns true");
        let pid = child.id();
        child.wait().expect("waits");
        assert!(owner_gone(&format!("{}:{pid}#1", host())));
        assert!(!owner_gone(&format!("elsewhere.example:{pid}#1")));
        assert!(!owner_gone("child"));
    }
}
