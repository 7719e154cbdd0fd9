//! Secrets: a type for keys that never prints, and the redaction of what must not be printed
//! (a URL's password, a provider's echo of the key it was sent).
//!
//! Everything that writes a URL or a provider's words to a log, an event, a stored row or a
//! response goes through here; nothing here does I/O.

use serde::Deserialize;
use zeroize::Zeroize;

/// What a redacted secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// A key (a provider's API key): its `Debug` prints `[redacted]` and it has no `Display`, so
/// no `{:?}` of a configuration or a client, no `{}` and no log line can show it; the one way
/// to read it is [`Secret::expose`], at the place that sends it. Its bytes are zeroed when it is
/// dropped, so a key does not linger in freed memory.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The key itself: only to send it (an `Authorization` header) or to redact its echoes.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(key: String) -> Self {
        Secret(key)
    }
}

impl From<&str> for Secret {
    fn from(key: &str) -> Self {
        Secret(key.to_string())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// The shortest run of a key's characters that is redacted when it appears on its own: long
/// enough not to hit ordinary words, short enough that no useful part of a key survives.
pub const KEY_RUN: usize = 12;

/// `text` (a provider's words) with every echo of `key` replaced by `[redacted]`: the whole
/// key, and any run of [`KEY_RUN`] or more of its consecutive characters (all of it when the
/// key is shorter), whatever their case, so a truncated, shortened or upper-cased echo goes
/// too. A key under 8 characters is left alone (it would hit ordinary words).
pub fn redact_key(text: &str, key: &str) -> String {
    let key = key.trim().as_bytes();
    if key.len() < 8 {
        return text.to_string();
    }
    let run = KEY_RUN.min(key.len());
    let bytes = text.as_bytes();
    // Ranges of `text` to cut, in order; each is the longest match starting where it does.
    let mut cuts: Vec<std::ops::Range<usize>> = Vec::new();
    let mut i = 0;
    while i + run <= bytes.len() {
        let longest = (0..=key.len() - run)
            .map(|j| {
                bytes[i..]
                    .iter()
                    .zip(&key[j..])
                    .take_while(|(a, b)| a.eq_ignore_ascii_case(b))
                    .count()
            })
            .max()
            .unwrap_or(0);
        if longest >= run {
            // Whole characters only (a multi-byte key may match from the middle of one).
            let mut from = i;
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = i + longest;
            while !text.is_char_boundary(to) {
                to += 1;
            }
            match cuts.last_mut() {
                Some(last) if last.end >= from => last.end = last.end.max(to),
                _ => cuts.push(from..to),
            }
            i += longest;
        } else {
            i += 1;
        }
    }
    let mut out = text.to_string();
    for cut in cuts.into_iter().rev() {
        out.replace_range(cut, REDACTED);
    }
    out
}

/// A URL (`postgres://…`, `redis://…`, any `scheme://user:password@host…`) without its
/// password: the userinfo's password and a `password=`/`sslpassword=` query parameter (libpq
/// reads those too) become `[redacted]`. Anything else is kept, so the log still says which
/// host and database were meant.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    // From the last, so the earlier ranges stay where they were.
    for range in password_ranges(url).into_iter().rev() {
        out.replace_range(range, REDACTED);
    }
    out
}

/// The shortest piece of a password redacted on its own (see [`redact_url_in`]).
pub const PASSWORD_PIECE: usize = 3;

/// `text` (an error's message) with the URL and every password it holds redacted, wherever
/// they appear: for messages worded by a library that may repeat what it was given. A library
/// that misreads a malformed URL (`postgres://u:Pw@@888@h/db`) quotes pieces of it, so each
/// piece of a password between its punctuation (`@`, `:`, `/`…) of [`PASSWORD_PIECE`] or more
/// characters goes too.
pub fn redact_url_in(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact_url(url));
    for range in password_ranges(url) {
        let password = &url[range];
        // The whole first, then its pieces, longest first (one may hold another).
        let mut pieces: Vec<&str> = password
            .split(|c: char| !c.is_alphanumeric() && !"-_.~%".contains(c))
            .filter(|p| p.chars().count() >= PASSWORD_PIECE)
            .collect();
        pieces.sort_by_key(|p| std::cmp::Reverse(p.len()));
        // A very short password would also hit ordinary words; it is out of the URL anyway.
        if password.len() >= PASSWORD_PIECE {
            pieces.insert(0, password);
        }
        for piece in pieces {
            out = out.replace(piece, REDACTED);
        }
    }
    out
}

/// `text` with everything shaped like a Conclave token (`cnv_…` API and session tokens,
/// `shr_…` share tokens, the underscore percent-encoded too) cut to its prefix: for whatever
/// the server logs of a request (a path, an id it was given, an error quoting either).
pub fn redact_tokens(text: &str) -> std::borrow::Cow<'_, str> {
    let re = regex!(r"(?i)(cnv|shr)(?:_|%5f)[0-9a-z]+");
    re.replace_all(text, |c: &regex::Captures| format!("{}_{REDACTED}", &c[1]))
}

/// Words of a configuration key that say its value is a secret (`api_key`, `password`,
/// `token`, a misspelt `api_kye`); `max_tokens` and the like are counts, not secrets.
const SECRET_KEY_WORDS: &[&str] =
    &["key", "kye", "pass", "password", "passwd", "pwd", "secret", "token", "auth", "credential"];

/// The values of `source` (a configuration file's text, which may not parse) given to keys
/// that name a secret, as written: quoted or bare, an unclosed quote running to the line's end.
fn secret_values(source: &str) -> Vec<&str> {
    let re = regex!(
        r#"([A-Za-z0-9_\-]+)["']?\s*=[ 	]*([^
]*)"#
    );
    let mut found = Vec::new();
    for c in re.captures_iter(source) {
        let key = c[1].to_ascii_lowercase();
        if !key.split(['_', '-']).any(|w| SECRET_KEY_WORDS.contains(&w)) {
            continue;
        }
        let Some(value) = c.get(2) else { continue };
        let value = value.as_str().trim();
        let quoted = value.chars().next().filter(|q| *q == '"' || *q == '\'');
        let value = match quoted {
            Some(q) => {
                let inner = value.trim_start_matches(q);
                inner.find(q).map_or(inner, |end| &inner[..end])
            }
            None => value.split([',', '}', ']', '#', ' ', '\t']).next().unwrap_or(""),
        };
        if !value.is_empty() {
            found.push(value);
        }
    }
    found
}

/// A message about a configuration file (a parse error quoting the line at fault) with no
/// secret left in it: URL passwords, Conclave tokens, and every value `source` gives a key that
/// names a secret (`api_key = "sk-…"`), wherever the message quotes it.
pub fn redact_config_text(message: &str, source: &str) -> String {
    // Keys in their providers' shapes, wherever they were put (`latency_ms = "sk-…"`).
    let key_shaped = regex!(
        r"\b(?:(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|(?:hf|gh[pousr])_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16})"
    );
    let out = redact_tokens(&redact_urls(message)).into_owned();
    let mut out = key_shaped.replace_all(&out, REDACTED).into_owned();
    let mut values = secret_values(source);
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    for value in values {
        out = out.replace(value, REDACTED);
    }
    out
}

/// `text` with every URL in it (`scheme://…`, up to a space, a quote or an angle bracket)
/// passed through [`redact_url`]: for messages that quote what they were given, such as a
/// configuration file's parse error showing the line of `database_url`.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let scheme = rest[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || "+.-".contains(*c))
            .last()
            .map_or(at, |(i, _)| i);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || "\"'<>`".contains(c))
            .map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..scheme]);
        out.push_str(&redact_url(&rest[scheme..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where a URL's passwords are: its userinfo's (between the first ':' and the last '@' of the
/// authority) and the values of `password=` / `sslpassword=` query parameters.
fn password_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return found;
    };
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..end].rfind('@') {
        if let Some(colon) = rest[..at].find(':') {
            found.push(start + colon + 1..start + at);
        }
    }
    let Some(q) = rest.find('?') else {
        return found;
    };
    let query_start = start + q + 1;
    let query = &url[query_start..];
    let query = &query[..query.find('#').unwrap_or(query.len())];
    let mut offset = query_start;
    for param in query.split('&') {
        if let Some((key, value)) = param.split_once('=') {
            let secret = ["password", "sslpassword"].iter().any(|k| key.eq_ignore_ascii_case(k));
            if secret && !value.is_empty() {
                let from = offset + key.len() + 1;
                found.push(from..from + value.len());
            }
        }
        offset += param.len() + 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints() {
        let key = Secret::from("sk-or-v1-0123456789abcdef");
        assert_eq!(format!("{key:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(key.clone())), "Some([redacted])");
        assert_eq!(key.expose(), "sk-or-v1-0123456789abcdef");
        let read: Secret = serde_json::from_str("\"sk-abc\"").unwrap();
        assert_eq!(read.expose(), "sk-abc");
    }

    #[test]
    fn every_echo_of_a_key_goes_whatever_its_case_or_length() {
        let key = "sk-test-SECRET-echo-0123456789";
        let echoes = [
            key.to_string(),
            key.to_uppercase(),
            key.to_lowercase(),
            key[..14].to_string(),
            key[key.len() - 12..].to_string(),
            key[5..20].to_string(),
        ];
        for echo in &echoes {
            let text = format!("Incorrect API key provided: {echo}. See the docs.");
            let redacted = redact_key(&text, key);
            assert_eq!(redacted, "Incorrect API key provided: [redacted]. See the docs.", "{echo}");
        }
        // Twice, and back to back.
        let twice = format!("{key} and {}{}", key.to_uppercase(), &key[3..]);
        assert_eq!(redact_key(&twice, key), "[redacted] and [redacted]");
        // Fewer than 12 characters of it are kept (they would hit ordinary words).
        assert_eq!(redact_key("a sk-test-SEC run", key), "a sk-test-SEC run");
        // A short key goes whole, a very short one is left alone.
        assert_eq!(redact_key("key abcd1234 wrong", "abcd1234"), "key [redacted] wrong");
        assert_eq!(redact_key("key abc123 wrong", "abc123"), "key abc123 wrong");
        // Multi-byte text around it.
        assert_eq!(redact_key("é sk-test-SECRET-x é", key), "é [redacted]x é");
    }

    #[test]
    fn a_url_keeps_everything_but_its_passwords() {
        let cases = [
            (
                "postgres://app:S3cret@db.internal:5432/conclave",
                "postgres://app:[redacted]@db.internal:5432/conclave",
            ),
            (
                "postgresql://app:p%40ss@h/db?sslmode=require",
                "postgresql://app:[redacted]@h/db?sslmode=require",
            ),
            (
                "postgres://app@h/db?password=S3cret&sslmode=verify-full",
                "postgres://app@h/db?password=[redacted]&sslmode=verify-full",
            ),
            ("postgres://h/db?sslpassword=k3y#x", "postgres://h/db?sslpassword=[redacted]#x"),
            ("redis://:S3cret@h:6379/0", "redis://:[redacted]@h:6379/0"),
            ("rediss://user:a:b@c@h:6380", "rediss://user:[redacted]@h:6380"),
            ("redis://h:6379", "redis://h:6379"),
            ("postgres://app@h/db", "postgres://app@h/db"),
            ("sqlite://conclave.db", "sqlite://conclave.db"),
            ("not a url", "not a url"),
        ];
        for (url, expected) in cases {
            assert_eq!(redact_url(url), expected, "{url}");
        }
    }

    #[test]
    fn every_url_in_a_text_loses_its_password() {
        let text =
            "1 | database_url = \"postgres://app:S3cret@h/db\nx redis_url='rediss://:Pw2@r:6380/0'";
        let redacted = redact_urls(text);
        assert_eq!(
            redacted,
            "1 | database_url = \"postgres://app:[redacted]@h/db\nx redis_url='rediss://:[redacted]@r:6380/0'"
        );
        assert_eq!(redact_urls("no url here: a://"), "no url here: a://");
    }

    #[test]
    fn a_malformed_url_loses_every_piece_of_its_password() {
        // libpq reads the host from after the first '@' and quotes the rest.
        let url = "postgres://postgres:Pw@@888@127.0.0.1/test";
        let message = "invalid connection: socket \"@888@127.0.0.1/test\" not found";
        let redacted = redact_url_in(message, url);
        assert_eq!(redacted, "invalid connection: socket \"@[redacted]@127.0.0.1/test\" not found");
        let url = "postgres://app:Long:S3cret@word@h/db";
        let redacted = redact_url_in("at S3cret@word@h and Long:S3", url);
        assert!(!redacted.contains("S3cret") && !redacted.contains("Long"), "{redacted}");
        assert!(!redacted.contains("word"), "{redacted}");
    }

    #[test]
    fn conclave_tokens_are_cut_to_their_prefix() {
        let token = "cnv_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            (
                format!("GET /nonexist%3Ftoken={token} HTTP/1.1"),
                "GET /nonexist%3Ftoken=cnv_[redacted] HTTP/1.1",
            ),
            (format!("GET /login;token={token}"), "GET /login;token=cnv_[redacted]"),
            (
                format!("NotFound(\"run {token} not found\")"),
                "NotFound(\"run cnv_[redacted] not found\")",
            ),
            ("/s/SHR_abc/json".to_string(), "/s/SHR_[redacted]/json"),
            ("/x/cnv%5Fabc1".to_string(), "/x/cnv_[redacted]"),
            ("/api/deliberations/run_123".to_string(), "/api/deliberations/run_123"),
        ];
        for (text, expected) in cases {
            assert_eq!(redact_tokens(&text), expected);
        }
    }

    #[test]
    fn a_configuration_error_quotes_no_secret() {
        let source = "[[routes]]\nprefix = \"a/\"\napi_key = \"sk-live-abcdef\" oops\n\
                      api_kye = 'sk-typo-123456'\ntoken=bare-secret-999, x\n\
                      max_tokens = 5000\ndatabase_url = \"postgres://u:Pw9x@h/db\"\n\
                      password = \"unclosed-pass";
        let message = "line 3 | api_key = \"sk-live-abcdef\" oops\n line 4 | api_kye = \
                       'sk-typo-123456'\nbare-secret-999 unclosed-pass postgres://u:Pw9x@h/db \
                       cnv_0123abcd max_tokens = 5000";
        let redacted = redact_config_text(message, source);
        let misplaced = redact_config_text("invalid type: string \"sk-or-v1-abcdef12\"", "");
        assert_eq!(misplaced, "invalid type: string \"[redacted]\"");
        for secret in ["sk-live", "sk-typo", "bare-secret", "unclosed-pass", "Pw9x", "0123abcd"] {
            assert!(!redacted.contains(secret), "{secret}: {redacted}");
        }
        assert!(redacted.contains("api_key = \"[redacted]\" oops"), "{redacted}");
        assert!(redacted.contains("max_tokens = 5000"), "counts are no secret: {redacted}");
    }

    #[test]
    fn a_message_loses_the_url_and_its_passwords_wherever_they_appear() {
        let url = "postgres://app:S3cretPw@h:1/db?password=Other1";
        let message = format!("could not connect to {url}: password S3cretPw or Other1 refused");
        let redacted = redact_url_in(&message, url);
        assert!(!redacted.contains("S3cretPw") && !redacted.contains("Other1"), "{redacted}");
        assert!(redacted.contains("postgres://app:[redacted]@h:1/db"), "{redacted}");
    }
}
