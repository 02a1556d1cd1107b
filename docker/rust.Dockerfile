# The workspace's images, one per target:
#   edge     — Envoy 1.40.0 with the Ankusa filter (compiled here for wasm32-wasip1)
#              at /etc/ankusa/ankusa_filter.wasm; the bootstrap is mounted by docker-compose.yml
#   store    — ankusa-store (listens on $ANKUSA_STORE_LISTEN, Redis at $ANKUSA_REDIS_URL,
#              edge and operator tokens from $ANKUSA_STORE_EDGE_TOKEN_FILE and
#              $ANKUSA_STORE_OPERATOR_TOKEN_FILE; docker-compose.yml mounts two secrets)
#   intake   — the sample intake (journal in /data)
#   provider — the mock provider
# Nothing needs to be built on the host first: `docker compose up --build`.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# One build serves the three targets below (same stage, so Docker builds it once).
RUN cargo build --release --locked -p ankusa-store -p ankusa-tools --bin ankusa-store --bin intake --bin mock-provider \
 && mkdir -p /out \
 && cp target/release/ankusa-store target/release/intake target/release/mock-provider /out/

# The filter, compiled for Envoy's wasm runtime.
FROM rust:1-bookworm AS filter-build
RUN rustup target add wasm32-wasip1
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p ankusa-filter --target wasm32-wasip1 \
 && mkdir -p /out \
 && cp target/wasm32-wasip1/release/ankusa_filter.wasm /out/

FROM envoyproxy/envoy:v1.40.0 AS edge
COPY --from=filter-build /out/ankusa_filter.wasm /etc/ankusa/ankusa_filter.wasm

FROM debian:bookworm-slim AS runtime
RUN useradd --system --no-create-home ankusa
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
ENTRYPOINT ["mock-provider"]
