# The service's image: a build stage with every dependency, a runtime stage with the production
# install alone, as the non-root user `node`. Its two steps are scripts/release.sh, the commands CI
# also runs natively; CI builds this file and runs the image (scripts/image-check.sh, from .ci/run)
# on a stand-in for the official base made by scripts/base-image.sh (issue 42). No `# syntax=` line:
# no feature here needs one, and it would make BuildKit fetch a frontend image.

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# the root postinstall (prisma generate) needs the schema and the config
COPY prisma ./prisma
COPY prisma.config.ts ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN bash scripts/release.sh build && bash scripts/release.sh assemble /app

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
# /app itself belongs to node too (WORKDIR makes it root's), as everything in it
RUN mkdir -p /app && chown node:node /app
WORKDIR /app
COPY --from=build --chown=node:node /app /app
USER node
EXPOSE 8080
# liveness only (no dependency): route traffic on /readyz. Worker-only processes serve the same
# probes on PORT (src/boot.ts).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# npm start without npm: plain node, PID 1 gets SIGTERM and drains (src/boot.ts)
CMD ["node", "--enable-source-maps", "dist/server/main.js"]
