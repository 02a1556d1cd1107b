# Stand-in for redis:7-alpine where no registry is reachable
# (scripts/compose-images.sh): Debian's redis-server on the local Debian base.
# Like the official image it runs as user redis in /data.
ARG BASE_IMAGE=ankusa-local/debian:bookworm
FROM ${BASE_IMAGE}
COPY *.deb /tmp/debs/
RUN dpkg -i /tmp/debs/*.deb >/dev/null \
 && rm -rf /tmp/debs \
 && mkdir -p /data && chown redis:redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]
