//! The `models` map: the model endpoints a document's agents call (brief 10.1).

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One model endpoint, spoken to with the OpenAI-compatible Chat Completions API
/// (`POST {base_url}/chat/completions`).
///
/// ```
/// use pactgraph::contracts::{ModelSpec, Price};
/// let m = ModelSpec::new("http://127.0.0.1:11434/v1", "qwen2.5:7b-instruct")
///     .param("temperature", serde_json::json!(0))
///     .price(Price { input_per_mtok: 0.15, output_per_mtok: 0.60 });
/// assert_eq!(m.api_key_env(), "OPENAI_API_KEY");
/// assert_eq!(m.timeout_ms(), 120_000);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The API's base URL (`…/v1`); may hold `${VAR}` or `${VAR:-default}`, expanded where
    /// the run executes.
    pub base_url: String,
    /// The model name sent in each request; may hold `${VAR}` or `${VAR:-default}`.
    pub model: String,
    /// The environment variable holding the API key (absent: `OPENAI_API_KEY`; unset or
    /// empty at call time: no `Authorization` header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra request body fields passed through (`temperature`, `max_tokens`, `seed`, ...).
    /// Keys the engine sets are a validator error here.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub params: IndexMap<String, Value>,
    /// USD per million tokens, for accounting (absent: tokens counted, no cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Bound on one HTTP request, in milliseconds (absent: 120 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How many times a failed request is retried (absent: 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Request a streamed reply (`stream: true` with usage included).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
}

/// Prices of a model in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// USD per million input (prompt) tokens.
    pub input_per_mtok: f64,
    /// USD per million output (completion) tokens.
    pub output_per_mtok: f64,
}

impl ModelSpec {
    /// The default request time limit, in milliseconds.
    pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
    /// The default number of retries.
    pub const DEFAULT_MAX_RETRIES: u32 = 4;
    /// The default environment variable holding the API key.
    pub const DEFAULT_API_KEY_ENV: &'static str = "OPENAI_API_KEY";
    /// Request body keys the engine sets itself, refused in `params`.
    pub const ENGINE_KEYS: &'static [&'static str] = &[
        "model",
        "messages",
        "tools",
        "tool_choice",
        "stream",
        "stream_options",
        "response_format",
    ];

    /// A model at `base_url` named `model`, every other setting at its default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            ..Self::default()
        }
    }
    /// The environment variable holding the API key (default
    /// [`Self::DEFAULT_API_KEY_ENV`]).
    pub fn api_key_env(&self) -> &str {
        self.api_key_env
            .as_deref()
            .unwrap_or(Self::DEFAULT_API_KEY_ENV)
    }
    /// Sets the environment variable holding the API key.
    pub fn key_env(mut self, var: impl Into<String>) -> Self {
        self.api_key_env = Some(var.into());
        self
    }
    /// Adds a request parameter passed through into the body.
    pub fn param(mut self, key: impl Into<String>, value: Value) -> Self {
        self.params.insert(key.into(), value);
        self
    }
    /// Sets the price.
    pub fn price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }
    /// Sets whether replies are streamed.
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }
    /// Sets the request time limit.
    pub fn with_timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
    /// Sets the number of retries.
    pub fn with_max_retries(mut self, n: u32) -> Self {
        self.max_retries = Some(n);
        self
    }
    /// The request time limit in effect (default [`Self::DEFAULT_TIMEOUT_MS`]).
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(Self::DEFAULT_TIMEOUT_MS)
    }
    /// The number of retries in effect (default [`Self::DEFAULT_MAX_RETRIES`]).
    pub fn max_retries(&self) -> u32 {
        self.max_retries.unwrap_or(Self::DEFAULT_MAX_RETRIES)
    }
}

impl Price {
    /// The cost in USD of `input` and `output` tokens.
    pub fn cost_usd(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_apply_and_round_trip() {
        let m: ModelSpec =
            serde_json::from_value(json!({"base_url": "http://h/v1", "model": "m"})).expect("ok");
        assert_eq!((m.timeout_ms(), m.max_retries()), (120_000, 4));
        assert_eq!(m.api_key_env(), "OPENAI_API_KEY");
        assert!(!m.stream);
        assert_eq!(
            serde_json::to_value(&m).expect("serializes"),
            json!({"base_url": "http://h/v1", "model": "m"})
        );
        let e = serde_json::from_value::<ModelSpec>(json!({"base_url": "u", "model": "m", "x": 1}))
            .expect_err("unknown field");
        assert!(e.to_string().contains("unknown field `x`"), "{e}");
        let p = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 2.0,
        };
        assert!((p.cost_usd(1_000_000, 500_000) - 2.0).abs() < 1e-12);
    }
}
