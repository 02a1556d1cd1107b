//! Where the store's logs and traces go: one `tracing` subscriber for both.
//!
//! Logs are `tracing` events on stderr, text by default or JSON lines
//! (`--log-format`), filtered by `RUST_LOG` (`ANKUSA_LOG` is read when
//! `RUST_LOG` is unset; `info` by default) with `tracing-subscriber`'s
//! `EnvFilter` syntax. Crates that log through `log` reach the same
//! subscriber through its `log` bridge.
//!
//! Traces: with an OTLP endpoint configured, each hit's span
//! ([`crate::spans::hit`]) is exported over OTLP/HTTP (protobuf) by a
//! batch processor on its own thread. The sampler follows the sender
//! (`parentbased_always_off`): a hit whose `traceparent` is sampled is
//! exported, one without is not, unless `OTEL_TRACES_SAMPLER` says
//! otherwise. With no endpoint there is no exporter, no OpenTelemetry layer
//! and no span work at all: the spans are `debug` level, disabled unless
//! the log filter asks for them.

use crate::config::{redact_url, Config, LogFormat};
use crate::spans;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The variables the log filter is read from, first set first.
pub const LOG_FILTER_VARS: [&str; 2] = ["RUST_LOG", "ANKUSA_LOG"];
/// The whole URL spans are posted to, when set (the OpenTelemetry variable).
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// The installed subscriber's exporter, flushed by [`Telemetry::shutdown`].
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

/// Installs the process's subscriber from `config` and the environment.
/// Refuses a log filter or an OTLP endpoint it can't use, naming where it
/// came from and its value.
pub fn install(config: &Config) -> Result<Telemetry, String> {
    let filter = log_filter(|name| std::env::var(name).ok())?;
    let logs = match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed(),
    }
    .with_filter(filter);
    let url = traces_url(
        config.otlp_endpoint.as_deref(),
        std::env::var(TRACES_ENDPOINT_VAR).ok().as_deref(),
    )?;
    let traces = url.as_deref().map(provider).transpose()?;
    // The OpenTelemetry layer sees hit spans and nothing else: no request
    // span, no log event, so nothing but a hit's own fields leaves the store.
    let otel = traces.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("ankusa-store"))
            .with_filter(filter_fn(|meta| {
                meta.is_span() && meta.target() == spans::TARGET && meta.name() == spans::HIT
            }))
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(otel)
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    if let Some(url) = &url {
        tracing::info!("exporting the spans of traced hits to {}", redact_url(url));
    }
    Ok(Telemetry { traces })
}

impl Telemetry {
    /// Exports the spans still waiting and stops the exporter.
    pub fn shutdown(self) {
        if let Some(traces) = self.traces {
            if let Err(e) = traces.shutdown() {
                tracing::warn!("flushing the last spans: {e}");
            }
        }
    }
}

/// The log filter: the first of [`LOG_FILTER_VARS`] set and not empty
/// (`get` reads a variable), else `info`.
pub fn log_filter(get: impl Fn(&str) -> Option<String>) -> Result<EnvFilter, String> {
    for var in LOG_FILTER_VARS {
        let Some(text) = get(var).filter(|t| !t.trim().is_empty()) else {
            continue;
        };
        return EnvFilter::builder().parse(&text).map_err(|e| {
            format!("{var}: {text:?} is not a log filter ({e}); e.g. info,ankusa_store=debug")
        });
    }
    Ok(EnvFilter::new("info"))
}

/// The URL spans are posted to: `traces` (the OpenTelemetry traces variable)
/// as it is, else `<endpoint>/v1/traces`; None: no traces. Only `http://`:
/// spans go to a collector beside the store, in clear.
pub fn traces_url(endpoint: Option<&str>, traces: Option<&str>) -> Result<Option<String>, String> {
    let (name, url) = match (traces.filter(|t| !t.is_empty()), endpoint) {
        (Some(url), _) => (TRACES_ENDPOINT_VAR, url.to_string()),
        (None, Some(base)) if !base.is_empty() => (
            "--otlp-endpoint",
            format!("{}/v1/traces", base.trim_end_matches('/')),
        ),
        _ => return Ok(None),
    };
    let rest = url.strip_prefix("http://").unwrap_or_default();
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!(
            "{name}: {:?} is not an http:// URL of an OTLP collector (http://host:4318)",
            redact_url(&url)
        ));
    }
    Ok(Some(url))
}

/// The tracer provider exporting to `url`.
fn provider(url: &str) -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .map_err(|e| format!("{:?}: cannot export spans there: {e}", redact_url(url)))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("ankusa-store");
    }
    let mut builder = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build());
    if std::env::var_os("OTEL_TRACES_SAMPLER").is_none() {
        builder = builder.with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOff)));
    }
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_wins_then_ankusa_log_then_info() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        use tracing_subscriber::filter::LevelFilter;
        let most = |f: EnvFilter| f.max_level_hint();
        assert_eq!(most(log_filter(env(&[])).unwrap()), Some(LevelFilter::INFO));
        let alias = env(&[("ANKUSA_LOG", "debug")]);
        assert_eq!(most(log_filter(alias).unwrap()), Some(LevelFilter::DEBUG));
        let both = env(&[
            ("RUST_LOG", "warn,ankusa_store=trace"),
            ("ANKUSA_LOG", "debug"),
        ]);
        assert_eq!(most(log_filter(both).unwrap()), Some(LevelFilter::TRACE));
        let err = log_filter(env(&[("RUST_LOG", "ankusa_store=loud")])).unwrap_err();
        assert!(
            err.starts_with("RUST_LOG: \"ankusa_store=loud\" is not a log filter"),
            "{err}"
        );
    }

    #[test]
    fn the_traces_url_is_the_base_plus_v1_traces_unless_given_whole() {
        assert_eq!(traces_url(None, None), Ok(None));
        assert_eq!(
            traces_url(Some("http://otel:4318/"), None),
            Ok(Some("http://otel:4318/v1/traces".into()))
        );
        assert_eq!(
            traces_url(Some("http://otel:4318"), Some("http://other:9/spans")),
            Ok(Some("http://other:9/spans".into()))
        );
        let err = traces_url(Some("https://otel:4318"), None).unwrap_err();
        assert!(
            err.starts_with("--otlp-endpoint: \"https://otel:4318/v1/traces\""),
            "{err}"
        );
        let err = traces_url(None, Some("otel:4318")).unwrap_err();
        assert!(
            err.starts_with("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "),
            "{err}"
        );
    }
}
