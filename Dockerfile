# One image for kbot-server (package kbot-cli), kbot-load, kbot-agent and kbot-bench (see docker-compose.yml).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The qemu agent puts kbot-bench into the guest's initramfs, which has no
# dynamic loader: the image ships the static build (it runs on the host too).
RUN cargo build --release --locked -p kbot-cli -p kbot-load -p kbot-agent -p kbot-bench \
    && mkdir /out \
    && find target/release -maxdepth 1 -type f -executable -name 'kbot-*' -exec cp {} /out/ \; \
    && cp "$(scripts/build-kbot-bench-static)" /out/kbot-bench

FROM debian:bookworm-slim
# git for repo mirrors; the rest is what the agent needs to build and boot kernels.
RUN apt-get update && apt-get install -y --no-install-recommends \
        ca-certificates git qemu-system-x86 build-essential bc bison flex \
        libelf-dev libssl-dev cpio busybox-static ccache bubblewrap \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
COPY migrations /usr/share/kbot/migrations
# Not root: the server and the agent run as `kbot`; the agent builds kernels as
# itself inside bubblewrap. The directories are the compose file's volumes (a
# new volume takes its owner from the image).
RUN useradd --system --uid 10001 --home-dir /var/lib/kbot --shell /usr/sbin/nologin kbot \
    && install -d -o kbot -g kbot /var/lib/kbot/artifacts /var/lib/kbot-agent /run/kbot
USER kbot
WORKDIR /var/lib/kbot
EXPOSE 8080
CMD ["kbot-server", "serve"]
