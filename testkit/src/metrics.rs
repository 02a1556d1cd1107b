//! A series' value in Prometheus text: an edge's `/stats/prometheus`, the
//! store's `/metrics`.

/// The value of `name_with_labels` (as printed, spaces aside:
/// `ankusa_admissions_total{outcome="admitted"}`) in Prometheus text; a
/// name given without labels also matches an empty label set (`name{}`).
pub fn find_metric(text: &str, name_with_labels: &str) -> Option<f64> {
    let wanted = without_spaces(name_with_labels);
    let bare = (!wanted.contains('{')).then(|| format!("{wanted}{{}}"));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let series = without_spaces(series);
            let matches = series == wanted || bare.as_ref().is_some_and(|b| series == *b);
            if matches {
                value.trim().parse().ok()
            } else {
                None
            }
        })
}

/// [`find_metric`], 0 when absent.
pub fn metric_value(text: &str, name_with_labels: &str) -> f64 {
    find_metric(text, name_with_labels).unwrap_or(0.0)
}

fn without_spaces(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_labelled_and_bare_metrics() {
        let text = "# TYPE a counter\na{outcome=\"admitted\"} 5\nb{} 2\nc 3.5\n";
        assert_eq!(find_metric(text, "a{outcome=\"admitted\"}"), Some(5.0));
        assert_eq!(find_metric(text, "b"), Some(2.0));
        assert_eq!(find_metric(text, "c"), Some(3.5));
        assert_eq!(find_metric(text, "a"), None);
    }

    #[test]
    fn reads_a_series_by_name_and_labels() {
        let text = "# HELP x\nankusa_store_redis_up 1\nankusa_store_requests_total{endpoint=\"hit\",result=\"ok\"} 42\n";
        assert_eq!(metric_value(text, "ankusa_store_redis_up"), 1.0);
        assert_eq!(
            metric_value(
                text,
                "ankusa_store_requests_total{endpoint=\"hit\", result=\"ok\"}"
            ),
            42.0
        );
        assert_eq!(
            metric_value(
                text,
                "ankusa_store_requests_total{endpoint=\"hit\",result=\"pending\"}"
            ),
            0.0
        );
    }
}
