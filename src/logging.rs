//! The process's log: `env_logger` (filtered by `RUST_LOG`) behind one gate that redacts every
//! line, whoever wrote it (the access log, an error, actix's own debug lines): nothing shaped
//! like a Conclave token reaches the log, whether it came in a path, an id or a message.

use log::{Log, Metadata, Record};

use crate::secrets::redact_tokens;

/// Every record passes through [`redact_tokens`] on its way to `env_logger`.
struct Redacting(env_logger::Logger);

impl Log for Redacting {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if !self.0.matches(record) {
            return;
        }
        let text = record.args().to_string();
        let text = redact_tokens(&text);
        self.0.log(
            &Record::builder()
                .args(format_args!("{text}"))
                .metadata(record.metadata().clone())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Installs the log: `RUST_LOG`, else `default_filter`; every line redacted.
pub fn init(default_filter: &str) {
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter))
            .build();
    let max = logger.filter();
    if log::set_boxed_logger(Box::new(Redacting(logger))).is_ok() {
        log::set_max_level(max);
    }
}
