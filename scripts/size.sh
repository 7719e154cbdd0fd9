#!/usr/bin/env bash
# The size figures issue 29 judges the tree by, measured the same way every time:
#   - the non-test lines of src/modes/ (test files, modules declared under `#[cfg(test)]` such as
#     the test kit and the golden recordings, and inline test modules left
#     out; a `#[cfg(test)] mod x;` declaration is one test line, not the end of the file),
#   - the `json!` lines among them,
#   - the non-test source files of src/ over 900 lines.
# The pairs `duplicates` finds are its own figure: run `duplicates --most 200 --seconds 120`
# in src/.
#
#   scripts/size.sh            the three figures
#   scripts/size.sh --files    and each mode file's non-test lines, largest first
set -euo pipefail
cd "$(dirname "$0")/.."

# Prints a Rust file's non-test lines: everything but `*tests.rs` files and test-only modules,
# `#[cfg(test)]` with the item after it when that item is one line (`mod tests;`), and an
# inline `#[cfg(test)] mod … {` to the end of the file (the project keeps those last).
non_test() {
  case "$1" in
    *tests.rs) return ;;
  esac
  if grep -qxF "$1" <<<"$test_only"; then return; fi
  awk '
    skip_next { skip_next = 0; if ($0 ~ /^[[:space:]]*(pub(\([a-z]+\))? )?mod [a-z_0-9]+;/) next }
    /^[[:space:]]*#\[cfg\(test\)\][[:space:]]*$/ { skip_next = 1; held = $0; next }
    /^[[:space:]]*(pub(\([a-z]+\))? )?mod [a-z_0-9]+ \{/ && held != "" { exit }
    { held = ""; print }
  ' "$1"
}

# The files of the modules declared under `#[cfg(test)]` (`mod golden;` is `golden.rs` or
# `golden/mod.rs` beside the declaring file): test code wherever it is named.
test_only=$(find src -name '*.rs' -print0 | xargs -0 awk '
  /^[[:space:]]*#\[cfg\(test\)\][[:space:]]*$/ { held = 1; next }
  held && match($0, /^[[:space:]]*(pub(\([a-z]+\))? )?mod [a-z_0-9]+;/) {
    name = $0; sub(/^.*mod /, "", name); sub(/;.*$/, "", name)
    dir = FILENAME; sub(/[^\/]*$/, "", dir)
    base = FILENAME; sub(/^.*\//, "", base)
    if (base != "mod.rs" && base != "lib.rs" && base != "main.rs") {
      stem = base; sub(/\.rs$/, "", stem); dir = dir stem "/"
    }
    print dir name ".rs"; print dir name "/mod.rs"
  }
  { held = 0 }
')

total=0
json=0
listing=""
while IFS= read -r f; do
  body=$(non_test "$f")
  [ -z "$body" ] && continue
  n=$(printf '%s\n' "$body" | wc -l)
  j=$(printf '%s\n' "$body" | grep -c 'json!' || true)
  total=$((total + n))
  json=$((json + j))
  listing+="$n $f"$'\n'
done < <(find src/modes -name '*.rs' | sort)

big=""
while IFS= read -r f; do
  body=$(non_test "$f")
  [ -z "$body" ] && continue
  n=$(printf '%s\n' "$body" | wc -l)
  if [ "$n" -gt 900 ]; then big+="  $n $f"$'\n'; fi
done < <(find src -name '*.rs' | sort)

echo "src/modes non-test lines: $total (issue 29's target: at most 15000)"
echo "json! lines in them:      $json (at most 120)"
if [ -z "$big" ]; then
  echo "non-test files over 900 lines: none"
else
  echo "non-test files over 900 lines:"
  printf '%s' "$big"
fi
if [ "${1:-}" = "--files" ]; then
  printf '%s' "$listing" | sort -rn
fi
