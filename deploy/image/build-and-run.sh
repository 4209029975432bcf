#!/usr/bin/env bash
# `make image`: build the CPU image (deploy/Dockerfile) with a daemonless builder from Debian's packages, start it,
# and check /readyz and one proxied request through it.
#
#   buildah (build) and podman (run), vfs storage, --isolation chroot: no daemon, no overlay mounts;
#   the base image is made from Debian's own packages (mmdebstrap: python3, python3-venv, ca-certificates),
#   so nothing is pulled from a container registry; the serving dependencies come from PyPI as in any build.
#
# Every step says what it runs; a step that fails stops the script with the tool's own error and a line saying
# which step and why. Not part of `make test` (the base and the build take several minutes).
set -uo pipefail
cd "$(dirname "$0")/../.."
TAG="${CLEFGATE_IMAGE:-localhost/clefgate:0.1.0}"
BASE="${CLEFGATE_BASE_IMAGE:-localhost/clefgate-base:bookworm}"
WORK="${CLEFGATE_IMAGE_WORK:-${TMPDIR:-/tmp}/clefgate-image}"
STORAGE=(--storage-driver vfs)
mkdir -p "$WORK"

fail() { echo "make image: FAILED at step '$1': $2" >&2; exit 1; }
step() { echo "==> $*"; }

step "1/5 tools: buildah, podman, mmdebstrap"
missing=()
for tool in buildah podman mmdebstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -ne 0 ]; then
  fail tools "missing ${missing[*]}: install them from Debian with: apt-get install -y buildah podman mmdebstrap"
fi

step "2/5 base image $BASE from Debian packages (mmdebstrap, once)"
if ! podman "${STORAGE[@]}" image exists "$BASE"; then
  mmdebstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates bookworm "$WORK/base.tar" \
    > "$WORK/mmdebstrap.log" 2>&1 || { tail -20 "$WORK/mmdebstrap.log" >&2; fail base "mmdebstrap could not build the Debian root file system (log: $WORK/mmdebstrap.log)"; }
  podman "${STORAGE[@]}" import "$WORK/base.tar" "$BASE" || fail base "podman import of the Debian root file system was refused"
  rm -f "$WORK/base.tar"
fi

step "3/5 build $TAG (buildah bud --isolation chroot, deploy/Dockerfile)"
# pip inside the build (Debian's, which trusts the system bundle) verifies TLS with this host's CA bundle: a host
# behind a TLS-inspecting proxy has that proxy's CA there
extra=()
[ -f /etc/ssl/certs/ca-certificates.crt ] && extra+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
if [ -n "${CLEFGATE_IMAGE_REUSE:-}" ] && podman "${STORAGE[@]}" image exists "$TAG"; then
  echo "reusing the image already built (CLEFGATE_IMAGE_REUSE is set)"
else
  buildah "${STORAGE[@]}" bud --isolation chroot --format docker --layers=false \
    --build-arg PYTHON_IMAGE="$BASE" "${extra[@]}" -f deploy/Dockerfile -t "$TAG" . \
    || fail build "buildah could not build deploy/Dockerfile (its error is above)"
fi

step "4/5 start $TAG in front of the demo origin"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ORIGIN_PORT=$(port); LISTEN_PORT=$(port); ADMIN_PORT=$(port)
SECRETS="$WORK/secrets"; rm -rf "$SECRETS"; mkdir -p "$SECRETS"
python3 -c 'import secrets; print(secrets.token_hex(32))' > "$SECRETS/challenge-key"
python3 -c 'import secrets; print(secrets.token_hex(32))' > "$SECRETS/admin-token"
chmod 0644 "$SECRETS"/*
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m gateway.tools.demo --port "$ORIGIN_PORT" > "$WORK/origin.log" 2>&1 &
ORIGIN_PID=$!
NAME="clefgate-image-check-$$"
ARGS=(serve --config /etc/clefgate/clefgate.yaml --upstream "http://127.0.0.1:$ORIGIN_PORT"
      --listen "127.0.0.1:$LISTEN_PORT" --admin "127.0.0.1:$ADMIN_PORT" --trusted-proxies 127.0.0.1/32)
RUNNER=""
CTR=""
RUN_PID=""
cleanup() {
  [ -n "$RUN_PID" ] && kill "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
  [ "$RUNNER" = podman ] && podman "${STORAGE[@]}" rm -f "$NAME" >/dev/null 2>&1
  [ -n "$CTR" ] && buildah "${STORAGE[@]}" rm "$CTR" >/dev/null 2>&1
  kill "$ORIGIN_PID" 2>/dev/null
}
trap cleanup EXIT
logs() { if [ "$RUNNER" = podman ]; then podman "${STORAGE[@]}" logs "$NAME" 2>&1; else cat "$WORK/container.log"; fi; }
running() { if [ "$RUNNER" = podman ]; then [ "$(podman "${STORAGE[@]}" inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" = true ];
            else kill -0 "$RUN_PID" 2>/dev/null; fi; }
if podman "${STORAGE[@]}" run -d --name "$NAME" --network host --cgroups=disabled --no-healthcheck \
     -v "$SECRETS:/run/secrets/clefgate:ro" "$TAG" "${ARGS[@]}" > "$WORK/podman-run.out" 2>&1; then
  RUNNER=podman
else
  # A sandbox that refuses an OCI runtime (crun's setrlimit, namespaces) can still run the image's file system with the
  # builder's chroot isolation, as its RUN steps were: same image, entry point and user, no runtime in between.
  echo "podman run refused: $(tail -1 "$WORK/podman-run.out")"
  podman "${STORAGE[@]}" rm -f "$NAME" >/dev/null 2>&1
  echo "starting the same image with: buildah run --isolation chroot (the image's user, environment and entry point)"
  CTR=$(buildah "${STORAGE[@]}" from --name "$NAME" "$TAG") || fail run "buildah could not create a container from $TAG"
  buildah "${STORAGE[@]}" run --isolation chroot --network host -v "$SECRETS:/run/secrets/clefgate:ro" "$CTR" -- \
    python -m gateway "${ARGS[@]}" > "$WORK/container.log" 2>&1 &
  RUN_PID=$!
  RUNNER=buildah
fi

step "5/5 /readyz and one proxied request"
ready=""
for _ in $(seq 1 120); do
  if curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" > "$WORK/readyz.json" 2>/dev/null; then ready=1; break; fi
  running || break
  sleep 1
done
if [ -z "$ready" ]; then
  logs | tail -30 >&2
  fail readyz "the container never answered /readyz with 200 (its log is above)"
fi
echo "readyz: $(cat "$WORK/readyz.json")"
# robots.txt is forwarded by a rule (allow-robots-txt) whatever the model says: the request the image must proxy
status=$(curl -s -o "$WORK/robots.txt" -w '%{http_code}' -H 'User-Agent: curl/8.5.0' "http://127.0.0.1:$LISTEN_PORT/robots.txt")
grep -q "User-agent" "$WORK/robots.txt" && [ "$status" = 200 ] \
  || { logs | tail -20 >&2; fail proxy "GET /robots.txt through the image answered $status, not the origin's file"; }
echo "proxied: GET /robots.txt -> $status, the origin's file"
# what the model and policy make of a page request and of a scanner probe (shown, not required)
page=$(curl -s -o /dev/null -w '%{http_code} %header{x-clefgate-verdict} %header{x-clefgate-source}' \
  -H 'User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36' \
  -H 'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' -H 'Accept-Language: en-GB,en;q=0.9' \
  -H 'Accept-Encoding: gzip, deflate, br' -H 'Sec-Fetch-Site: none' -H 'Sec-Fetch-Mode: navigate' -H 'Sec-Fetch-Dest: document' \
  -H 'Upgrade-Insecure-Requests: 1' "http://127.0.0.1:$LISTEN_PORT/shop")
echo "page: GET /shop -> $page"
probe=$(curl -s -o /dev/null -w '%{http_code} %header{x-clefgate-verdict}' -H 'User-Agent: curl/8.5.0' "http://127.0.0.1:$LISTEN_PORT/.env")
echo "probe: GET /.env -> $probe"
echo "make image: OK ($TAG built with buildah; started with $RUNNER; /readyz 200; a request proxied to the origin)"
