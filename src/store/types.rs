//! The two column types whose storage differs by backend, so that the rest of the store (and
//! everything above it) sees one set of Rust types:
//!
//! - [`Json`]: TEXT on SQLite, `jsonb` on PostgreSQL. Written from a [`JsonText`] (a
//!   `serde_json::Value` serialized once, made storable), read as a `serde_json::Value`.
//! - [`Millis`]: BIGINT milliseconds since the Unix epoch on SQLite, `timestamptz` on
//!   PostgreSQL. Written from an [`Ms`], read as an `i64` of milliseconds.
//!
//! Each has `ToSql`/`FromSql` for SQLite, for PostgreSQL (binary wire formats) and for the
//! `MultiBackend` that `#[derive(MultiConnection)]` generates, which dispatches to the other two.
//!
//! Values that one backend cannot hold are changed the same way on both, so the backends store
//! the same thing: a NUL character in a JSON string or key becomes U+FFFD (`jsonb` refuses the
//! escape `\u0000`), and a whole-number float of 1e16 or more that fits a 64-bit integer is
//! stored as that integer (`jsonb` keeps numbers as `numeric`, and reads `1e+16` back as the
//! integer `10000000000000000`), -0.0 as 0.0. Milliseconds are kept exactly: a `timestamptz`
//! holds microseconds.

use std::io::Write;

use diesel::backend::Backend;
use diesel::deserialize::{self, FromSql};
use diesel::expression::AsExpression;
use diesel::pg::{Pg, PgValue};
use diesel::query_builder::QueryId;
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sql_types::{HasSqlType, SqlType};
use diesel::sqlite::Sqlite;
use serde_json::Value;

use super::db::MultiBackend;

/// A JSON document: TEXT on SQLite, `jsonb` on PostgreSQL.
#[derive(Debug, Clone, Copy, Default, SqlType, QueryId)]
#[diesel(postgres_type(oid = 3802, array_oid = 3807))]
#[diesel(sqlite_type(name = "Text"))]
pub struct Json;

/// A point in time: BIGINT milliseconds since the epoch on SQLite, `timestamptz` on PostgreSQL.
#[derive(Debug, Clone, Copy, Default, SqlType, QueryId)]
#[diesel(postgres_type(oid = 1184, array_oid = 1185))]
#[diesel(sqlite_type(name = "Long"))]
pub struct Millis;

/// A JSON value ready to be stored in a [`Json`] column: serialized, with the changes that make
/// it storable on both backends already made (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq, AsExpression)]
#[diesel(sql_type = Json)]
pub struct JsonText(String);

impl JsonText {
    pub fn new(value: &Value) -> JsonText {
        if needs_change(value) {
            let mut owned = value.clone();
            make_portable(&mut owned);
            JsonText(owned.to_string())
        } else {
            JsonText(value.to_string())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A time in milliseconds since the epoch, as written to a [`Millis`] column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, AsExpression)]
#[diesel(sql_type = Millis)]
pub struct Ms(pub i64);

/// Floats at or above this magnitude are written by serde_json with an exponent.
const EXPONENT_FROM: f64 = 1e16;
/// 2^63 and 2^64: the bounds of i64 and u64 (exactly representable as f64).
const I64_END: f64 = 9_223_372_036_854_775_808.0;
const U64_END: f64 = 18_446_744_073_709_551_616.0;

/// The number a float reads back as from `jsonb` (which keeps numbers as `numeric`), when that
/// is not the float itself: a whole number written with an exponent (serde_json writes 1e16 as
/// `1e+16`) that fits a 64-bit integer comes back as that integer, and -0.0 as 0.0.
fn portable_number(n: &serde_json::Number) -> Option<serde_json::Number> {
    let f = n.as_f64().filter(|_| n.is_f64())?;
    if f == 0.0 && f.is_sign_negative() {
        return serde_json::Number::from_f64(0.0);
    }
    if f.fract() != 0.0 || f.abs() < EXPONENT_FROM {
        return None;
    }
    if (0.0..U64_END).contains(&f) {
        Some((f as u64).into())
    } else if (-I64_END..0.0).contains(&f) {
        Some((f as i64).into())
    } else {
        None
    }
}

fn needs_change(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Number(n) => portable_number(n).is_some(),
        Value::Array(items) => items.iter().any(needs_change),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || needs_change(v)),
        Value::Null | Value::Bool(_) => false,
    }
}

fn without_nul(s: &str) -> String {
    s.replace('\0', "\u{FFFD}")
}

fn make_portable(v: &mut Value) {
    match v {
        Value::String(s) => {
            if s.contains('\0') {
                *s = without_nul(s);
            }
        }
        Value::Number(n) => {
            if let Some(portable) = portable_number(n) {
                *n = portable;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(make_portable),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains('\0')) {
                let old = std::mem::take(map);
                // Two keys that differ only where one has NUL and the other U+FFFD merge; the
                // later one (in key order) wins, as in a JSON document with a repeated key.
                *map = old.into_iter().map(|(k, v)| (without_nul(&k), v)).collect();
            }
            map.values_mut().for_each(make_portable);
        }
        Value::Null | Value::Bool(_) => {}
    }
}

/// JSON text as stored, read back. Text that is not JSON (which this application never
/// writes) reads as null rather than failing the whole query.
fn parse_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

// --- SQLite ------------------------------------------------------------------------------------

impl ToSql<Json, Sqlite> for JsonText {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(self.0.as_str());
        Ok(IsNull::No)
    }
}

impl FromSql<Json, Sqlite> for Value {
    fn from_sql(value: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<diesel::sql_types::Text, Sqlite>>::from_sql(value)?;
        Ok(parse_json(text.as_bytes()))
    }
}

impl ToSql<Millis, Sqlite> for Ms {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(self.0);
        Ok(IsNull::No)
    }
}

impl FromSql<Millis, Sqlite> for i64 {
    fn from_sql(value: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        <i64 as FromSql<diesel::sql_types::BigInt, Sqlite>>::from_sql(value)
    }
}

// --- PostgreSQL (binary formats) ---------------------------------------------------------------

/// The `jsonb` binary format's version byte, before the JSON text.
const JSONB_VERSION: u8 = 1;

impl ToSql<Json, Pg> for JsonText {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        out.write_all(&[JSONB_VERSION])?;
        out.write_all(self.0.as_bytes())?;
        Ok(IsNull::No)
    }
}

impl FromSql<Json, Pg> for Value {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        match value.as_bytes().split_first() {
            Some((&JSONB_VERSION, text)) => Ok(parse_json(text)),
            Some((v, _)) => Err(format!("unsupported jsonb format version {v}").into()),
            None => Err("an empty jsonb value".into()),
        }
    }
}

/// `timestamptz` counts microseconds from 2000-01-01T00:00:00Z; this is that instant in
/// milliseconds from the Unix epoch.
const PG_EPOCH_MS: i64 = 946_684_800_000;

impl ToSql<Millis, Pg> for Ms {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        let micros =
            self.0.checked_sub(PG_EPOCH_MS).and_then(|ms| ms.checked_mul(1000)).ok_or_else(
                || format!("{} ms since the epoch is out of timestamptz's range", self.0),
            )?;
        out.write_all(&micros.to_be_bytes())?;
        Ok(IsNull::No)
    }
}

impl FromSql<Millis, Pg> for i64 {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        let bytes: [u8; 8] = value
            .as_bytes()
            .try_into()
            .map_err(|_| format!("a timestamptz of {} bytes", value.as_bytes().len()))?;
        Ok(match i64::from_be_bytes(bytes) {
            // 'infinity' and '-infinity' (never written by this application).
            i64::MAX => i64::MAX,
            i64::MIN => i64::MIN,
            // Floor, so that a time before 2000 with a fraction of a millisecond (never
            // written here either) still reads as the millisecond it falls in.
            micros => micros.div_euclid(1000) + PG_EPOCH_MS,
        })
    }
}

// --- Either backend, through the connection enum -----------------------------------------------

impl HasSqlType<Json> for MultiBackend {
    fn metadata(lookup: &mut Self::MetadataLookup) -> Self::TypeMetadata {
        MultiBackend::lookup_sql_type::<Json>(lookup)
    }
}

impl HasSqlType<Millis> for MultiBackend {
    fn metadata(lookup: &mut Self::MetadataLookup) -> Self::TypeMetadata {
        MultiBackend::lookup_sql_type::<Millis>(lookup)
    }
}

impl ToSql<Json, MultiBackend> for JsonText {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, MultiBackend>) -> serialize::Result {
        out.set_value((Json, self));
        Ok(IsNull::No)
    }
}

impl FromSql<Json, MultiBackend> for Value {
    fn from_sql(value: <MultiBackend as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        value.from_sql::<Value, Json>()
    }
}

impl ToSql<Millis, MultiBackend> for Ms {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, MultiBackend>) -> serialize::Result {
        out.set_value((Millis, self));
        Ok(IsNull::No)
    }
}

impl FromSql<Millis, MultiBackend> for i64 {
    fn from_sql(value: <MultiBackend as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        value.from_sql::<i64, Millis>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_in_strings_and_keys_becomes_the_replacement_character() {
        let v = json!({ "a\u{0}b": ["x\u{0}", { "k": "\u{0}\u{0}" }], "plain": "\\u0000" });
        let stored = JsonText::new(&v);
        let back: Value = serde_json::from_str(stored.as_str()).unwrap();
        assert_eq!(
            back,
            json!({ "a\u{FFFD}b": ["x\u{FFFD}", { "k": "\u{FFFD}\u{FFFD}" }], "plain": "\\u0000" })
        );
    }

    #[test]
    fn values_needing_no_change_are_serialized_as_they_are() {
        let v = json!({ "s": "text \\u0000 not a NUL", "n": [1, -2, 0.5, 1e15, 1.5e-16, 1e300] });
        assert_eq!(JsonText::new(&v).as_str(), v.to_string());
    }

    #[test]
    fn large_whole_floats_are_stored_as_the_integers_jsonb_would_read_back() {
        let v = json!([1e16, -1e16, 1.8e19, 1e20, -9.3e18, 12345.0, 1.5e16, -0.0]);
        let back: Value = serde_json::from_str(JsonText::new(&v).as_str()).unwrap();
        assert_eq!(
            back,
            json!([
                10_000_000_000_000_000u64,
                -10_000_000_000_000_000i64,
                18_000_000_000_000_000_000u64,
                1e20,
                -9.3e18,
                12345.0,
                15_000_000_000_000_000u64,
                0.0
            ])
        );
        assert_eq!(JsonText::new(&json!(-0.0)).as_str(), "0.0");
    }
}
