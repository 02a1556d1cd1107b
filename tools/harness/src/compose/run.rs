//! A run of rows across hosts, one after the other, each in a stack of its
//! own (`ankusa-cf-PID-ROW`): brought up, driven through its fault with the
//! loopback suite's drive, summed up with its figures, taken down. A
//! progress line at each step, then each row's table line and any promise
//! it broke.

use super::host_fault::HostFault;
use super::inject::{heal, inject, prepare};
use super::stack::{Setting, Stack};
use crate::faults::drive::{deliveries, drive};
use crate::faults::figures::figures;
use crate::faults::row::Row;
use crate::faults::target::Target;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Instant;

/// What a run of rows gave: each row's figures, and every failure (a
/// broken promise, or a row that could not run) in words.
#[derive(Default)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub failures: Vec<String>,
}

/// Prints `text` after the time since `started`.
fn say(started: Instant, text: &str) {
    eprintln!(
        "[compose-faults {:>4}s] {text}",
        started.elapsed().as_secs()
    );
}

/// Runs `faults` in order, writing each row as JSON into `out` when given.
pub fn run_rows(setting: &Setting, faults: &[HostFault], out: Option<&Path>, seed: u64) -> Outcome {
    let started = Instant::now();
    let mut outcome = Outcome::default();
    for (i, fault) in faults.iter().enumerate() {
        let name = fault.name();
        let ran = catch_unwind(AssertUnwindSafe(|| {
            run_row(setting, *fault, seed + i as u64, started)
        }))
        .unwrap_or_else(|panic| {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {why}"))
        });
        let row = match ran {
            Ok(row) => row,
            Err(e) => {
                say(started, &format!("{name}: FAILED to run: {e}"));
                outcome.failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if let Some(dir) = out {
            if let Err(e) = row.save(dir) {
                outcome.failures.push(e);
            }
        }
        println!("{}", row.markdown());
        match row.broken_promise() {
            Some(broken) => {
                say(started, &format!("{name}: BROKEN: {broken}"));
                eprintln!("{}", serde_json::to_string_pretty(&row).unwrap_or_default());
                outcome.failures.push(broken);
            }
            None => say(started, &format!("{name}: held")),
        }
        outcome.rows.push(row);
    }
    outcome
}

/// One row: its stack up, traffic through the fault and the heal, the
/// figures, the stack down (also when anything on the way fails).
fn run_row(
    setting: &Setting,
    fault: HostFault,
    seed: u64,
    started: Instant,
) -> Result<Row, String> {
    let name = fault.name();
    let project = format!("ankusa-cf-{}-{name}", std::process::id());
    say(started, &format!("{name}: up {project}"));
    let mut stack = Stack::up(setting, &project, &fault.shape())?;
    let broken = RefCell::new(prepare(fault, &mut stack)?);
    let plan = fault.plan();
    say(
        started,
        &format!(
            "{name}: {} events at {}/s, the fault from {:.1} s, healed at {:.1} s or once in place",
            plan.events,
            plan.rate,
            plan.fault_at.as_secs_f64(),
            plan.heal_at.as_secs_f64()
        ),
    );
    let options = deliveries(stack.edge_urls(), &plan, seed, &stack.secret);
    let (mut injected, mut healed) = (Ok(()), Ok(()));
    let run = drive(
        &mut stack,
        &plan,
        options,
        |_| {},
        |stack| injected = inject(fault, stack, &mut broken.borrow_mut()),
        |stack| healed = heal(fault, stack, &broken.borrow()),
    );
    injected.map_err(|e| format!("the fault: {e}"))?;
    healed.map_err(|e| format!("the heal: {e}"))?;
    say(started, &format!("{name}: traffic done, figures"));
    let row = figures(&fault, &plan, &mut stack, &run);
    say(started, &format!("{name}: down"));
    drop(stack);
    Ok(row)
}
