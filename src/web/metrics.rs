//! `GET /metrics`: the Prometheus text exposition of [`crate::metrics`], with the runs by mode
//! and status read from the store at scrape time.
//!
//! A scraper on the same machine needs no account: a request from a loopback address answers
//! without a token, unless it came through a proxy (it carries `Forwarded`, `X-Forwarded-For`
//! or `X-Real-IP`), since a reverse proxy on the same host makes every client look local.
//! Everyone else must be an admin, by Bearer token or session cookie (401 without one, 403 for
//! a user who is not an admin). The output names no user, run or question.

use std::net::IpAddr;

use actix_web::{web, FromRequest, HttpRequest, HttpResponse};

use super::auth::Caller;
use super::error::ApiError;
use super::AppState;
use crate::metrics;

/// Headers a proxy adds: with any of them the peer address is the proxy's, not the client's.
const PROXY_HEADERS: [&str; 3] = ["forwarded", "x-forwarded-for", "x-real-ip"];

/// Whether `ip` is this machine (`127.0.0.0/8`, `::1`, or `::ffff:127.x.x.x`).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether the request comes straight from this machine (no proxy in between).
fn from_this_machine(req: &HttpRequest) -> bool {
    let proxied = PROXY_HEADERS.iter().any(|h| req.headers().contains_key(*h));
    !proxied && req.peer_addr().is_some_and(|a| is_loopback(a.ip()))
}

/// `GET /metrics`.
pub async fn scrape(
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    if !from_this_machine(&req) {
        let caller = Caller::extract(&req).await.map_err(|e| match e {
            ApiError::Unauthorized(_) => ApiError::Unauthorized(
                "/metrics answers without a token only to requests from this machine; send an \
                 admin's token as `Authorization: Bearer <token>`"
                    .into(),
            ),
            other => other,
        })?;
        if !caller.user.is_admin {
            return Err(ApiError::Forbidden("/metrics is for admins".into()));
        }
    }
    let runs = state.engine.store().count_runs().await?;
    Ok(HttpResponse::Ok().content_type(metrics::CONTENT_TYPE).body(metrics::global().render(&runs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_counts_as_loopback() {
        for ip in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "192.168.1.2", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1"] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_proxied_request_is_not_from_this_machine() {
        let local = "127.0.0.1:5000".parse().unwrap();
        let req = actix_web::test::TestRequest::default().peer_addr(local).to_http_request();
        assert!(from_this_machine(&req));
        for h in PROXY_HEADERS {
            let req = actix_web::test::TestRequest::default()
                .peer_addr(local)
                .insert_header((h, "203.0.113.7"))
                .to_http_request();
            assert!(!from_this_machine(&req), "{h}");
        }
        let remote = "203.0.113.7:5000".parse().unwrap();
        let req = actix_web::test::TestRequest::default().peer_addr(remote).to_http_request();
        assert!(!from_this_machine(&req));
        assert!(!from_this_machine(&actix_web::test::TestRequest::default().to_http_request()));
    }
}
