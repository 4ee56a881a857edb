# Sourced by the quick-start scripts: makes sure the Debian packages nlbudget needs are
# installed. As root it installs what is missing with apt-get; otherwise it prints the exact
# apt-get line and stops.
#
# Why each package is here: docs/dependencies.md.
NLB_DEBIAN_PACKAGES=(
  cmake g++ make pkg-config
  libeigen3-dev libxsimd-dev nlohmann-json3-dev libutf8proc-dev
  libboost-test-dev libbenchmark-dev
  libopenblas-dev libblis-dev libdnnl-dev libxsmm-dev
  libthrust-dev
  libopenmpi-dev openmpi-bin
)

nlb_ensure_packages() {
  local wanted=("${NLB_DEBIAN_PACKAGES[@]}" "$@")
  local missing=()
  for pkg in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "nlbudget: installing missing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "nlbudget: missing Debian packages. Install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}

# Parallel build jobs: every core this machine has.
nlb_jobs() { nproc 2>/dev/null || echo 2; }
