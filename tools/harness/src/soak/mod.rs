//! The soak: three edges on a three-master Redis Cluster with replicas, the
//! mock provider at 80 % of its tenant's quota with redeliveries and
//! forgeries, a metered tenant pushed past its quota, and a seeded random
//! schedule of faults from the fault table, one at a time; then the checks.
//!
//! - [`schedule`]: which faults are drawn (and which left out, why), when.
//! - [`samples`]: every process's resident memory, every few seconds.
//! - [`windows`]: the metered tenant's admissions per 10 s window.
//! - [`checker`]: the verdict: each check's figure against its bound.
//! - [`run`]: the run itself: fleet, traffic, faults, progress, evidence.
//! - [`report`]: the run as JSON and as a summary.

pub mod checker;
pub mod report;
pub mod run;
pub mod samples;
pub mod schedule;
pub mod windows;
