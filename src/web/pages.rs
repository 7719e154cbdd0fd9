//! The few pages the server writes itself rather than the browser client: a sign-in link that
//! no longer works, and an address with no page. They wear the app's look (its stylesheet and
//! top bar) and say in plain words what happened and what to do next.
//!
//! Their text is fixed here; nothing a request carries is written into them, so they need no
//! escaping and cannot be made to say anything else.

use actix_web::http::StatusCode;
use actix_web::HttpResponse;

/// A page of the server's own: a heading, what happened, and what to do (trusted HTML).
struct Notice {
    status: StatusCode,
    title: &'static str,
    /// What happened, in a sentence or two.
    what: &'static str,
    /// What to do now: one item per way forward.
    next: &'static [&'static str],
}

/// The same policy as the client's files: styles from itself, no script at all.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

fn render(n: &Notice) -> HttpResponse {
    let next: String = n.next.iter().map(|item| format!("<li>{item}</li>")).collect();
    let body = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<meta name=\"robots\" content=\"noindex\">\n\
         <title>{title} · Conclave</title>\n<link rel=\"stylesheet\" href=\"/static/app.css\">\n\
         <link rel=\"icon\" href=\"/static/favicon.svg\" type=\"image/svg+xml\">\n</head>\n\
         <body class=\"notice-page\">\n<header class=\"topbar\"><a class=\"brand\" href=\"/\">Conclave</a></header>\n\
         <main id=\"main\">\n<section class=\"notice form-card\" aria-labelledby=\"notice-title\">\n\
         <h1 id=\"notice-title\">{title}</h1>\n<p class=\"notice-what\">{what}</p>\n\
         <h2>What to do</h2>\n<ul class=\"notice-next\">{next}</ul>\n\
         <p><a class=\"button\" href=\"/\">Go to Conclave</a></p>\n</section>\n</main>\n</body>\n</html>\n",
        title = n.title,
        what = n.what,
    );
    HttpResponse::build(n.status)
        .content_type("text/html; charset=utf-8")
        .insert_header(("Content-Security-Policy", CSP))
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(body)
}

/// How to get in without a link: an API token from whoever runs the server.
const ASK_FOR_A_TOKEN: &str = "Ask whoever runs this Conclave server for an API token. They make \
    one on the server with <code>conclave user add YOUR-NAME</code> (with <code>--admin</code> \
    for an administrator); paste it on the sign-in page.";

/// A sign-in link that was used already, has expired, or never was one (401).
pub fn sign_in_link_used() -> HttpResponse {
    render(&Notice {
        status: StatusCode::UNAUTHORIZED,
        title: "This sign-in link no longer works",
        what: "A sign-in link works only once, and only for 24 hours after the server printed \
            it. This one has already been used, or it has expired, so it cannot sign you in.",
        next: &[
            "If you opened this link before on this browser, you may still be signed in: \
             try the button below.",
            ASK_FOR_A_TOKEN,
            "If you set up this server yourself, run that command on it, then paste the token \
             it prints.",
        ],
    })
}

/// An address the server has no page for (404); the API answers its own JSON 404.
pub fn not_found() -> HttpResponse {
    render(&Notice {
        status: StatusCode::NOT_FOUND,
        title: "There is no page at this address",
        what: "The address may be mistyped, or the page it pointed to has moved. A shared \
            deliberation's link starts with <code>/s/</code>.",
        next: &[
            "<a href=\"/\">Go to the dashboard</a>, which lists the deliberations running now \
             and the recent ones.",
            "<a href=\"/#/history\">Search the history</a> for an earlier conversation.",
        ],
    })
}

/// Every address outside the API, the client and the share links.
pub async fn unknown_address() -> HttpResponse {
    not_found()
}
