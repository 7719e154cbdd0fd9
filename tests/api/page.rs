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
    for mode in [
        "council",
        "vote",
        "jury",
        "debate",
        "delphi",
        "clarity",
        "red_team",
        "chain",
        "specialist_panel",
    ] {
        let path = format!("/static/js/modes/{mode}.js");
        let res = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(res.status(), 200, "the {mode} view is embedded");
    }
    let res = app.http.get(format!("{}/static/nope.js", app.base)).send().await.unwrap();
    assert_eq!(res.status(), 404);
}
