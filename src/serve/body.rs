//! Reading a JSON body: a clear 400 for bad JSON or unknown fields (naming where), a
//! 413 for a body over the limit.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body of type `T` (whose unknown fields are refused when `T` says so).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e: BytesRejection| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::TooLarge("the body is over the server's limit (--max-body)".into())
                } else {
                    ApiError::bad("bad_body", e.body_text())
                }
            })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let code = if inner.is_syntax() || inner.is_eof() {
                "bad_json"
            } else {
                "bad_request"
            };
            let at = if path == "." {
                String::new()
            } else {
                format!(" at `{path}`")
            };
            ApiError::bad(code, format!("the body{at}: {inner}"))
        })?;
        // Nothing but white space after the value.
        de.end()
            .map_err(|e| ApiError::bad("bad_json", format!("the body: {e}")))?;
        Ok(JsonBody(value))
    }
}
