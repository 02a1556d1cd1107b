# The workspace's images, one per target:
#   edge     — Envoy 1.40.0 with the Ankusa filter (wasm32-wasip1) at
#              /etc/ankusa/ankusa_filter.wasm; the bootstrap is mounted by docker-compose.yml
#   store    — ankusa-store (listens on $ANKUSA_STORE_LISTEN, Redis at $ANKUSA_REDIS_URL,
#              edge and operator tokens from $ANKUSA_STORE_EDGE_TOKEN_FILE and
#              $ANKUSA_STORE_OPERATOR_TOKEN_FILE; docker-compose.yml mounts two secrets)
#   intake   — the sample intake (journal in /data)
#   provider — the mock provider
# Every image runs as a user of its own, never root, and holds no secret: the
# edges and the provider read theirs from mounted files at start
# (docker/bin/ankusa-secret-env), the store reads its token files itself.
#
# The bases are arguments, the public images by default:
#   RUST_IMAGE   the build stage (rust:1-bookworm)
#   BASE_IMAGE   the store, intake and provider (debian:bookworm-slim)
#   ENVOY_IMAGE  the edge (envoyproxy/envoy:v1.40.0)
#   PREBUILT     empty: the build stage compiles everything from source. A
#                folder of the build context instead: it holds ankusa-store,
#                intake, mock-provider and ankusa_filter.wasm built beforehand,
#                which are copied in (scripts/compose-images.sh makes
#                docker/prebuilt/ and local stand-ins for the three bases, for
#                an engine that can't pull; docker/offline.env names them).
ARG RUST_IMAGE=rust:1-bookworm
ARG BASE_IMAGE=debian:bookworm-slim
ARG ENVOY_IMAGE=envoyproxy/envoy:v1.40.0

# One build serves the four targets below (same stage, so Docker builds it once).
FROM ${RUST_IMAGE} AS build
ARG PREBUILT=
WORKDIR /src
COPY . .
RUN set -e; mkdir -p /out; \
    if [ -n "$PREBUILT" ]; then \
      for f in ankusa-store intake mock-provider ankusa_filter.wasm; do \
        [ -f "$PREBUILT/$f" ] || { echo "PREBUILT=$PREBUILT has no $f (scripts/compose-images.sh builds it)" >&2; exit 1; }; \
        cp "$PREBUILT/$f" /out/; \
      done; \
    else \
      rustup target add wasm32-wasip1; \
      cargo build --release --locked -p ankusa-store -p ankusa-tools --bin ankusa-store --bin intake --bin mock-provider; \
      cargo build --release --locked -p ankusa-filter --target wasm32-wasip1; \
      cp target/release/ankusa-store target/release/intake target/release/mock-provider \
         target/wasm32-wasip1/release/ankusa_filter.wasm /out/; \
    fi

FROM ${ENVOY_IMAGE} AS edge
COPY --from=build /out/ankusa_filter.wasm /etc/ankusa/ankusa_filter.wasm
COPY docker/bin/ankusa-secret-env docker/bin/ankusa-http-check /usr/local/bin/
# The official image's unprivileged user (uid 101); the stand-in has it too.
USER envoy
# The store token and the signing secrets reach Envoy's environment from
# mounted files named in ANKUSA_SECRET_FILES; envoy/edge.yaml hands them to
# the filter by name.
ENTRYPOINT ["/usr/local/bin/ankusa-secret-env"]
CMD ["envoy", "-c", "/etc/envoy/edge.yaml"]

FROM ${BASE_IMAGE} AS runtime
RUN useradd --system --no-create-home --shell /usr/sbin/nologin ankusa
COPY docker/bin/ankusa-secret-env docker/bin/ankusa-http-check /usr/local/bin/
USER ankusa

FROM runtime AS store
COPY --from=build /out/ankusa-store /usr/local/bin/ankusa-store
ENV ANKUSA_STORE_LISTEN=0.0.0.0:7070
EXPOSE 7070
ENTRYPOINT ["ankusa-store"]

FROM runtime AS intake
COPY --from=build /out/intake /usr/local/bin/intake
USER root
RUN mkdir -p /data && chown ankusa /data
USER ankusa
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["intake"]
CMD ["--listen", "0.0.0.0:8080", "--data-dir", "/data"]

FROM runtime AS provider
COPY --from=build /out/mock-provider /usr/local/bin/mock-provider
# Its signing secret comes from a mounted file (ANKUSA_SECRET_FILES).
ENTRYPOINT ["ankusa-secret-env", "mock-provider"]
