# syntax=docker/dockerfile:1
#
# tandem built with its CUDA code, for NVIDIA Ampere (sm_80) and Hopper (sm_90) GPUs.
#
#   docker build -t tandem:cuda .
#   docker run --rm --gpus all -p 50051:50051 -p 8000:8000 -p 9464:9464 \
#     -v /srv/models:/models:ro tandem:cuda serve --model /models/Zamba2-1.2B --device cuda
#
# Without `--device cuda` (or TANDEM_DEVICE=cuda) the model runs on the CPU backend, exactly as
# in Dockerfile.cpu. The GPU path (README, "GPU") is tested against the CPU on CUDA machines but
# has not yet run on a real GPU: check `tandem devices --self-test` first.
#
# Why Ubuntu 24.04: NVIDIA publishes its CUDA images for Ubuntu (and RHEL-like systems), not
# for Debian. Ubuntu 24.04 carries the library versions tandem is developed against on
# Debian 12 (gRPC 1.51.1, protobuf 3.21.12, Abseil 20220623), so the scripts CI runs build it
# unchanged. It differs in GCC (13; Debian 12 has 12), sentencepiece (0.2.0; 0.1.97) and the
# names of several library packages (column 2 of scripts/runtime-packages.txt), which the
# builder stage checks against the binary it built.
#
# The CUDA runtime is linked statically (kernels/CMakeLists.txt), so the runtime stage starts
# from CUDA's "base" image: no CUDA libraries, but the NVIDIA_* variables the NVIDIA container
# runtime reads to mount the host's driver (libcuda.so.1) into the container. CUDA 13 needs
# driver 580 or newer on the host.
#
# Signals: tandem blocks SIGTERM and SIGINT and takes them with sigwait(), which works when it
# is PID 1, so it drains (--grace-seconds) on `docker stop` and on a Kubernetes pod's
# termination without an init process; `docker run --init` (tini) does no harm either.

ARG CUDA_VERSION=13.0.2
ARG UBUNTU_VERSION=24.04

# ---- builder: the same scripts as CI ----------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS builder
WORKDIR /src
COPY scripts/setup.sh scripts/
RUN scripts/setup.sh --build-only
COPY . .
# TANDEM_NATIVE=OFF: baseline x86-64 code, since the image runs on CPUs other than the
# builder's; the GEMM and Hydragen kernels still choose AVX2 or AVX-512 at run time.
RUN scripts/build.sh -DTANDEM_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DTANDEM_NATIVE=OFF \
      -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCH=OFF \
 && tests/deploy/runtime_libs_test.sh --libs-only build/release/tandem \
 && mkdir -p /out \
 && strip --strip-debug -o /out/tandem build/release/tandem

# ---- runtime ------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-base-ubuntu${UBUNTU_VERSION}
ARG CUDA_VERSION
ARG UBUNTU_VERSION
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="tandem" \
      org.opencontainers.image.description="gRPC inference server for hybrid Mamba-attention language models (CUDA build)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:${CUDA_VERSION}-base-ubuntu${UBUNTU_VERSION}"

# Only the packages of the libraries the binary loads (scripts/runtime-packages.txt), and a
# fixed non-root user whose UID Kubernetes' runAsNonRoot can check.
RUN --mount=type=bind,source=scripts,target=/tmp/scripts \
    bash /tmp/scripts/install-runtime-packages.sh \
 && groupadd --gid 10001 tandem \
 && useradd --uid 10001 --gid tandem --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tandem \
 && install -d -o tandem -g tandem /models

COPY --from=builder /out/tandem /usr/local/bin/tandem
# `tandem serve` without --model finds the bundled model beside the binary (../share/tandem).
COPY --from=builder /src/bundled/tandem-tiny-chat /usr/local/share/tandem/tandem-tiny-chat
# Every shared library resolves here, or the build stops now rather than at the first start.
RUN tandem --help > /dev/null

# Every `serve` flag also reads TANDEM_<FLAG>: listen on all interfaces and serve the OpenAI
# HTTP API on 8000 even when the command is overridden. The command line still wins
# (--host 127.0.0.1, --http-port 0 turns the HTTP API off).
ENV TANDEM_HOST=0.0.0.0 \
    TANDEM_HTTP_PORT=8000
VOLUME ["/models"]
# gRPC (tandem.v1, health, reflection); HTTP, for the OpenAI-compatible API
# (docs/OPENAI_API.md); Prometheus /metrics.
EXPOSE 50051 8000 9464
USER 10001:10001
ENTRYPOINT ["tandem"]
CMD ["serve", "--host", "0.0.0.0"]
