# Corral in a container (Debian 12): a build stage with the compiler and the -dev packages,
# and a runtime stage with only the shared libraries the binary links, run by an unprivileged
# user. See docs/DEPLOY.md.
#   docker build -t corral .
#   docker run -d --init -p 11434:11434 -v corral-models:/models corral
# tests/integration/deploy.test.sh checks both package lists: the build stage's against
# scripts/install-deps.sh, the runtime stage's against the libraries the binary needs.

FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        cmake ninja-build gcc make pkg-config \
        libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libssl-dev libpcre2-dev \
        libutf8proc-dev libedit-dev libcmocka-dev \
        libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev zlib1g-dev libzstd-dev \
        libsndfile1-dev libsamplerate0-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset release \
 && cmake --build --preset release --target corral

FROM debian:12-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        ca-certificates libmicrohttpd12 libcurl4 libjansson4 libssl3 libpcre2-8-0 \
        libutf8proc2 libedit2 libpng16-16 libjpeg62-turbo libwebp7 libgif7 libzstd1 \
        libsndfile1 libsamplerate0 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --user-group --home-dir /var/lib/corral --create-home \
        --shell /usr/sbin/nologin corral \
 && install -d -o corral -g corral -m 0750 /models
COPY --from=build /src/build/release/corral /usr/local/bin/corral
USER corral
# 0.0.0.0: reachable through the published port (the Host-header guard applies to a server
# bound to loopback only); put a proxy with TLS and authentication in front (docs/DEPLOY.md).
ENV CORRAL_HOST=0.0.0.0:11434 \
    CORRAL_MODELS=/models \
    HOME=/var/lib/corral
VOLUME /models
EXPOSE 11434
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/corral"]
CMD ["serve"]
