# Stand-in for prom/prometheus:v2.42.0 where no registry is reachable
# (scripts/compose-images.sh): Debian's prometheus 2.42 (with promtool) on the
# local Debian base, with wget for its healthcheck. Like the official image it runs as nobody, its entrypoint
# is prometheus and its data is in /prometheus.
ARG BASE_IMAGE=ankusa-local/debian:bookworm
FROM ${BASE_IMAGE}
COPY *.deb /tmp/debs/
RUN dpkg -i /tmp/debs/*.deb >/dev/null \
 && rm -rf /tmp/debs \
 && mkdir -p /prometheus && chown nobody:nogroup /prometheus
WORKDIR /prometheus
USER nobody
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
