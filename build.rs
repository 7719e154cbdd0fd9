//! Rebuilds when a migration is added: `embed_migrations!` reads the migration folders at
//! compile time, and cargo would not otherwise notice a new folder in them.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
