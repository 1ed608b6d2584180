//! When to try a model call again (brief 10.5): exponential backoff with full jitter, and
//! the server's `Retry-After` / `retry-after-ms`.

use std::time::{Duration, SystemTime};

/// The first backoff bound.
pub const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// The largest backoff bound.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest wait a server's `Retry-After` is obeyed for (a larger value is cut to it).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The backoff before retry number `retry` (0 for the first retry): a uniformly random
/// duration in `[0, min(30 s, 0.5 s * 2^retry)]` ("full jitter").
pub fn backoff(retry: u32) -> Duration {
    let bound = BASE_BACKOFF
        .checked_mul(1u32.checked_shl(retry.min(16)).unwrap_or(u32::MAX))
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF);
    let ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(fastrand::u64(0..=ms))
}

/// The wait a server asked for: `retry-after-ms` (milliseconds), else `Retry-After`
/// (seconds, or an HTTP date), at most [`MAX_RETRY_AFTER`]. `None` when neither is there or
/// readable.
pub fn server_wait(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let wait = if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok()) {
        secs(ms / 1000.0)
    } else {
        let t = text("retry-after")?;
        match t.parse::<f64>() {
            Ok(s) => secs(s),
            Err(_) => {
                let at = httpdate::parse_http_date(t).ok()?;
                Some(at.duration_since(now).unwrap_or(Duration::ZERO))
            }
        }
    }?;
    Some(wait.min(MAX_RETRY_AFTER))
}

fn secs(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0)
        .then(|| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn backoff_is_bounded_and_doubles() {
        for retry in 0..40 {
            let bound = (500u64 << retry.min(16)).min(30_000);
            for _ in 0..50 {
                assert!(backoff(retry).as_millis() as u64 <= bound);
            }
        }
    }

    #[test]
    fn retry_after_in_its_three_forms() {
        let now = SystemTime::now();
        let mut h = HeaderMap::new();
        assert_eq!(server_wait(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(server_wait(&h, now), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(server_wait(&h, now), Some(Duration::from_millis(150)));
        let mut h = HeaderMap::new();
        let later = httpdate::fmt_http_date(now + Duration::from_secs(5));
        h.insert(
            "retry-after",
            HeaderValue::from_str(&later).expect("header"),
        );
        let w = server_wait(&h, now).expect("a date");
        assert!(
            w <= Duration::from_secs(5) && w >= Duration::from_secs(4),
            "{w:?}"
        );
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(server_wait(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("99999999"));
        assert_eq!(server_wait(&h, now), Some(MAX_RETRY_AFTER));
    }
}
