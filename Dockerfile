# Strata's container image: a static strata binary (and the static probe
# docker-compose.yml's healthcheck runs) on distroless, as a non-root user.
#
#   docker build -t strata:dev .
#   docker run --rm -p 127.0.0.1:9092:9092 -p 127.0.0.1:9644:9644 strata:dev
#
# Settings come from STRATA_* environment variables (see README.md,
# "Settings"); the ENV lines below only make the listeners reachable from
# outside the container and put the data on the volume.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
# .git is not in the build context: the commit comes in as a build arg
# (docker build --build-arg COMMIT=$(git rev-parse HEAD) .).
ARG COMMIT=unknown
ARG VERSION=dev
RUN go build -trimpath -ldflags "-s -w -X github.com/strata-io/strata/internal/buildinfo.version=${VERSION} -X github.com/strata-io/strata/internal/buildinfo.commitStamp=${COMMIT}" -o /out/strata ./cmd/strata \
 && go build -trimpath -ldflags "-s -w" -o /out/healthcheck ./deploy/healthcheck \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strata /strata
COPY --from=build /out/healthcheck /healthcheck
# The data directory, owned by nonroot (uid 65532) so the volume is writable.
COPY --from=build --chown=65532:65532 /out/data /var/lib/strata
USER nonroot:nonroot
ENV STRATA_LOG_DIRS=/var/lib/strata \
    STRATA_LISTENERS=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093 \
    STRATA_CONTROLLER_QUORUM_VOTERS=1@127.0.0.1:9093 \
    STRATA_ADMIN_LISTENER=0.0.0.0:9644
# 9092 Kafka clients, 9093 the controller quorum, 9644 /metrics, /healthz, /readyz.
EXPOSE 9092 9093 9644
VOLUME /var/lib/strata
ENTRYPOINT ["/strata"]
CMD ["serve"]
