//! The embedded browser client: served with a strict Content-Security-Policy, every module it
//! imports and every vendored library it loads is in the binary, nothing comes from elsewhere.

use std::collections::BTreeSet;

use regex::Regex;

use crate::helpers::*;

#[actix_web::test]
async fn the_page_is_self_contained_and_served_with_a_strict_csp() {
    let app = spawn_app().await;
    let res = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let csp = res.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("script-src 'self' 'unsafe-inline'"), "{csp}");
    assert!(csp.contains("object-src 'none'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(res.headers()["x-content-type-options"], "nosniff");
    let html = res.text().await.unwrap();

    // Everything the page references, and everything those modules import, is served here.
    let src = Regex::new(r#"(?:src|href)="(/static/[^"]+)""#).unwrap();
    let import = Regex::new(r#"(?:from\s+|import\()\s*["'`](\./[^"'`$]+\.js)["'`]"#).unwrap();
    let mut todo: Vec<String> = src.captures_iter(&html).map(|c| c[1].to_string()).collect();
    assert!(todo.iter().any(|p| p.ends_with("purify.min.js")), "the sanitiser is loaded: {todo:?}");
    assert!(!html.contains("http://") && !html.contains("https://"), "no CDN or remote asset");
    let mut seen = BTreeSet::new();
    while let Some(path) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let res = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let ctype = res.headers()["content-type"].to_str().unwrap().to_string();
        if path.ends_with(".js") {
            assert!(ctype.contains("javascript"), "{path}: {ctype}");
            let body = res.text().await.unwrap();
            let dir = &path[..path.rfind('/').unwrap()];
            for c in import.captures_iter(&body) {
                todo.push(format!("{dir}/{}", &c[1][2..]));
            }
        }
    }
    // Every mode the registry says has a view of its own (each shipped mode does: see
    // tests/api/registry.rs) has it embedded.
    let (_, listed) = app.get("/api/modes").await;
    let with_views: Vec<&str> = listed["modes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["view"] == true)
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(with_views.len() >= 6, "{listed}");
    for mode in with_views {
        let path = format!("/static/js/modes/{mode}.js");
        let res = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(res.status(), 200, "the {mode} view is embedded");
    }
    let res = app.http.get(format!("{}/static/nope.js", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 404);
}

/// The pages the server writes itself: a sign-in link used a second time answers 401 with a
/// page in the app's look (its stylesheet, its top bar) that says what happened and how to get
/// in instead; an address with no page answers 404 the same way, and the API keeps its JSON.
#[actix_web::test]
async fn a_used_sign_in_link_and_an_unknown_address_answer_helpful_styled_pages() {
    let app = spawn_app().await;
    let token = conclave::web::auth::new_token();
    let store = conclave::store::Store::start(&app.database_url).unwrap();
    let hash = conclave::web::auth::hash_token(&token);
    store.add_token("tester", hash, conclave::store::TokenKind::Login, None).await.unwrap();
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build();
    let browser = browser.unwrap();
    let link = format!("{}/login?token={token}", app.base);
    assert_eq!(browser.get(&link).send().await.unwrap().status(), 303, "the first use signs in");

    let styled = |res: reqwest::Response, status: u16| async move {
        assert_eq!(res.status(), status);
        let ctype = res.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ctype.starts_with("text/html"), "{ctype}");
        let csp = res.headers()["content-security-policy"].to_str().unwrap().to_string();
        assert!(csp.contains("default-src 'none'") && !csp.contains("script-src"), "{csp}");
        let html = res.text().await.unwrap();
        assert!(html.contains(r#"<link rel="stylesheet" href="/static/app.css">"#), "{html}");
        assert!(html.contains(r#"<header class="topbar">"#), "{html}");
        html
    };
    let html = styled(browser.get(&link).send().await.unwrap(), 401).await;
    assert!(html.contains("This sign-in link no longer works"), "{html}");
    assert!(html.contains("already been used, or it has expired"), "{html}");
    assert!(html.contains("<code>conclave user add YOUR-NAME</code>"), "{html}");
    // With no token at all, the same page.
    let html = styled(browser.get(format!("{}/login", app.base)).send().await.unwrap(), 401).await;
    assert!(html.contains("This sign-in link no longer works"), "{html}");

    let html = styled(browser.get(format!("{}/no/such/page", app.base)).send().await.unwrap(), 404);
    let html = html.await;
    assert!(html.contains("There is no page at this address"), "{html}");
    assert!(html.contains(r#"<a href="/">Go to the dashboard</a>"#), "{html}");
    // The stylesheet the pages link is served.
    let css = browser.get(format!("{}/static/app.css", app.base)).send().await.unwrap();
    assert_eq!(css.status(), 200);
    assert!(css.text().await.unwrap().contains(".notice {"));
    // Under /api an unknown route is still the API's JSON 404.
    let (status, body) = app.get("/api/no-such-route").await;
    assert_eq!((status, body["error"].as_str()), (404, Some("no such API route")));
}
