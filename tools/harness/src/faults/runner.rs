//! One row of the fault suite on loopback: start the fleet, drive the
//! traffic through it while the fault is injected and healed, then sum up
//! the figures.

use super::drive::{deliveries, drive};
use super::figures::figures;
use super::fleet::{row_config, FaultFleet};
use super::inject::{flap_intake, heal, inject};
use super::plan::Plan;
use super::row::Row;
use super::scenario::Fault;
use super::target::Target;
use crate::provider::profile::DEFAULT_SECRET;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Runs `fault` as one row and returns its figures. Panics only when the
/// fleet can't start or the audit can't read the intake.
pub fn run_row(fault: Fault, plan: &Plan, seed: u64) -> Row {
    run_row_with(fault, plan, seed, |_| {})
}

/// [`run_row`], with `tweak` applied to the fleet before traffic starts
/// (the suite's own check that the audit catches a loss uses it).
pub fn run_row_with(
    fault: Fault,
    plan: &Plan,
    seed: u64,
    tweak: impl FnOnce(&mut FaultFleet),
) -> Row {
    let mut fleet = FaultFleet::start(&row_config(fault), fault);
    tweak(&mut fleet);
    let options = deliveries(fleet.edge_urls(), plan, seed, DEFAULT_SECRET);
    let flap = AtomicBool::new(false);
    let proxy = fleet.intake_proxy.clone();
    let run = drive(
        &mut fleet,
        plan,
        options,
        |done| flap_intake(&proxy, done, &flap),
        |fleet| inject(fault, fleet, &flap),
        |fleet| heal(fault, fleet, &flap),
    );
    let row = figures(&fault, plan, &mut fleet, &run);
    for edge in &mut fleet.edges {
        let _ = edge.proc.stop(Duration::from_secs(5));
    }
    row
}
