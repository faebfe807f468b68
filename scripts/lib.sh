# shellcheck shell=bash
# Shared helpers for scripts/setup, scripts/tour and scripts/test.
# Source it; it defines functions and a few variables and runs nothing by itself.
#
#   PA_ROOT        the repository root (absolute)
#   pa_setup       checks the Debian packages (installs them as root), finds nvcc and a GPU;
#                  exports PATH (with /usr/local/cuda/bin when nvcc lives only there),
#                  PA_HAVE_NVCC (0/1), PA_HAVE_GPU (0/1), PA_GPU_NAME
#   pa_pick_preset prints the configure preset to use: $PAGEDATTN_PRESET, else cuda when nvcc
#                  is available, else cpu
#   pa_configure   runs `cmake --preset <name>` unless build/<name> was already configured
#                  that way (with the current CMakePresets.json)
#   pa_point_current <name>
#                  points the link build/current at build/<name> (the pages' commands use it)
#   pa_forget_undepended <build dir>
#                  removes the objects whose entry in Ninja's dependency log lists no headers,
#                  so the next build compiles them again

PA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Everything the build, the tests, the docs and the notebooks need on Debian 12. The notebook
# stack is Debian's: it lives under /usr/bin/python3, not under whatever python3 comes first on
# PATH. doxygen-awesome-css is the docs' theme (the docs build without it, plainer). chromium
# renders the built pages headless for scripts/check_html --browser. patch builds the solved
# exercises (exercises/solutions/*.diff).
PA_PACKAGES=(
  cmake ninja-build g++ patch
  catch2 libeigen3-dev libbenchmark-dev libbenchmark-tools libboost-context-dev
  doxygen graphviz doxygen-awesome-css chromium
  python3 jupyter-nbconvert python3-nbclient python3-ipykernel python3-matplotlib python3-nbformat
)

pa_say() { printf '%s\n' "$*"; }
pa_die() { printf '%s\n' "$@" >&2; return 1; }  # one line per argument

# Prints the packages of PA_PACKAGES that are not installed, one per line.
pa_missing_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    pa_die "scripts/setup: dpkg-query not found; this script knows Debian/Ubuntu only." \
           "Install the equivalent of: ${PA_PACKAGES[*]} (or set PAGEDATTN_SKIP_SETUP=1)"
    return 1
  fi
  local installed
  # One query for all packages; unknown packages go to stderr and are simply absent here.
  installed="$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PA_PACKAGES[@]}" 2>/dev/null || true)"
  local package
  for package in "${PA_PACKAGES[@]}"; do
    if ! grep -Eq "^${package//+/\\+}(:[a-z0-9]+)? ii " <<<"${installed}"; then
      printf '%s\n' "${package}"
    fi
  done
}

pa_install_packages() {
  local missing=("$@")
  local command=(apt-get install -y --no-install-recommends "${missing[@]}")
  if [[ "$(id -u)" != 0 ]]; then
    pa_die "scripts/setup: missing Debian packages: ${missing[*]}" \
           "Install them with:" \
           "  sudo apt-get update && sudo ${command[*]}"
    return 1
  fi
  pa_say "scripts/setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q || return 1
  "${command[@]}" -q || return 1
  local still
  still="$(pa_missing_packages)" || return 1
  if [[ -n "${still}" ]]; then
    pa_die "scripts/setup: still missing after apt-get install: $(tr '\n' ' ' <<<"${still}")"
    return 1
  fi
}

# Finds nvcc (PATH, else /usr/local/cuda/bin, which CMake does not search by itself) and a GPU.
pa_detect_cuda() {
  PA_HAVE_NVCC=0
  PA_HAVE_GPU=0
  PA_GPU_NAME=""
  if command -v nvcc >/dev/null 2>&1; then
    PA_HAVE_NVCC=1
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH="/usr/local/cuda/bin:${PATH}"
    PA_HAVE_NVCC=1
  fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    local listing
    if listing="$(timeout 20 nvidia-smi -L 2>/dev/null)" && [[ -n "${listing}" ]]; then
      PA_HAVE_GPU=1
      # "GPU 0: NVIDIA H200 (UUID: GPU-...)" -> "NVIDIA H200"
      PA_GPU_NAME="$(head -n 1 <<<"${listing}" | sed -E 's/^GPU [0-9]+: //; s/ \(UUID:.*$//')"
    fi
  fi
  export PA_HAVE_NVCC PA_HAVE_GPU PA_GPU_NAME
}

pa_setup() {
  if [[ -n "${PA_SETUP_DONE:-}" ]]; then
    return 0
  fi
  if [[ "${PAGEDATTN_SKIP_SETUP:-0}" == 1 ]]; then
    pa_say "scripts/setup: package check skipped (PAGEDATTN_SKIP_SETUP=1)"
  else
    local missing
    missing="$(pa_missing_packages)" || return 1
    if [[ -z "${missing}" ]]; then
      pa_say "scripts/setup: all ${#PA_PACKAGES[@]} Debian packages present"
    else
      # shellcheck disable=SC2086  # one package per word
      pa_install_packages ${missing} || return 1
    fi
  fi

  pa_detect_cuda
  if [[ "${PA_HAVE_GPU}" == 1 && "${PA_HAVE_NVCC}" == 1 ]]; then
    pa_say "GPU: ${PA_GPU_NAME}"
  elif [[ "${PA_HAVE_GPU}" == 1 ]]; then
    pa_say "GPU: ${PA_GPU_NAME} (but nvcc not found: CPU-only build)"
  elif [[ "${PA_HAVE_NVCC}" == 1 ]]; then
    pa_say "CUDA: building the GPU path (no GPU here: GPU tests will be skipped)"
  else
    pa_say "CUDA: nvcc not found, CPU-only build"
  fi
  export PA_SETUP_DONE=1
}

pa_pick_preset() {
  if [[ -n "${PAGEDATTN_PRESET:-}" ]]; then
    printf '%s\n' "${PAGEDATTN_PRESET}"
  elif [[ "${PA_HAVE_NVCC:-0}" == 1 ]]; then
    printf 'cuda\n'
  else
    printf 'cpu\n'
  fi
}

# pa_configure <preset>: configures build/<preset> with `cmake --preset` unless that was already
# done with the current CMakePresets.json (a stamp in the build folder remembers); afterwards
# Ninja re-runs CMake by itself whenever a CMakeLists.txt changes. A folder configured by hand
# (no stamp) is configured once with the preset, so it gets the preset's settings.
pa_configure() {
  local preset="$1"
  local build_dir="${PA_ROOT}/build/${preset}"
  local cache="${build_dir}/CMakeCache.txt"
  local stamp="${build_dir}/.scripts-configured"
  local want
  want="${preset} $(cksum <"${PA_ROOT}/CMakePresets.json")"
  if [[ -f "${cache}" && -f "${build_dir}/build.ninja" && -f "${stamp}" && "$(<"${stamp}")" == "${want}" ]]; then
    return 0
  fi
  if [[ -f "${cache}" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "${cache}"; then
    pa_die "build/${preset} was configured with another generator; remove it (rm -rf build/${preset}) and run again"
    return 1
  fi
  (cd "${PA_ROOT}" && cmake --preset "${preset}") || return 1
  printf '%s\n' "${want}" >"${stamp}"
}

# pa_point_current <preset>: points the link build/current at build/<preset>, the folder the
# scripts built, so that the pages' commands (`build/current/steps/...`) run as written whichever
# preset was picked. A build/current that is not a link is left alone, with a warning.
pa_point_current() {
  local link="${PA_ROOT}/build/current"
  if [[ -e "${link}" && ! -L "${link}" ]]; then
    pa_say "build/current is not a link; leaving it (the pages' commands use it: remove it and run again)" >&2
    return 0
  fi
  ln -sfn "$1" "${link}"
}

# pa_forget_undepended <build dir>: Ninja rebuilds an object when a header it includes changes only
# if its entry in the dependency log (.ninja_deps) lists that header. An entry with no headers at
# all (left by a compile that was interrupted, or an object written by something other than
# Ninja) keeps the object "up to date" through any header change: on 2026-12-01 step 08's CUDA
# object, older than three commits to the headers it includes, went into recorded runs that way.
# Every compiled source of this project includes headers, so such an object is removed, and the
# next build compiles it again.
pa_forget_undepended() {
  local build_dir="$1"
  [[ -f "${build_dir}/.ninja_deps" ]] || return 0
  local listing object
  listing="$(ninja -C "${build_dir}" -t deps)" || return 1
  while read -r object; do
    [[ -n "${object}" ]] || continue
    pa_say "${build_dir}/${object}: no header dependencies recorded; compiling it again"
    rm -f "${build_dir}/${object}"
  done < <(awk '$2 == "#deps" && $3 == "0," && $1 ~ /\.o:$/ { sub(/:$/, "", $1); print $1 }' <<<"${listing}")
}
