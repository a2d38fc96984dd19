# callcheck's container image: the binary, the CA certificates it needs to reach an HTTPS
# endpoint, and the task corpus at /callcheck/tasks (the working folder), so that
# `docker run IMAGE collect --config /callcheck/callcheck.toml` works with only a config
# mounted. Used by examples/k8s-indexed-job.yaml; published by .github/workflows/image.yml.
#
#   docker build -t callcheck .
#   docker run --rm -v "$PWD/out:/callcheck/out" callcheck demo --runs out/runs --out out/site
#
# Two stages: the toolchain and the build tree stay in the first; the second is Debian's slim
# image (glibc for the binary, and the shell, mkdir and cp the Kubernetes example's jobs run)
# with ca-certificates added.

ARG RUST_VERSION=1.89
ARG DEBIAN=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN} AS build
WORKDIR /src
# The crates are downloaded first, on their own layer: a change to callcheck's sources does not
# download them again. Empty main.rs and lib.rs let cargo read the manifest's targets.
COPY Cargo.toml Cargo.lock build.rs ./
RUN mkdir -p src tasks templates \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo fetch --locked
COPY src src
COPY templates templates
COPY tasks tasks
RUN cargo build --release --locked \
    && install -m 0755 target/release/callcheck /usr/local/bin/callcheck \
    && callcheck --version

FROM debian:${DEBIAN}-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/callcheck /usr/local/bin/callcheck
COPY tasks /callcheck/tasks
WORKDIR /callcheck
# A user of its own: nothing in the image runs as root.
RUN useradd --uid 10001 --home-dir /callcheck --no-create-home callcheck \
    && chown callcheck /callcheck
USER callcheck
ENTRYPOINT ["callcheck"]
CMD ["--help"]
