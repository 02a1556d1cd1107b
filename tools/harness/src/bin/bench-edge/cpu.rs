//! CPU time of a process, as `/proc` counts it.

/// Clock ticks per second, the unit of /proc's CPU times.
pub fn clock_tick() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU seconds `pid` (all its threads) has used so far; 0 if unreadable.
pub fn cpu_seconds(pid: u32, tick: f64) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: fields are counted after the last ')',
    // where field 3 (state) comes first, so utime (14) and stime (15) are 11 and 12.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / tick
}
