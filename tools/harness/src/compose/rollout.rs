//! A rolling restart under traffic: a new image for the edges and the
//! store (the current one with a label of the run's, so a new image id),
//! then each container replaced by one of it, one at a time, each healthy
//! before the next, as an operator rolls out a release.

use super::command::{docker, docker_fed};
use super::stack::{Stack, IMAGE_LABEL};
use std::time::Instant;

/// The services replaced, in order, and the image each runs.
pub const ORDER: [(&str, &str); 3] = [("edge-1", "edge"), ("edge-2", "edge"), ("store", "store")];

/// `$ANKUSA_IMAGE_REPO` and `$ANKUSA_IMAGE_TAG` as Compose reads them (its
/// defaults when unset).
fn repo_and_tag() -> (String, String) {
    let var = |name: &str, default: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    (
        var("ANKUSA_IMAGE_REPO", "ankusa"),
        var("ANKUSA_IMAGE_TAG", "dev"),
    )
}

/// Builds the new edge and store images (labelled for the stack, so they
/// are removed with it); their tag.
pub fn prepare(stack: &mut Stack) -> Result<String, String> {
    let (repo, tag) = repo_and_tag();
    // The current tag and the project: the run's own.
    let next = format!("{tag}-{}", stack.compose.project);
    for image in ["edge", "store"] {
        let new = format!("{repo}/{image}:{next}");
        let label = format!("{IMAGE_LABEL}={}", stack.compose.project);
        docker_fed(
            &["build", "-q", "--label", &label, "-t", &new, "-"],
            &format!("FROM {repo}/{image}:{tag}\n"),
        )?;
    }
    Ok(next)
}

/// Replaces each service of [`ORDER`] with a container of the `next` images:
/// the old one stopped (an edge's access log kept), a new one started by
/// `up -d --no-deps`, and waited for until healthy. A note per service.
pub fn roll(stack: &mut Stack, next: &str) -> Result<(), String> {
    for (service, _) in ORDER {
        let started = Instant::now();
        let old = stack.container(service)?;
        if service.starts_with("edge") {
            stack.retire_edge(&old)?;
        } else {
            docker(&["stop", &old])?;
        }
        stack.compose.run_with(
            &["up", "-d", "--no-deps", service],
            &[("ANKUSA_IMAGE_TAG", next)],
        )?;
        let new = stack.container(service)?;
        if new == old {
            return Err(format!("{service} was not replaced"));
        }
        stack.wait_healthy(std::slice::from_ref(&new))?;
        stack.account.notes.push(format!(
            "{service} replaced, healthy {:.1} s after it stopped",
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(())
}
