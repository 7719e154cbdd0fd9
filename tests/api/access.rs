//! Accounts and access: who may see and stop what, over REST, SSE and the WebSocket; signing in
//! with a token, a session cookie or the one-time link; what an anonymous client gets.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

fn slow_council(question: &str, visibility: &str) -> Value {
    json!({ "question": question, "councilModels": ["sim/alpha", "sim/beta"],
            "chairmanModel": "sim/alpha", "visibility": visibility })
}

async fn status_of(client: &reqwest::Client, method: &str, url: String) -> u16 {
    let req = match method {
        "POST" => client.post(url).json(&json!({})),
        _ => client.get(url),
    };
    req.send().await.expect("request").status().as_u16()
}

#[actix_web::test]
async fn each_pair_of_roles_sees_and_stops_what_it_may() {
    let app = spawn_with(Options { sim_latency_ms: 1500, ..Options::default() }).await;
    let alice = client_with(&app.user("alice", false).await);
    let bob = client_with(&app.user("bob", false).await);
    let admin = &app.http;
    let base = &app.base;

    let start = |client: &reqwest::Client, body: Value| {
        let req = client.post(format!("{base}/api/deliberations")).json(&body);
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 202);
            r.json::<Value>().await.unwrap()
        }
    };
    let private = start(&alice, slow_council("alice's secret", "private")).await;
    let team = start(&alice, slow_council("alice's team question", "team")).await;
    let (p, t) = (private["runId"].as_str().unwrap(), team["runId"].as_str().unwrap());

    // Reading: the owner and admins see a private run; another user gets 404, not 403.
    for (who, client, code) in [("alice", &alice, 200), ("admin", admin, 200), ("bob", &bob, 404)] {
        for path in [
            format!("{base}/api/deliberations/{p}"),
            format!("{base}/api/conversations/{}", private["conversationId"].as_str().unwrap()),
            format!("{base}/api/deliberations/{p}/events?since=999999"),
        ] {
            assert_eq!(status_of(client, "GET", path.clone()).await, code, "{who} GET {path}");
        }
        assert_eq!(status_of(client, "GET", format!("{base}/api/deliberations/{t}")).await, 200);
    }
    let (_, detail) = app.get(&format!("/api/deliberations/{p}")).await;
    assert_eq!(detail["owner"], "alice");
    assert_eq!(detail["visibility"], "private");

    // Lists: bob sees alice's team run and not her private one, live and recent alike.
    let list: Value =
        bob.get(format!("{base}/api/deliberations")).send().await.unwrap().json().await.unwrap();
    let ids = |key: &str| -> Vec<String> {
        list[key].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().into()).collect()
    };
    assert!(ids("live").contains(&t.to_string()) && !ids("live").contains(&p.to_string()));
    assert!(ids("recent").contains(&t.to_string()) && !ids("recent").contains(&p.to_string()));
    let convs: Value =
        bob.get(format!("{base}/api/conversations")).send().await.unwrap().json().await.unwrap();
    assert_eq!(convs["conversations"].as_array().unwrap().len(), 1);
    let (_, all) = app.get("/api/conversations").await;
    assert_eq!(all["conversations"].as_array().unwrap().len(), 2, "an admin sees both");

    // A follow-up in someone else's conversation is refused.
    let r = bob
        .post(format!("{base}/api/deliberations"))
        .json(&json!({ "question": "me too?", "conversationId": team["conversationId"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Cancelling: bob may see the team run but not stop it; the private one does not exist
    // for him; its owner and an admin may stop them.
    assert_eq!(status_of(&bob, "POST", format!("{base}/api/deliberations/{t}/cancel")).await, 403);
    assert_eq!(status_of(&bob, "POST", format!("{base}/api/deliberations/{p}/cancel")).await, 404);
    assert_eq!(
        status_of(&alice, "POST", format!("{base}/api/deliberations/{p}/cancel")).await,
        202
    );
    assert_eq!(status_of(admin, "POST", format!("{base}/api/deliberations/{t}/cancel")).await, 202);

    // A bad visibility names its field.
    let r = alice
        .post(format!("{base}/api/deliberations"))
        .json(&slow_council("q", "public"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["field"], "visibility");
    app.stop().await;
}

#[actix_web::test]
async fn websocket_watchers_and_dashboards_see_only_what_they_may() {
    let app = spawn_with(Options { sim_latency_ms: 3000, ..Options::default() }).await;
    let alice_token = app.user("alice", false).await;
    let bob_token = app.user("bob", false).await;
    let mut bob = app.ws_as(&bob_token).await;
    bob.send(json!({ "type": "dashboard" })).await;
    let (snapshot, _) = bob.until("dashboard", None).await;
    assert_eq!(snapshot["runs"], json!([]));

    let mut alice = app.ws_as(&alice_token).await;
    alice
        .send(json!({ "type": "start", "id": 1, "request": slow_council("secret", "private") }))
        .await;
    let (started, _) = alice.until("started", None).await;
    let private = started["runId"].as_str().unwrap().to_string();
    alice.send(json!({ "type": "start", "id": 2, "request": slow_council("open", "team") })).await;
    let (started, _) = alice.until("started", None).await;
    let team = started["runId"].as_str().unwrap().to_string();

    // Watching and cancelling over the socket follow the same rules. (Everything bob's
    // socket gets is kept: his dashboard is checked below.)
    bob.send(json!({ "type": "watch", "id": 3, "run": private })).await;
    let (err, mut to_bob) = bob.until("error", None).await;
    assert!(err["message"].as_str().unwrap().contains("not found"), "{err}");
    bob.send(json!({ "type": "cancel", "id": 4, "run": team })).await;
    let (err, skipped) = bob.until("error", None).await;
    to_bob.extend(skipped);
    assert!(err["message"].as_str().unwrap().contains("owner"), "{err}");
    alice.send(json!({ "type": "cancel", "id": 5, "run": private })).await;
    let (res, _) = alice.until("cancel_result", None).await;
    assert_eq!(res["cancelled"], true);

    // Bob's dashboard hears of the team run only. Read up to the team run's end, not for a
    // while: the private run ended first (alice saw its end, and the Hub had its `RunEnded`
    // before that), so every update of it (its start, its calls, its end) went out to the
    // dashboards before the team run's end did.
    let ended = alice.events_until_end(&private).await;
    assert_eq!(ended.last().unwrap()["event"], "cancelled");
    alice.send(json!({ "type": "cancel", "id": 6, "run": team })).await;
    loop {
        let m = bob.next().await;
        let team_ended = m["type"] == "dashboard_update"
            && m["run"]["id"] == team.as_str()
            && m["run"]["status"] == "cancelled";
        to_bob.push(m);
        if team_ended {
            break;
        }
    }
    let updates: Vec<&Value> = to_bob.iter().filter(|m| m["type"] == "dashboard_update").collect();
    assert!(updates.iter().all(|m| m["run"]["owner"] == "alice"), "{updates:?}");
    assert!(
        updates.iter().all(|m| m["run"]["id"] != private.as_str()),
        "a private run reached another user's dashboard"
    );
    app.stop().await;
}

#[actix_web::test]
async fn anonymous_clients_are_told_to_sign_in_and_may_sign_in_on_the_socket() {
    let app = spawn_app().await;
    let anonymous = reqwest::Client::new();
    for path in ["/api/deliberations", "/api/conversations", "/api/models", "/api/me"] {
        let r = anonymous.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        assert!(r.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains("sign in"));
    }
    let r = anonymous
        .post(format!("{}/api/deliberations", app.base))
        .json(&json!({ "question": "q" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // The page and the health check need no account.
    assert_eq!(anonymous.get(format!("{}/", app.base)).send().await.unwrap().status(), 200);
    assert_eq!(anonymous.get(format!("{}/healthz", app.base)).send().await.unwrap().status(), 200);

    // A socket without credentials must sign in with its first message.
    let mut ws = app.ws_anonymous().await;
    ws.send(json!({ "type": "dashboard" })).await;
    let (err, _) = ws.until("error", None).await;
    assert_eq!(err["code"], "unauthorized");
    ws.send(json!({ "type": "auth", "id": 1, "token": app.token })).await;
    let (ok, _) = ws.until("authenticated", None).await;
    assert_eq!(ok["name"], "tester");
    ws.send(json!({ "type": "dashboard" })).await;
    ws.until("dashboard", None).await;
    // A wrong token closes the socket.
    let mut ws = app.ws_anonymous().await;
    ws.send(json!({ "type": "auth", "token": "cnv_nope" })).await;
    let (err, _) = ws.until("error", None).await;
    assert!(err["message"].as_str().unwrap().contains("not valid"));
    // The server closes it: the stream ends (pings stop too).
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        while ws.next_within(Duration::from_secs(3)).await.is_some() {}
    })
    .await;
    assert!(closed.is_ok(), "the socket was closed");

    // Another site's page may not open a socket with this browser's cookie.
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = app.ws_url.as_str().into_client_request().unwrap();
    req.headers_mut().insert("Origin", "http://evil.example".parse().unwrap());
    req.headers_mut().insert("Authorization", format!("Bearer {}", app.token).parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_err(), "cross-origin refused");
    let mut req = app.ws_url.as_str().into_client_request().unwrap();
    req.headers_mut().insert("Origin", app.base.parse().unwrap());
    req.headers_mut().insert("Authorization", format!("Bearer {}", app.token).parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_ok(), "same origin accepted");
    app.stop().await;
}

#[actix_web::test]
async fn sign_in_link_and_session_cookie_and_revocation() {
    let app = spawn_app().await;
    // The first-start bootstrap: an admin and a one-time link, once.
    let dir = tempfile::tempdir().unwrap();
    let fresh =
        conclave::store::Store::start(&format!("sqlite://{}", dir.path().join("f.db").display()))
            .unwrap();
    let link = conclave::web::auth::bootstrap_admin(&fresh).await.unwrap().expect("a link");
    assert!(link.starts_with("/login?token=cnv_"));
    assert_eq!(conclave::web::auth::bootstrap_admin(&fresh).await.unwrap(), None);
    let users = fresh.list_users().await.unwrap();
    assert_eq!((users.len(), users[0].name.as_str(), users[0].is_admin), (1, "admin", true));

    // A login link for tester on this server: it sets an HttpOnly cookie and redirects.
    let token = conclave::web::auth::new_token();
    let store = conclave::store::Store::start(&app.database_url).unwrap();
    store
        .add_token(
            "tester",
            conclave::web::auth::hash_token(&token),
            conclave::store::TokenKind::Login,
            None,
        )
        .await
        .unwrap();
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = browser.get(format!("{}/login?token={token}", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let me: Value =
        browser.get(format!("{}/api/me", app.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(me, json!({ "name": "tester", "isAdmin": true }));
    // The link works once.
    let again = reqwest::Client::new();
    let r = again.get(format!("{}/login?token={token}", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 401);

    // An API token pasted into the page becomes a session; signing out ends it.
    let bob = app.user("bob", false).await;
    let page = reqwest::Client::builder().cookie_store(true).build().unwrap();
    let r = page
        .post(format!("{}/api/session", app.base))
        .json(&json!({ "token": bob }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(status_of(&page, "GET", format!("{}/api/me", app.base)).await, 200);
    let r = page.delete(format!("{}/api/session", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(status_of(&page, "GET", format!("{}/api/me", app.base)).await, 401);
    let r = page
        .post(format!("{}/api/session", app.base))
        .json(&json!({ "token": "cnv_wrong" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Revoking a user stops its tokens at once.
    let carol = app.user("carol", false).await;
    let as_carol = client_with(&carol);
    assert_eq!(status_of(&as_carol, "GET", format!("{}/api/me", app.base)).await, 200);
    assert!(store.revoke_user("carol").await.unwrap());
    assert_eq!(status_of(&as_carol, "GET", format!("{}/api/me", app.base)).await, 401);
    app.stop().await;
}

#[actix_web::test]
async fn a_user_over_a_limit_gets_429_with_when_to_retry() {
    let app = limited_app(2, 3, 2000).await;
    let alice = client_with(&app.user("alice", false).await);
    let start = |client: &reqwest::Client| {
        client
            .post(format!("{}/api/deliberations", app.base))
            .json(&json!({ "question": "Why is the sky blue?" }))
            .send()
    };
    assert_eq!(start(&alice).await.unwrap().status(), 202);
    assert_eq!(start(&alice).await.unwrap().status(), 202);
    // A third at once is over the concurrent limit.
    let r = start(&alice).await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers()["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("running"), "{body}");
    assert!(body["retryAfterSeconds"].as_u64().unwrap() >= 1);
    // Others are not affected by alice's limit.
    assert_eq!(start(&app.http).await.unwrap().status(), 202);
    // Over the WebSocket the same refusal carries retryAfterSeconds.
    let token = app.user("bob", false).await;
    let bob = client_with(&token);
    for _ in 0..2 {
        assert_eq!(start(&bob).await.unwrap().status(), 202);
    }
    let mut ws = app.ws_as(&token).await;
    ws.send(json!({ "type": "start", "id": 9, "request": { "question": "One more?" } })).await;
    let (err, _) = ws.until("error", None).await;
    assert_eq!(err["id"], 9);
    assert!(err["retryAfterSeconds"].as_u64().unwrap() >= 1, "{err}");
    app.stop().await;
}

/// An app whose users may have `concurrent_runs` running and start `starts_per_minute`, on sim
/// models whose calls take `sim_latency_ms`.
async fn limited_app(
    concurrent_runs: usize,
    starts_per_minute: usize,
    sim_latency_ms: u64,
) -> TestApp {
    let user_limits = conclave::engine::limits::UserLimits { concurrent_runs, starts_per_minute };
    spawn_with(Options { sim_latency_ms, user_limits, ..Options::default() }).await
}

/// Statuses of `n` starts by `client`, all sent at once.
async fn starts_at_once(
    app: &TestApp,
    client: &reqwest::Client,
    body: Value,
    n: usize,
) -> Vec<u16> {
    let url = format!("{}/api/deliberations", app.base);
    let sends = (0..n).map(|_| client.post(&url).json(&body).send());
    futures_util::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect()
}

/// 30 starts at once by one user whose limit is 8 running: the count of their runs and the
/// new run's registration are one step, so exactly 8 are accepted (all 30 were, when the count
/// was taken before an awaited write). The runs' calls take a minute: none ends meanwhile.
#[actix_web::test]
async fn a_burst_of_starts_is_held_to_the_concurrent_limit() {
    let app = limited_app(8, 1000, 60_000).await;
    let alice = client_with(&app.user("alice", false).await);
    let statuses = starts_at_once(&app, &alice, council_request("At once?"), 30).await;
    let count = |s: u16| statuses.iter().filter(|&&x| x == s).count();
    assert_eq!((count(202), count(429)), (8, 22), "{statuses:?}");
    app.stop().await;
}

/// Starts refused as bad requests use none of the per-minute budget: after 30 refused (an
/// unknown model), with a budget of 30, a good start is accepted.
#[actix_web::test]
async fn refused_starts_use_none_of_the_start_budget() {
    let app = limited_app(8, 30, 30).await;
    let alice = client_with(&app.user("alice", false).await);
    let mut bad = council_request("Unknown model?");
    bad["councilModels"] = json!(["nosuch/model", "sim/beta", "sim/gamma"]);
    let statuses = starts_at_once(&app, &alice, bad, 30).await;
    assert!(statuses.iter().all(|&s| s == 400), "{statuses:?}");
    let ok = starts_at_once(&app, &alice, council_request("And now?"), 1).await;
    assert_eq!(ok, [202]);
    app.stop().await;
}

/// The per-minute start limit goes by the injected clock: a start refused for the budget says
/// when to retry, and at that time (moved by hand, not waited for) it is accepted.
#[actix_web::test]
async fn the_start_budget_comes_back_a_minute_after_the_first_start() {
    use conclave::engine::limits::{Clock, UserLimits};
    let clock = Clock::manual();
    let user_limits = UserLimits { concurrent_runs: 1000, starts_per_minute: 2 };
    let app = spawn_with(Options { user_limits, clock: clock.clone(), ..Options::default() }).await;
    let alice = client_with(&app.user("alice", false).await);
    let start = || {
        alice.post(format!("{}/api/deliberations", app.base)).json(&council_request("Now?")).send()
    };
    assert_eq!(start().await.unwrap().status(), 202);
    clock.advance(Duration::from_secs(20));
    assert_eq!(start().await.unwrap().status(), 202);
    let refused = start().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "40", "the first start leaves the window at 60 s");
    clock.advance(Duration::from_secs(39));
    assert_eq!(start().await.unwrap().status(), 429, "a second early");
    clock.advance(Duration::from_secs(1));
    assert_eq!(start().await.unwrap().status(), 202);
    app.stop().await;
}
