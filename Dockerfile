# The image of kubedeploy's controllers-only binary, for users who build with
# Docker. CI builds the same image without a daemon: go run ./cmd/kubedeploy-image
# (see internal/image). Build from the repository root:
#
#   docker build -t ghcr.io/kubedeploy/kubedeploy-controllers:dev --build-arg VERSION=v0.2.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
ARG VERSION=""
ARG TARGETARCH=amd64
RUN if [ -n "$VERSION" ]; then LDFLAGS="-X github.com/kubedeploy/kubedeploy/internal/buildinfo.version=$VERSION"; fi; \
    CGO_ENABLED=0 GOOS=linux GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "$LDFLAGS" -o /out/kubedeploy-controllers ./cmd/kubedeploy-controllers

# distroless/static: no shell, no package manager; "nonroot" is uid/gid 65532,
# which deploy/20-statefulset.yaml's runAsUser expects.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/kubedeploy-controllers /kubedeploy-controllers
USER 65532:65532
ENTRYPOINT ["/kubedeploy-controllers"]
