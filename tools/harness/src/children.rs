//! Stopping this process's children, or whatever else it started, when no
//! destructor will: on a panic in a release build (which aborts without
//! unwinding) and on SIGTERM or SIGINT. Children are found by PID in
//! `/proc`, never by name.

use std::time::Duration;

/// For a command that starts children and may end without running
/// destructors: on a panic (a release build aborts without unwinding), and on
/// SIGTERM or SIGINT (a timeout, a ^C, then exit 130), stops every child.
/// Installed before any child starts; `name` prefixes the message.
pub fn stop_children_on_exit(name: &'static str) -> Result<(), String> {
    on_abrupt_exit(name, || stop_children(Duration::from_secs(5)))
}

/// Runs `cleanup` where no destructor will: after a panic's message (a
/// release build then aborts without unwinding), and on SIGTERM or SIGINT,
/// before exiting 130. `name` prefixes the message.
pub fn on_abrupt_exit(name: &'static str, cleanup: fn()) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        cleanup();
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (mut term, mut int) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        });
        eprintln!("{name}: stopping (signal)");
        cleanup();
        std::process::exit(130);
    });
    Ok(())
}

/// Stops every direct child of this process (by PID, read from `/proc`):
/// SIGTERM, up to `grace`, then SIGKILL. For the moments no destructor will
/// run — a panic in a release build aborts without unwinding.
pub fn stop_children(grace: Duration) {
    let children = child_pids(std::process::id());
    if children.is_empty() {
        return;
    }
    let signal = |sig: &str, pids: &[u32]| {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .args(pids.iter().map(u32::to_string))
            .stderr(std::process::Stdio::null())
            .status();
    };
    signal("TERM", &children);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if children.iter().all(|pid| !is_alive(*pid)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = children.into_iter().filter(|pid| is_alive(*pid)).collect();
    signal("KILL", &left);
}

/// PIDs whose parent is `parent`, from `/proc/*/stat`.
pub fn child_pids(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| stat_of(*pid).is_some_and(|(ppid, state)| ppid == parent && state != 'Z'))
        .collect()
}

/// A process that exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    stat_of(pid).is_some_and(|(_, state)| state != 'Z')
}

/// (parent PID, state letter) of `pid`.
fn stat_of(pid: u32) -> Option<(u32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_parent_from_proc() {
        let me = std::process::id();
        assert!(is_alive(me));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        assert!(child_pids(me).contains(&child.id()));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!child_pids(me).contains(&child.id()));
    }
}
