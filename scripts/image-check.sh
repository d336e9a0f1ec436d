#!/usr/bin/env bash
# The image in CI (issue 42), called by .ci/run after the native smoke: a container engine (Debian's
# docker.io, its daemon started when down, without a bridge), the stand-in base image
# (scripts/base-image.sh, cached: skipped when its tag exists), compose.prod.yml validated by Debian's
# docker-compose (v1), the project's Dockerfile built, then the image run and checked
# (scripts/image-check.ts). Host networking only: `docker build --network host`, `docker run
# --network host`. Prints the seconds of each part.
#   scripts/image-check.sh [image tag]      (default svc-inference-market:ci)
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE="${1:-svc-inference-market:ci}"
t0=$(date +%s)

if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null 2>&1 || apt-get install -y docker.io || { apt-get update && apt-get install -y docker.io; }
  echo "image: starting dockerd (no bridge, no iptables: every container uses the host's network)"
  # setsid: the daemon outlives this script, as Postgres and Redis outlive .ci/run
  setsid dockerd --bridge=none --iptables=false --ip6tables=false >/var/log/dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -n 20 /var/log/dockerd.log >&2; exit 1; }
fi
command -v debootstrap >/dev/null 2>&1 || apt-get install -y debootstrap || { apt-get update && apt-get install -y debootstrap; }
t1=$(date +%s)

# compose.prod.yml as Debian's Compose v1 (1.29) reads it (v2 reads the same file): it must parse,
# interpolate and validate with the required variables set
command -v docker-compose >/dev/null 2>&1 || apt-get install -y docker-compose || { apt-get update && apt-get install -y docker-compose; }
compose_env=$(mktemp /tmp/svc-compose-env.XXXXXX)
printf '%s\n' "POSTGRES_PASSWORD=a/b+c=d" "BASE_URL=https://api.example.com" \
  "PAY_TO=0x1111111111111111111111111111111111111111" "IDP_APP_ID=app" \
  "IDP_JWKS_URL=https://auth.example.com/jwks.json" "SESSION_SECRET=a-session-secret-of-at-least-32-characters" \
  "KEY_ENCRYPTION_KEY=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff" \
  "GRAFANA_ADMIN_PASSWORD=grafana" >"$compose_env"
docker-compose -p svc -f compose.prod.yml --env-file "$compose_env" config --quiet || { rm -f "$compose_env"; exit 1; }
rm -f "$compose_env"
echo "image: compose.prod.yml is valid for $(docker-compose version --short)"

bash scripts/base-image.sh
t2=$(date +%s)

# the legacy builder or BuildKit, whichever this docker has: the Dockerfile needs nothing of either
log=$(mktemp /tmp/svc-image-build.XXXXXX)
# the build stage tagged too, so that pruning the previous runs' untagged layers keeps this run's
# (the npm ci layer is the next build's cache): disk stays at about one build's worth
{ docker build --network host --target build -t "$IMAGE-build" . && docker build --network host -t "$IMAGE" .; } \
  >"$log" 2>&1 || { tail -n 60 "$log" >&2; rm -f "$log"; exit 1; }
rm -f "$log"
docker image prune -f >/dev/null
t3=$(date +%s)

node --import tsx scripts/image-check.ts "$IMAGE"
t4=$(date +%s)
echo "image: engine $((t1 - t0))s, base image $((t2 - t1))s, image build $((t3 - t2))s, checks $((t4 - t3))s, total $((t4 - t0))s"
