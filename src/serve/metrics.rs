//! `/metrics`: Prometheus text (prometheus-client). Runs by status are read from the
//! store when scraped (at most every few seconds); steps, their durations, model tokens
//! and cost are counted from the runs this process drives (its `--workers` and the runs
//! resumed through the API).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::error::ApiError;
use crate::runtime::RunState;
use crate::store::{DynStore, RunFilter, StoredStatus};

/// How long a count of runs by status is served before the store is read again.
const RUNS_REFRESH: Duration = Duration::from_secs(5);

/// The `status` label of `pactgraph_runs`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// The `direction` label of `pactgraph_model_tokens_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabel {
    direction: String,
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Family<StatusLabel, Gauge>,
    steps: Counter,
    step_seconds: Histogram,
    tokens: Family<DirectionLabel, Counter>,
    cost: Counter<f64, AtomicU64>,
    runs_read: Mutex<Option<Instant>>,
    feeds: Gauge,
    streams: Gauge,
    /// Event streams that fell behind their feed's ring (read the store again).
    pub lags: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric registered, at zero.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let runs = Family::<StatusLabel, Gauge>::default();
        let steps = Counter::default();
        // 1 ms to ~65 s.
        let step_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        let tokens = Family::<DirectionLabel, Counter>::default();
        let cost = Counter::<f64, AtomicU64>::default();
        registry.register(
            "pactgraph_runs",
            "Runs in the store by status (unexpired)",
            runs.clone(),
        );
        let feeds = Gauge::default();
        let streams = Gauge::default();
        let lags = Counter::default();
        registry.register(
            "pactgraph_event_stream_lags",
            "Times an event stream fell behind its run's shared feed and read the store again",
            lags.clone(),
        );
        registry.register(
            "pactgraph_event_feeds",
            "Runs whose events this server follows now (one store follower each)",
            feeds.clone(),
        );
        registry.register(
            "pactgraph_event_streams",
            "Event streams (SSE) open now, sharing those followers",
            streams.clone(),
        );
        registry.register(
            "pactgraph_steps",
            "Steps committed by the runs this server drove",
            steps.clone(),
        );
        registry.register(
            "pactgraph_step_duration_seconds",
            "How long each step of the runs this server drove took",
            step_seconds.clone(),
        );
        registry.register(
            "pactgraph_model_tokens",
            "Model tokens reported by the steps this server drove (input, output)",
            tokens.clone(),
        );
        registry.register(
            "pactgraph_model_cost_usd",
            "Model cost in USD reported by the steps this server drove",
            cost.clone(),
        );
        for s in StoredStatus::ALL {
            drop(runs.get_or_create(&StatusLabel {
                status: s.as_str().into(),
            }));
        }
        for d in ["input", "output"] {
            drop(tokens.get_or_create(&DirectionLabel {
                direction: d.into(),
            }));
        }
        Self {
            registry,
            runs,
            steps,
            step_seconds,
            tokens,
            cost,
            runs_read: Mutex::new(None),
            feeds,
            streams,
            lags,
        }
    }

    /// Counts what run `run` did since `since_ms` (a drive by this process started
    /// then): its steps, their durations, tokens and cost, from its trace.
    pub fn observe_run(&self, run: &RunState, since_ms: u64) {
        // A step's duration: its longest item (a fork's members run side by side).
        let mut steps: BTreeMap<u32, u64> = BTreeMap::new();
        // Items numbered past the steps taken are the run's closing decision, not a step.
        let taken = run.steps();
        for item in run
            .trace()
            .items
            .iter()
            .filter(|i| i.at_ms >= since_ms && i.step < taken)
        {
            let longest = steps.entry(item.step).or_default();
            *longest = (*longest).max(item.duration_us);
            let Some(usage) = item.detail.as_ref().and_then(|d| d.usage.as_ref()) else {
                continue;
            };
            let usage = serde_json::to_value(usage).unwrap_or_default();
            for (key, direction) in [("input_tokens", "input"), ("output_tokens", "output")] {
                if let Some(n) = usage.get(key).and_then(serde_json::Value::as_u64) {
                    self.tokens
                        .get_or_create(&DirectionLabel {
                            direction: direction.into(),
                        })
                        .inc_by(n);
                }
            }
            if let Some(c) = usage.get("cost_usd").and_then(serde_json::Value::as_f64)
                && c.is_finite()
                && c > 0.0
            {
                self.cost.inc_by(c);
            }
        }
        for us in steps.values() {
            self.steps.inc();
            // Microseconds to seconds: exact enough for a histogram.
            #[allow(clippy::cast_precision_loss)]
            self.step_seconds.observe(*us as f64 / 1e6);
        }
    }

    /// The text exposition, the runs by status read from `store` first when the last
    /// read is older than a few seconds.
    pub async fn render(
        &self,
        store: &dyn DynStore,
        (feeds, streams): (usize, usize),
    ) -> Result<String, ApiError> {
        self.feeds.set(i64::try_from(feeds).unwrap_or(i64::MAX));
        self.streams.set(i64::try_from(streams).unwrap_or(i64::MAX));
        let due = self
            .runs_read
            .lock()
            .map(|last| last.is_none_or(|t| t.elapsed() >= RUNS_REFRESH))
            .unwrap_or(true);
        if due {
            let all = RunFilter::default();
            let runs = store.list(&all).await?;
            let mut counts: BTreeMap<&'static str, i64> =
                StoredStatus::ALL.iter().map(|s| (s.as_str(), 0)).collect();
            for info in &runs {
                *counts.entry(info.status.as_str()).or_default() += 1;
            }
            for (status, n) in counts {
                self.runs
                    .get_or_create(&StatusLabel {
                        status: status.into(),
                    })
                    .set(n);
            }
            if let Ok(mut last) = self.runs_read.lock() {
                *last = Some(Instant::now());
            }
        }
        let mut text = String::new();
        encode(&mut text, &self.registry)
            .map_err(|e| ApiError::Internal(format!("cannot encode the metrics: {e}")))?;
        Ok(text)
    }
}
