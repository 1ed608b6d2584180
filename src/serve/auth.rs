//! `--token-env`: the bearer token every `/api` request carries (compared in constant
//! time), or the session cookie `POST /api/session` trades it for.

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "pactgraph_session";
/// Sessions kept at once (the oldest is forgotten past this).
const MAX_SESSIONS: usize = 1_024;

/// The token and the sessions opened with it. Only digests are kept: comparing two
/// SHA-256 digests takes the same time whatever the token's length.
#[derive(Debug)]
pub struct Auth {
    token: [u8; 32],
    sessions: Mutex<VecDeque<[u8; 32]>>,
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl Auth {
    /// Requests must carry `token`.
    pub fn new(token: &str) -> Self {
        Self {
            token: digest(token.as_bytes()),
            sessions: Mutex::new(VecDeque::new()),
        }
    }

    /// True when `given` is the token (constant time).
    pub fn is_token(&self, given: &str) -> bool {
        bool::from(digest(given.as_bytes()).ct_eq(&self.token))
    }

    /// True when the request carries `Authorization: Bearer TOKEN` or a current session
    /// cookie.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get_all(AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|t| self.is_token(t.trim()));
        bearer || self.has_session(headers)
    }

    fn has_session(&self, headers: &HeaderMap) -> bool {
        let Ok(sessions) = self.sessions.lock() else {
            return false;
        };
        headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('='))
            .any(|value| {
                let d = digest(value.as_bytes());
                // Every session compared, none skipped early.
                sessions
                    .iter()
                    .fold(subtle::Choice::from(0), |found, s| found | s.ct_eq(&d))
                    .into()
            })
    }

    /// A new session: the cookie's value (256 bits from the system's random source, as
    /// hex), or `None` when that source fails. The oldest session is forgotten past a
    /// bound.
    pub fn open_session(&self) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let value: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        if let Ok(mut sessions) = self.sessions.lock() {
            if sessions.len() >= MAX_SESSIONS {
                sessions.pop_front();
            }
            sessions.push_back(digest(value.as_bytes()));
        }
        Some(value)
    }
}
